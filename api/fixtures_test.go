package api

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/tokenizer"
)

// fixture is a recorded-shape client request (written for these tests, in
// the structure Claude Code, Codex CLI and OpenCode use).
type fixture struct {
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
}

func loadFixture(t *testing.T, name string) fixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

// with returns a copy of f whose body has every old replaced by new.
func (f fixture) with(pairs ...string) fixture {
	s := string(f.Body)
	h := map[string]string{}
	for k, v := range f.Headers {
		h[k] = v
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
		for k, v := range h {
			h[k] = strings.ReplaceAll(v, pairs[i], pairs[i+1])
		}
	}
	f.Body, f.Headers = json.RawMessage(s), h
	return f
}

type sseEvent struct {
	Name string
	Data string
}

func parseSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Data != "" || cur.Name != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			cur.Data += line[len("data: "):]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// send posts a fixture and parses the event stream of the answer.
func (h *harness) send(t *testing.T, f fixture) (*http.Response, []sseEvent) {
	t.Helper()
	resp, body := h.postFixture(t, f)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d: %s", f.Path, resp.StatusCode, body)
	}
	return resp, parseSSE(t, strings.NewReader(body))
}

// answer is what a client would make of a streamed answer.
type answer struct {
	text     string
	toolName string
	toolArgs string
	finish   string
}

func decodeAnswer(t *testing.T, d dialect, events []sseEvent) answer {
	t.Helper()
	var a answer
	switch d {
	case dialectAnthropic:
		var names []string
		for _, ev := range events {
			names = append(names, ev.Name)
			var v struct {
				ContentBlock struct{ Type, Name string } `json:"content_block"`
				Delta        struct {
					Type, Text  string
					PartialJSON string `json:"partial_json"`
					StopReason  string `json:"stop_reason"`
				} `json:"delta"`
			}
			if err := json.Unmarshal([]byte(ev.Data), &v); err != nil {
				t.Fatalf("event %s: %v", ev.Name, err)
			}
			switch {
			case ev.Name == "content_block_start" && v.ContentBlock.Type == "tool_use":
				a.toolName = v.ContentBlock.Name
			case v.Delta.Type == "text_delta":
				a.text += v.Delta.Text
			case v.Delta.Type == "input_json_delta":
				a.toolArgs += v.Delta.PartialJSON
			case ev.Name == "message_delta":
				a.finish = v.Delta.StopReason
			}
		}
		if len(names) < 4 || names[0] != "message_start" || names[1] != "ping" || names[len(names)-2] != "message_delta" || names[len(names)-1] != "message_stop" {
			t.Fatalf("anthropic event sequence %v", names)
		}
	case dialectResponses:
		for _, ev := range events {
			var v struct {
				Type     string                                 `json:"type"`
				Delta    string                                 `json:"delta"`
				Item     struct{ Type, Name, Arguments string } `json:"item"`
				Response struct{ Status string }                `json:"response"`
			}
			if err := json.Unmarshal([]byte(ev.Data), &v); err != nil || v.Type != ev.Name {
				t.Fatalf("event %s: type %q, %v", ev.Name, v.Type, err)
			}
			switch v.Type {
			case "response.output_text.delta":
				a.text += v.Delta
			case "response.output_item.done":
				if v.Item.Type == "function_call" {
					a.toolName, a.toolArgs = v.Item.Name, v.Item.Arguments
				}
			case "response.completed":
				a.finish = v.Response.Status
			}
		}
		if events[0].Name != "response.created" || events[len(events)-1].Name != "response.completed" {
			t.Fatalf("responses events start %s end %s", events[0].Name, events[len(events)-1].Name)
		}
	default:
		if events[len(events)-1].Data != "[DONE]" {
			t.Fatalf("chat stream does not end with [DONE]")
		}
		for _, ev := range events[:len(events)-1] {
			var ch chatChunk
			if err := json.Unmarshal([]byte(ev.Data), &ch); err != nil {
				t.Fatal(err)
			}
			for _, c := range ch.Choices {
				a.text += c.Delta.Content
				for _, tc := range c.Delta.ToolCalls {
					if tc.Function.Name != "" {
						a.toolName = tc.Function.Name
					}
					a.toolArgs += tc.Function.Arguments
				}
				if c.FinishReason != nil {
					a.finish = *c.FinishReason
				}
			}
		}
	}
	return a
}

var conversationFixtures = []struct {
	client      string
	dialect     dialect
	turn1       string
	turn2       string
	session     string
	tool        string
	finishTool  string
	finishText  string
	otherClient []string // replacements that make another session of the same client
}{
	{"claude-code", dialectAnthropic, "claude-turn1.json", "claude-turn2.json", "7a1f0c52-0d3e-4b8e-9a61-2f4c0b9d1e01", "Shell", "tool_use", "end_turn",
		[]string{"7a1f0c52-0d3e-4b8e-9a61-2f4c0b9d1e01", "11111111-2222-3333-4444-555555555555", "cc_version=2.1.197.a41", "cc_version=2.1.197.b77", "cch=5f2e1", "cch=0aa3c", "Which files are in this folder?", "What does main.go do?"}},
	{"codex", dialectResponses, "codex-turn1.json", "codex-turn2.json", "0b9e7a44-1c2d-7e3f-8a90-5d6e7f801234", "exec_command", "completed", "completed",
		[]string{"0b9e7a44-1c2d-7e3f-8a90-5d6e7f801234", "0c0c0c0c-1c2d-7e3f-8a90-000000000000", "msg_aa0", "msg_cc0", "Which files are in this folder?", "What does main.go do?"}},
	{"opencode", dialectOpenAI, "opencode-turn1.json", "opencode-turn2.json", "ses_4c1d9e0aa7fbQx", "bash", "tool_calls", "stop",
		[]string{"ses_4c1d9e0aa7fbQx", "ses_ffffffffffffZz", "Which files are in this folder?", "What does main.go do?"}},
}

// TestFixtureConversations drives each client's two turns through the
// gateway: turn 1 gets a tool call, turn 2 carries the result back.
func TestFixtureConversations(t *testing.T) {
	for _, tc := range conversationFixtures {
		t.Run(tc.client, func(t *testing.T) {
			h := startGateway(t, nil, withKeys("sk-fixture"))
			if tc.client == "opencode" {
				_, ev := h.send(t, loadFixture(t, "opencode-title.json"))
				if a := decodeAnswer(t, tc.dialect, ev); a.text == "" || a.toolName != "" {
					t.Fatalf("title request answer %+v", a)
				}
			}
			resp, ev := h.send(t, loadFixture(t, tc.turn1))
			if resp.Header.Get("x-hearth-worker") != "w1" || resp.Header.Get("x-hearth-prompt-blocks") == "" || resp.Header.Get("x-hearth-cached-blocks") != "3" {
				t.Errorf("routing headers %v", resp.Header)
			}
			a1 := decodeAnswer(t, tc.dialect, ev)
			if a1.toolName != tc.tool || a1.toolArgs != `{"command":"ls"}` || a1.finish != tc.finishTool {
				t.Fatalf("turn 1 answer %+v", a1)
			}
			_, ev = h.send(t, loadFixture(t, tc.turn2))
			a2 := decodeAnswer(t, tc.dialect, ev)
			if a2.text != "There are 3 files here: a.txt, b.txt and c.txt." || a2.finish != tc.finishText {
				t.Fatalf("turn 2 answer %+v", a2)
			}
			routed := h.router.routed
			r1, r2 := routed[len(routed)-2], routed[len(routed)-1]
			if r1.SessionID != tc.session || r2.SessionID != tc.session {
				t.Errorf("session ids %q, %q; want %q", r1.SessionID, r2.SessionID, tc.session)
			}
			if len(r1.Hashes) == 0 || len(r2.Hashes) <= len(r1.Hashes) {
				t.Fatalf("block counts %d then %d", len(r1.Hashes), len(r2.Hashes))
			}
			if n := commonPrefix(r1.Hashes, r2.Hashes); n != len(r1.Hashes) {
				t.Errorf("turn 2 shares %d of turn 1's %d prompt blocks; want all", n, len(r1.Hashes))
			}
			h.router.waitFreed(t, len(routed))
			for _, b := range h.engine.requests() {
				raw, _ := json.Marshal(b)
				for _, volatile := range []string{"cache_control", "x-anthropic-billing-header", "cch=", "msg_aa0", "msg_bb0", "fc_bb06", "nvext"} {
					if strings.Contains(string(raw), volatile) {
						t.Errorf("engine request carries %q", volatile)
					}
				}
			}
		})
	}
}

// TestTierBlocksHeader: every dialect's answer splits the blocks the worker
// will not compute by tier, GPU first, in x-hearth-tier-blocks.
func TestTierBlocksHeader(t *testing.T) {
	for _, tc := range []struct {
		name  string
		route Route
		want  string
	}{
		{"gpu only", Route{CachedBlocks: 3}, "gpu=3,ram=0,ssd=0"},
		{"every tier", Route{CachedBlocks: 12, RAMBlocks: 4, DiskBlocks: 250}, "gpu=12,ram=4,ssd=250"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			engine := newFakeEngine(t)
			tc.route.Worker, tc.route.BaseURL = "w1", engine.srv.URL
			h := startGateway(t, newFakeRouter(tc.route))
			for _, f := range []string{"claude-turn1.json", "opencode-turn1.json", "codex-turn1.json"} {
				resp, _ := h.send(t, loadFixture(t, f))
				if got := resp.Header.Get("x-hearth-tier-blocks"); got != tc.want {
					t.Errorf("%s: x-hearth-tier-blocks %q, want %q", f, got, tc.want)
				}
				if got := resp.Header.Get("x-hearth-cached-blocks"); got != strconv.Itoa(tc.route.CachedBlocks) {
					t.Errorf("%s: x-hearth-cached-blocks %q", f, got)
				}
			}
		})
	}
}

// commonPrefix is how many leading elements (block hashes, tokens) a and b
// have in common.
func commonPrefix[T comparable](a, b []T) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// TestFixtureSessionsShareSystemAndTools checks that two sessions of the
// same client (other session ids, billing values, item ids and question)
// share every block of the system prompt and tools.
func TestFixtureSessionsShareSystemAndTools(t *testing.T) {
	for _, tc := range conversationFixtures {
		t.Run(tc.client, func(t *testing.T) {
			h := startGateway(t, nil)
			f := loadFixture(t, tc.turn1)
			other := f.with(tc.otherClient...)
			if string(other.Body) == string(f.Body) {
				t.Fatal("the second session is not different")
			}
			h.send(t, f)
			h.send(t, other)
			r1, r2 := h.router.routed[0], h.router.routed[1]
			if r1.SessionID == r2.SessionID {
				t.Errorf("both sessions have id %q", r1.SessionID)
			}
			// The shared part is everything the template renders before the
			// first user message: tools and system prompt.
			var shared int
			reqs := h.engine.requests()
			var msgs []chatMessage
			_ = json.Unmarshal(reqs[0]["messages"], &msgs)
			rendered, _, _ := fakeTokenizer{}.EncodeChat(tokenizer.ChatRequest{Messages: reqs[0]["messages"], Tools: reqs[0]["tools"], AddGenerationPrompt: true})
			shared = strings.Index(rendered, "<|im_start|>user") / tokenizer.DefaultBlockSize
			if shared < 10 {
				t.Fatalf("only %d blocks before the first user message; fixture too small to tell", shared)
			}
			if n := commonPrefix(r1.Hashes, r2.Hashes); n < shared {
				t.Errorf("sessions share %d blocks; want at least the %d of system prompt and tools", n, shared)
			}
		})
	}
}
