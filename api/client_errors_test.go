package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The patterns the clients match in error messages to decide that the
// conversation outgrew the context (and compact it instead of failing).
var (
	// Claude Code: reactive compaction, with the gap taken from the numbers.
	claudeCodeTooLong = regexp.MustCompile(`(?i)prompt is too long[^0-9]*(\d+)\s*tokens?\s*>\s*(\d+)`)
	// OpenCode: one of its overflow patterns.
	openCodeTooLong = regexp.MustCompile(`(?i)maximum context length is \d+ tokens`)
)

// postFixture sends a fixture and returns the status, headers and body.
func (h *harness) postFixture(t *testing.T, f fixture) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+f.Path, strings.NewReader(string(f.Body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range f.Headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestContextOverflowInEachClientsWords sends each client's first turn to a
// context that cannot hold it, found by the gateway's own count or reported
// by a vLLM-style engine, and checks that the answer is the one the client
// acts on: Claude Code's "prompt is too long: N tokens > M maximum", OpenAI's
// context_length_exceeded for OpenCode, and for Codex a response.failed
// event in the stream (a 400 would fail its turn instead of compacting).
func TestContextOverflowInEachClientsWords(t *testing.T) {
	const engineLimit, enginePrompt = 2048, 5000
	vllmMessage := fmt.Sprintf("This model's maximum context length is %d tokens. However, your request has %d input tokens. "+
		"Please reduce the length of the input messages.", engineLimit, enginePrompt)
	sources := []struct {
		name  string
		limit int // the context the client must be told
	}{
		{"gateway count", 64},
		{"engine report", engineLimit},
	}
	cases := []struct {
		name    string
		fixture string
		edit    []string
		check   func(t *testing.T, limit int, resp *http.Response, body string)
	}{
		{"claude-code", "claude-turn1.json", nil, func(t *testing.T, limit int, resp *http.Response, body string) {
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			var e anthropicError
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Type != "error" || e.Error.Type != "invalid_request_error" {
				t.Fatalf("error body %s (%v)", body, err)
			}
			m := claudeCodeTooLong.FindStringSubmatch(e.Error.Message)
			if m == nil {
				t.Fatalf("Claude Code would not see an overflow in %q", e.Error.Message)
			}
			prompt, _ := strconv.Atoi(m[1])
			if max, _ := strconv.Atoi(m[2]); max != limit || prompt <= max {
				t.Errorf("message %q: want a prompt over %d > %d", e.Error.Message, prompt, limit)
			}
		}},
		{"opencode", "opencode-turn1.json", nil, func(t *testing.T, limit int, resp *http.Response, body string) {
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			var e openAIError
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code == nil || *e.Error.Code != "context_length_exceeded" {
				t.Fatalf("error body %s (%v)", body, err)
			}
			if !openCodeTooLong.MatchString(e.Error.Message) || !strings.Contains(e.Error.Message, fmt.Sprintf(" %d tokens", limit)) {
				t.Errorf("OpenCode would not see an overflow of %d in %q", limit, e.Error.Message)
			}
		}},
		{"codex stream", "codex-turn1.json", nil, func(t *testing.T, limit int, resp *http.Response, body string) {
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			events := parseSSE(t, strings.NewReader(body))
			if len(events) < 2 || events[0].Name != "response.created" || events[len(events)-1].Name != "response.failed" {
				t.Fatalf("events %+v", events)
			}
			var failed struct {
				Type     string `json:"type"`
				Response struct {
					Status string          `json:"status"`
					Error  *responsesError `json:"error"`
				} `json:"response"`
			}
			if err := json.Unmarshal([]byte(events[len(events)-1].Data), &failed); err != nil {
				t.Fatal(err)
			}
			if failed.Type != "response.failed" || failed.Response.Status != "failed" || failed.Response.Error == nil ||
				failed.Response.Error.Code != "context_length_exceeded" || !strings.Contains(failed.Response.Error.Message, strconv.Itoa(limit)) {
				t.Errorf("response.failed %s", events[len(events)-1].Data)
			}
		}},
		{"codex without stream", "codex-turn1.json", []string{`"stream": true`, `"stream": false`}, func(t *testing.T, limit int, resp *http.Response, body string) {
			var e openAIError
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(body), &e) != nil ||
				e.Error.Code == nil || *e.Error.Code != "context_length_exceeded" || e.Error.Param == nil || *e.Error.Param != "input" {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
		}},
	}
	for _, src := range sources {
		for _, tc := range cases {
			t.Run(src.name+"/"+tc.name, func(t *testing.T) {
				h := startGateway(t, nil, withConfig(func(c *Config) {
					if src.name == "gateway count" {
						c.ContextTokens = src.limit
					}
				}))
				h.engine.script = func(map[string]json.RawMessage, []chatMessage) engineReply {
					return engineReply{Status: http.StatusBadRequest, Error: vllmMessage}
				}
				f := loadFixture(t, tc.fixture)
				if tc.edit != nil {
					f = f.with(tc.edit...)
					if string(f.Body) == string(loadFixture(t, tc.fixture).Body) {
						t.Fatalf("edit %q changed nothing", tc.edit)
					}
				}
				resp, body := h.postFixture(t, f)
				tc.check(t, src.limit, resp, body)
				if resp.StatusCode != http.StatusOK && resp.Header.Get("x-should-retry") != "false" {
					t.Errorf("x-should-retry %q on a request that cannot succeed", resp.Header.Get("x-should-retry"))
				}
				engineSaw := len(h.engine.requests()) > 0
				if want := src.name == "engine report"; engineSaw != want {
					t.Errorf("engine saw the request: %v, want %v", engineSaw, want)
				}
			})
		}
	}
}

// TestErrorsSayWhetherToRetry checks x-should-retry: a request that cannot
// succeed says false (Claude Code otherwise retries a wrong key ten times,
// for minutes, before it reports it), one that may succeed later leaves the
// client's own policy alone.
func TestErrorsSayWhetherToRetry(t *testing.T) {
	claude := loadFixture(t, "claude-turn1.json")
	for _, tc := range []struct {
		name      string
		routerErr error
		headers   map[string]string
		status    int
		wantRetry string
	}{
		{"wrong key", nil, map[string]string{"x-api-key": "sk-wrong"}, http.StatusUnauthorized, "false"},
		{"bad request", nil, nil, http.StatusBadRequest, "false"},
		{"queue full", fmt.Errorf("fake: %w", ErrQueueFull), nil, http.StatusTooManyRequests, ""},
		{"no worker", fmt.Errorf("fake: %w", ErrNoWorker), nil, http.StatusServiceUnavailable, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, nil, withKeys("sk-fixture"))
			h.router.err = tc.routerErr
			f := claude
			if tc.name == "bad request" {
				f = f.with(`"max_tokens": 64000`, `"max_tokens": 0`)
				if string(f.Body) == string(claude.Body) {
					t.Fatal("the fixture's max_tokens was not replaced")
				}
			}
			for k, v := range tc.headers {
				f.Headers = map[string]string{k: v}
			}
			resp, body := h.postFixture(t, f)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if got := resp.Header.Get("x-should-retry"); got != tc.wantRetry {
				t.Errorf("x-should-retry %q, want %q", got, tc.wantRetry)
			}
		})
	}
}

// TestServeReturnsWhenCancelledAtOnce stops a gateway whose context ends
// before its listener started serving (Ctrl-C during start-up, a test that
// fails at once): Serve must still return. A hang here shows as the test
// binary's timeout.
func TestServeReturnsWhenCancelledAtOnce(t *testing.T) {
	for i := range 20 {
		gw, err := New(Config{Models: []string{servedModel}}, Deps{Router: newFakeRouter(), Tokenizer: fakeTokenizer{},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := gw.Serve(ctx, ln); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
}
