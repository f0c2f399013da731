package api

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/tokenizer"
)

var updateShapes = flag.Bool("update-shapes", false, "rewrite testdata/client-shapes.json from the recorded sessions in $HEARTH_CAPTURES")

// capturedRequest is one recorded request of a client session, as the
// recording endpoint wrote it (NNN-METHOD-path.json beside the exact body
// in NNN-METHOD-path.body).
type capturedRequest struct {
	Method     string          `json:"method"`
	Path       string          `json:"path"`
	ReceivedAt time.Time       `json:"received_at"`
	Headers    [][2]string     `json:"headers"`
	Body       json.RawMessage `json:"body"`
}

// ClientShapes is what the recorded sessions measure once replayed through
// the gateway with the Qwen3 tokenizer and chat template:
// testdata/client-shapes.json, read by package bench's tests to hold its
// client presets to these figures. It holds counts only, none of the
// recorded texts.
type clientShapes struct {
	Note     string          `json:"note"`
	Requests []capturedShape `json:"requests"`
}

// capturedShape measures one recorded request.
type capturedShape struct {
	Client string `json:"client"` // claude-code, codex or opencode
	Run    string `json:"run"`    // the capture directory
	File   string `json:"file"`
	// Kind is "turn" for a request of the agent loop (it carries the tool
	// definitions) and "side" for one beside it (OpenCode's title).
	Kind  string `json:"kind"`
	Turn  int    `json:"turn"` // 0-based among the run's turns; -1 for a side request
	Tools int    `json:"tools"`
	// PromptTokens is the prompt the engine gets; ToolTokens how many of
	// them the tool definitions make (the prompt without them is that much
	// shorter).
	PromptTokens int `json:"prompt_tokens"`
	ToolTokens   int `json:"tool_tokens"`
	// SharedTokens is how many leading tokens, in whole 16-token blocks,
	// the same request of the client's other run has too: the prefix
	// sessions share.
	SharedTokens int `json:"shared_tokens"`
	// For a first prompt (turn 0), where the per-project part falls.
	// ToolsStartTokens is how many leading tokens come before the tool
	// definitions: the tokens the prompt has in common with the same
	// request without its tools (the chat template renders the system
	// text, then the tools, then the messages). OtherProjectSharedTokens
	// is how many leading tokens, in whole 16-token blocks, the prompt
	// shares with the same request sent from another project directory on
	// another date (see otherSession): what a session in another project
	// finds in the cache. OtherDateSharedTokens is the same for the
	// request sent from the same directory on that other date.
	ToolsStartTokens         int `json:"tools_start_tokens,omitempty"`
	OtherProjectSharedTokens int `json:"other_project_shared_tokens,omitempty"`
	OtherDateSharedTokens    int `json:"other_date_shared_tokens,omitempty"`
	// For a later turn: the tokens the previous turn's answer (the tool
	// call) and the tool result added, and the time from the previous
	// request to this one (the client ran the tool meanwhile; the
	// recording endpoint answered at once).
	AnswerTokens int   `json:"answer_tokens,omitempty"`
	ResultTokens int   `json:"result_tokens,omitempty"`
	PauseMS      int64 `json:"pause_ms,omitempty"`
	MaxTokens    int   `json:"max_tokens,omitempty"`
}

// captureClients maps the capture directories' prefixes to client names.
var captureClients = []struct{ prefix, client string }{
	{"claude-", "claude-code"}, {"codex-", "codex"}, {"opencode-", "opencode"},
}

// TestCaptureShapes derives the figures of package bench's client presets
// from the sessions recorded from the real clients: it replays every
// recorded request through the gateway with the real Qwen3 tokenizer and
// template and compares what it measures with testdata/client-shapes.json
// (-update-shapes rewrites it). The recordings hold the vendors' prompt
// texts, so they stay outside the repository: HEARTH_CAPTURES names their
// directory (captures/ of the shared reference material).
func TestCaptureShapes(t *testing.T) {
	dir := os.Getenv("HEARTH_CAPTURES")
	if dir == "" {
		t.Skip("HEARTH_CAPTURES is not set: the recorded client sessions are not in the repository; " +
			"testdata/client-shapes.json keeps what they measured")
	}
	tok, err := tokenizer.Qwen3()
	if err != nil {
		t.Fatalf("the Qwen3 tokenizer does not load: %v", err)
	}
	runs, err := filepath.Glob(filepath.Join(dir, "*-run*"))
	if err != nil || len(runs) == 0 {
		t.Fatalf("no recorded runs under %s (%v)", dir, err)
	}
	rec := &renderRecorder{Model: tok}
	h := startGateway(t, nil, func(_ *Config, d *Deps) { d.Tokenizer = rec })
	measure := func(path string, headers [][2]string, body []byte) (int, []tokenizer.SeqHash) {
		t.Helper()
		before := len(h.router.routed)
		f := fixture{Path: path, Headers: map[string]string{}, Body: body}
		for _, kv := range headers {
			switch strings.ToLower(kv[0]) {
			case "content-length", "host", "accept-encoding", "connection":
			default:
				f.Headers[kv[0]] = kv[1]
			}
		}
		resp, out := h.postFixture(t, f)
		if resp.StatusCode != http.StatusOK || len(h.router.routed) != before+1 {
			t.Fatalf("%s: status %d: %.300s", path, resp.StatusCode, out)
		}
		r := h.router.routed[before]
		return r.PromptTokens, r.Hashes
	}
	// measureIDs measures as measure does and returns the prompt's token
	// ids too: those of the rendering the gateway routed (its block hashes
	// are the routed ones).
	measureIDs := func(path string, headers [][2]string, body []byte) (int, []tokenizer.SeqHash, []uint32) {
		t.Helper()
		mark := rec.mark()
		n, hs := measure(path, headers, body)
		for _, text := range rec.since(mark) {
			ids := tok.Encode(text)
			if slices.Equal(tokenizer.BlockHashes(ids, tokenizer.DefaultBlockSize), hs) && len(ids) == n {
				return n, hs, ids
			}
		}
		t.Fatalf("%s: none of the renderings gives the routed prompt", path)
		return 0, nil, nil
	}

	var shapes clientShapes
	hashes := map[string][]tokenizer.SeqHash{} // by client, kind, turn and run
	for _, run := range runs {
		base := filepath.Base(run)
		client := ""
		for _, c := range captureClients {
			if strings.HasPrefix(base, c.prefix) {
				client = c.client
			}
		}
		if client == "" {
			t.Fatalf("%s: unknown client", base)
		}
		files, _ := filepath.Glob(filepath.Join(run, "*-POST-*.json"))
		slices.Sort(files)
		turn := 0
		var prev *capturedShape
		var prevAt time.Time
		for _, file := range files {
			meta, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var req capturedRequest
			if err := json.Unmarshal(meta, &req); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			body, err := os.ReadFile(strings.TrimSuffix(file, ".json") + ".body")
			if err != nil {
				t.Fatal(err)
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(body, &fields); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			var tools []json.RawMessage
			_ = json.Unmarshal(fields["tools"], &tools)
			s := capturedShape{Client: client, Run: base, File: filepath.Base(file), Kind: "side", Turn: -1, Tools: len(tools)}
			if len(tools) > 0 {
				s.Kind, s.Turn = "turn", turn
				turn++
			}
			for _, k := range []string{"max_tokens", "max_output_tokens"} {
				_ = json.Unmarshal(fields[k], &s.MaxTokens)
			}
			var hs []tokenizer.SeqHash
			var ids []uint32
			s.PromptTokens, hs, ids = measureIDs(req.Path, req.Headers, body)
			if len(tools) > 0 {
				n, _, bare := measureIDs(req.Path, req.Headers, without(t, fields, "tools", false))
				s.ToolTokens = s.PromptTokens - n
				if s.Kind == "turn" && s.Turn == 0 {
					s.ToolsStartTokens = commonPrefix(ids, bare)
					_, other := measure(req.Path, req.Headers, otherSession(t, file, body, req.ReceivedAt, otherProjectDir))
					s.OtherProjectSharedTokens = commonPrefix(hs, other) * tokenizer.DefaultBlockSize
					_, other = measure(req.Path, req.Headers, otherSession(t, file, body, req.ReceivedAt, captureProject))
					s.OtherDateSharedTokens = commonPrefix(hs, other) * tokenizer.DefaultBlockSize
				}
			}
			if s.Kind == "turn" && prev != nil {
				// The prompt without its last item (the tool result) ends
				// with the previous answer.
				field := "messages"
				if _, ok := fields["input"]; ok {
					field = "input"
				}
				n, _ := measure(req.Path, req.Headers, without(t, fields, field, true))
				s.ResultTokens = s.PromptTokens - n
				s.AnswerTokens = n - prev.PromptTokens
				s.PauseMS = req.ReceivedAt.Sub(prevAt).Milliseconds()
			}
			key := client + "/" + s.Kind + "/" + string(rune('0'+s.Turn+1))
			if other, ok := hashes[key]; ok {
				s.SharedTokens = commonPrefix(other, hs) * tokenizer.DefaultBlockSize
				for i := range shapes.Requests {
					if r := &shapes.Requests[i]; r.Client == client && r.Kind == s.Kind && r.Turn == s.Turn {
						r.SharedTokens = s.SharedTokens
					}
				}
			}
			hashes[key] = hs
			shapes.Requests = append(shapes.Requests, s)
			if s.Kind == "turn" {
				prev = &shapes.Requests[len(shapes.Requests)-1]
				prevAt = req.ReceivedAt
			}
		}
	}
	shapes.Note = "Measured by api's TestCaptureShapes from the recorded client sessions (captures/*-run*), " +
		"replayed through the gateway with the Qwen3 tokenizer and chat template. Counts only."
	got, err := json.MarshalIndent(shapes, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "client-shapes.json")
	if *updateShapes {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the recorded sessions measure differently from %s; run with -update-shapes to rewrite it:\n%s", golden, got)
	}
}

// captureProject is the directory the clients were recorded in;
// otherProjectDir stands for another project of the same user.
const (
	captureProject  = "/tmp/captures/proj"
	otherProjectDir = "/home/dev/src/other-service"
)

// otherSession returns a recorded first request as the same client would
// send it from project directory dir on another date, in another month:
// the capture's directory replaced by dir, also in the form Claude Code
// names its per-project memory directory after (every character other than
// a letter or digit a '-'), and the recording's date, in each form the
// clients write it (2026-11-29, "Sun Nov 29 2026", "November 2026"), by
// the other date. The per-user parts (the home directories, Codex's skills
// path) stay.
func otherSession(t *testing.T, file string, body []byte, at time.Time, dir string) []byte {
	t.Helper()
	day := at.UTC()
	other := time.Date(2027, time.March, 16, 10, 0, 0, 0, time.UTC)
	if day.Year() == other.Year() && day.Month() == other.Month() {
		other = other.AddDate(0, 2, 0)
	}
	dashed := func(p string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
				return r
			}
			return '-'
		}, p)
	}
	if !bytes.Contains(body, []byte(captureProject)) {
		t.Fatalf("%s: the first prompt does not name the project directory %s", file, captureProject)
	}
	pairs := []string{captureProject, dir, dashed(captureProject), dashed(dir)}
	for _, layout := range []string{"2006-01-02", "Mon Jan 02 2006", "January 2006"} {
		pairs = append(pairs, day.Format(layout), other.Format(layout))
	}
	out := []byte(strings.NewReplacer(pairs...).Replace(string(body)))
	if bytes.Contains(out, []byte(day.Format("2006-01-02"))) || bytes.Contains(out, []byte(day.Format("Jan 02"))) {
		t.Fatalf("%s: the recording's date is left in another form", file)
	}
	return out
}

// renderRecorder is the Qwen3 tokenizer keeping the prompts the gateway
// renders, so that a test can read the tokens of what it routed.
type renderRecorder struct {
	*tokenizer.Model
	mu    sync.Mutex
	texts []string
}

func (r *renderRecorder) ApplyChatTemplate(req tokenizer.ChatRequest) (string, error) {
	s, err := r.Model.ApplyChatTemplate(req)
	if err == nil {
		r.mu.Lock()
		r.texts = append(r.texts, s)
		r.mu.Unlock()
	}
	return s, err
}

func (r *renderRecorder) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.texts)
}

// since returns the renderings from mark on.
func (r *renderRecorder) since(mark int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.texts[mark:])
}

// without returns the request body with field removed or, with last, with
// the last element of the array field removed.
func without(t *testing.T, fields map[string]json.RawMessage, field string, last bool) []byte {
	t.Helper()
	out := make(map[string]json.RawMessage, len(fields))
	for k, v := range fields {
		out[k] = v
	}
	if last {
		var items []json.RawMessage
		if err := json.Unmarshal(fields[field], &items); err != nil || len(items) == 0 {
			t.Fatalf("%s: not a non-empty array: %v", field, err)
		}
		out[field], _ = json.Marshal(items[:len(items)-1])
	} else {
		delete(out, field)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
