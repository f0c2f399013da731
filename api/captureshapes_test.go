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
	h := startGateway(t, nil, func(_ *Config, d *Deps) { d.Tokenizer = tok })
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
			s.PromptTokens, hs = measure(req.Path, req.Headers, body)
			if len(tools) > 0 {
				n, _ := measure(req.Path, req.Headers, without(t, fields, "tools", false))
				s.ToolTokens = s.PromptTokens - n
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
