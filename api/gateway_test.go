package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hearth-llm/hearth/router"
)

func chatBody(extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{"model":"gpt-5.5","stream":true,"messages":[{"role":"user","content":"hi"}]` + extra + `}`
}

func TestChatPassesChunksThroughAndUsageOnlyWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		name      string
		extra     string
		wantUsage bool
	}{
		{"no stream_options", "", false},
		{"include_usage", `"stream_options":{"include_usage":true}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, nil)
			resp, body := h.post(t, "/v1/chat/completions", chatBody(tc.extra))
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			events := parseSSE(t, strings.NewReader(body))
			usage := false
			var text strings.Builder
			for _, ev := range events[:len(events)-1] {
				var ch chatChunk
				if err := json.Unmarshal([]byte(ev.Data), &ch); err != nil {
					t.Fatal(err)
				}
				if ch.Usage != nil && len(ch.Choices) == 0 {
					usage = true
				}
				for _, c := range ch.Choices {
					text.WriteString(c.Delta.Content)
				}
				if ch.ID != "chatcmpl-1" {
					t.Errorf("chunk id %q: not passed through", ch.ID)
				}
			}
			if usage != tc.wantUsage || text.String() != "Hello from the engine." || events[len(events)-1].Data != "[DONE]" {
				t.Errorf("usage chunk %v (want %v), text %q", usage, tc.wantUsage, text.String())
			}
			var so streamOptions
			_ = json.Unmarshal(h.engine.requests()[0]["stream_options"], &so)
			if !so.IncludeUsage {
				t.Error("the engine was not asked for usage")
			}
			id := h.router.waitFreed(t, 1)[0]
			if h.router.prefilled[id] != 1 || h.router.freed[id] != 1 {
				t.Errorf("router prefill done %d, free %d; want 1 and 1", h.router.prefilled[id], h.router.freed[id])
			}
		})
	}
}

func TestNonStreamingChatAnswer(t *testing.T) {
	h := startGateway(t, nil)
	resp, body := h.post(t, "/v1/chat/completions", `{"model":"qwen3-14b","messages":[{"role":"user","content":"hi"}]}`)
	var out struct {
		Object  string
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %s (%v)", resp.StatusCode, body, err)
	}
	if out.Object != "chat.completion" || out.Choices[0].Message.Content != "Hello from the engine." || out.Choices[0].FinishReason != "stop" {
		t.Fatalf("answer %s", body)
	}
}

func TestCompletions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prompt string
		stream bool
	}{
		{"text prompt", `"Once upon"`, false},
		{"token prompt", `[1,2,3,4]`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, nil)
			resp, body := h.post(t, "/v1/completions", fmt.Sprintf(`{"model":"gpt-5.5","prompt":%s,"max_tokens":8,"stream":%v}`, tc.prompt, tc.stream))
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			if tc.stream {
				if !strings.Contains(body, `"text":"completed"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
					t.Fatalf("stream %s", body)
				}
			} else if !strings.Contains(body, `"text":"completed text"`) || !strings.Contains(body, `"finish_reason":"length"`) {
				t.Fatalf("answer %s", body)
			}
			if got := string(h.engine.requests()[0]["prompt"]); got != tc.prompt {
				t.Errorf("engine prompt %s, want %s", got, tc.prompt)
			}
			wantTokens := 4
			if tc.prompt[0] == '"' {
				wantTokens = len("Once upon")
			}
			if got := h.router.lastRoute(t).PromptTokens; got != wantTokens {
				t.Errorf("prompt tokens %d, want %d", got, wantTokens)
			}
		})
	}
}

func TestRetriesOnceOnTheNextWorker(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first func(t *testing.T) string // base URL of the failing worker
	}{
		{"connection refused", refusedAddr},
		{"5xx before the first byte", func(t *testing.T) string {
			e := newFakeEngine(t)
			e.script = func(map[string]json.RawMessage, []chatMessage) engineReply { return engineReply{Status: 503} }
			return e.srv.URL
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good := newFakeEngine(t)
			router := newFakeRouter(Route{Worker: "bad", BaseURL: tc.first(t)}, Route{Worker: "good", BaseURL: good.srv.URL})
			h := startGateway(t, router)
			resp, body := h.post(t, "/v1/messages", `{"model":"claude-opus-4-8","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
			if resp.StatusCode != 200 || resp.Header.Get("x-hearth-worker") != "good" {
				t.Fatalf("%d worker %q: %s", resp.StatusCode, resp.Header.Get("x-hearth-worker"), body)
			}
			if len(router.routed) != 2 || strings.Join(router.routed[1].Exclude, ",") != "bad" || router.routed[0].ID != router.routed[1].ID {
				t.Fatalf("routes %+v", router.routed)
			}
			router.waitFreed(t, 2) // the failed attempt and the answer
			if got := testutil.ToFloat64(h.gw.metrics.retries); got != 1 {
				t.Errorf("retries metric %v", got)
			}
		})
	}
}

func TestFailuresBeforeAnswering(t *testing.T) {
	for _, tc := range []struct {
		name       string
		router     func(t *testing.T) *fakeRouter
		path, body string
		status     int
		contains   string
		header     string
	}{
		{"every worker down", func(t *testing.T) *fakeRouter {
			return newFakeRouter(Route{Worker: "a", BaseURL: refusedAddr(t)}, Route{Worker: "b", BaseURL: refusedAddr(t)})
		}, "/v1/chat/completions", chatBody(""), http.StatusBadGateway, `"type":"server_error"`, ""},
		{"queue full", func(t *testing.T) *fakeRouter {
			r := newFakeRouter()
			r.err = fmt.Errorf("router: %w", ErrQueueFull)
			return r
		}, "/v1/messages", `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, http.StatusTooManyRequests, `"type":"rate_limit_error"`, "Retry-After"},
		{"no worker", func(t *testing.T) *fakeRouter { return newFakeRouter() },
			"/v1/responses", `{"model":"gpt-5.5","input":"hi"}`, http.StatusServiceUnavailable, "no worker", ""},
		{"engine rejects the request", func(t *testing.T) *fakeRouter {
			e := newFakeEngine(t)
			e.script = func(map[string]json.RawMessage, []chatMessage) engineReply { return engineReply{Status: 400} }
			return newFakeRouter(Route{Worker: "a", BaseURL: e.srv.URL}, Route{Worker: "b", BaseURL: e.srv.URL})
		}, "/v1/chat/completions", chatBody(""), http.StatusBadRequest, "scripted failure 400", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			router := tc.router(t)
			h := startGateway(t, router)
			resp, body := h.post(t, tc.path, tc.body)
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.contains) {
				t.Fatalf("%d %s; want %d containing %q", resp.StatusCode, body, tc.status, tc.contains)
			}
			if tc.header != "" && resp.Header.Get(tc.header) == "" {
				t.Errorf("no %s header", tc.header)
			}
			if tc.name == "engine rejects the request" && len(router.routed) != 1 {
				t.Errorf("a 4xx from the engine was retried (%d routes)", len(router.routed))
			}
		})
	}
}

func TestMidStreamFailureEndsWithDialectError(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		lastEvent        func(ev sseEvent) bool
	}{
		{"openai", "/v1/chat/completions", chatBody(""), func(ev sseEvent) bool {
			return strings.HasPrefix(ev.Data, `{"error":{`) && strings.Contains(ev.Data, "server_error")
		}},
		{"anthropic", "/v1/messages", `{"model":"claude-x","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, func(ev sseEvent) bool {
			return ev.Name == "error" && strings.Contains(ev.Data, `"type":"error"`) && strings.Contains(ev.Data, `"api_error"`)
		}},
		{"responses", "/v1/responses", `{"model":"gpt-5.5","stream":true,"input":"hi"}`, func(ev sseEvent) bool {
			return ev.Name == "response.failed" && strings.Contains(ev.Data, `"status":"failed"`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, nil)
			h.engine.script = func(map[string]json.RawMessage, []chatMessage) engineReply {
				return engineReply{Text: "one two three four five", Finish: "stop", BreakAt: 3}
			}
			resp, body := h.post(t, tc.path, tc.body)
			events := parseSSE(t, strings.NewReader(body))
			if resp.StatusCode != 200 || len(events) == 0 || !tc.lastEvent(events[len(events)-1]) {
				t.Fatalf("status %d, stream:\n%s", resp.StatusCode, body)
			}
			h.router.waitFreed(t, 1)
		})
	}
}

func TestClientGoingAwayCancelsTheEngine(t *testing.T) {
	h := startGateway(t, nil, withConfig(func(c *Config) { c.ClientCheck = 10 * time.Millisecond }))
	h.engine.script = func(map[string]json.RawMessage, []chatMessage) engineReply { return engineReply{Hold: true} }
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/messages",
		strings.NewReader(`{"model":"claude-x","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil { // message_start arrived
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-h.engine.cancelled:
	case <-time.After(failSafe):
		t.Fatal("the engine request was not cancelled after the client left")
	}
	h.router.waitFreed(t, 1)
	if got := testutil.ToFloat64(h.gw.metrics.clientGone); got != 1 {
		t.Errorf("client disconnects metric %v", got)
	}
}

func TestSpeculativePrefillWarmsTheNextTurn(t *testing.T) {
	h := startGateway(t, nil)
	resp, body := h.post(t, "/v1/chat/completions", chatBody(`"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}],"nvext":{"agent_hints":{"speculative_prefill":true}}`))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	<-h.engine.seen // the request itself
	var spec map[string]json.RawMessage
	select {
	case spec = <-h.engine.seen:
	case <-time.After(failSafe):
		t.Fatal("no speculative prefill arrived")
	}
	var msgs []chatMessage
	_ = json.Unmarshal(spec["messages"], &msgs)
	if string(spec["max_tokens"]) != "1" || string(spec["stream"]) != "false" || len(msgs) != 2 {
		t.Fatalf("speculative request max_tokens %s stream %s messages %+v", spec["max_tokens"], spec["stream"], msgs)
	}
	if a := msgs[1]; a.Role != "assistant" || string(a.Content) != `"Let me look."` || len(a.ToolCalls) != 1 || a.ToolCalls[0].Function.Arguments != `{"command":"ls"}` {
		t.Fatalf("speculative answer message %+v", a)
	}
}

func TestHintsAndSessionsReachTheRouter(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		headers          []string
		want             RouteRequest
	}{
		{"nvext hints and session control", "/v1/chat/completions",
			chatBody(`"nvext":{"agent_hints":{"priority":5,"strict_priority":1,"osl":300,"speculative_prefill":false,"future_hint":true},"session_control":{"session_id":"s-nv","action":"open","timeout":30}}`),
			[]string{"x-session-id", "s-header", "x-hearth-policy", "round_robin"},
			RouteRequest{SessionID: "s-nv", Hints: router.Hints{Priority: 5, StrictPriority: 1, OSL: 300}, Session: router.SessionControl{Action: router.SessionOpen, Timeout: 30 * time.Second}, Policy: "round_robin"}},
		{"opencode headers", "/v1/chat/completions", chatBody(""), []string{"x-session-affinity", "ses_a"}, RouteRequest{SessionID: "ses_a"}},
		{"prompt_cache_key", "/v1/responses", `{"model":"gpt-5.5","input":"hi","prompt_cache_key":"pck"}`, nil, RouteRequest{SessionID: "pck"}},
		{"claude user_id json", "/v1/messages", `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"{\"device_id\":\"d\",\"session_id\":\"cc-1\"}"}}`, nil, RouteRequest{SessionID: "cc-1"}},
		{"claude user_id legacy", "/v1/messages", `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"user_ab_account_cd_session_cc-2"}}`, nil, RouteRequest{SessionID: "cc-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, nil)
			resp, body := h.post(t, tc.path, tc.body, tc.headers...)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			got := h.router.lastRoute(t)
			if got.SessionID != tc.want.SessionID || got.Hints != tc.want.Hints || got.Session != tc.want.Session || got.Policy != tc.want.Policy {
				t.Errorf("routed %+v\nwant %+v", got, tc.want)
			}
			if got.Model != servedModel || got.PromptTokens == 0 || len(got.Hashes) != got.PromptTokens/16 {
				t.Errorf("model %q tokens %d hashes %d", got.Model, got.PromptTokens, len(got.Hashes))
			}
		})
	}
}

func TestBadRequestsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		status           int
		contains         []string
	}{
		{"malformed JSON", "/v1/chat/completions", `{"model":`, 400, []string{"body", "invalid JSON"}},
		{"messages of the wrong type", "/v1/chat/completions", `{"model":"gpt-5.5","messages":"hi"}`, 400, []string{"messages"}},
		{"nvext priority not a number", "/v1/chat/completions", chatBody(`"nvext":{"agent_hints":{"priority":"high"}}`), 400, []string{"nvext.agent_hints.priority"}},
		{"nvext negative osl", "/v1/chat/completions", chatBody(`"nvext":{"agent_hints":{"osl":-1}}`), 400, []string{"nvext.agent_hints.osl"}},
		{"nvext unknown action", "/v1/chat/completions", chatBody(`"nvext":{"session_control":{"action":"pause"}}`), 400, []string{"nvext.session_control.action"}},
		{"tool without name", "/v1/chat/completions", chatBody(`"tools":[{"type":"function","function":{}}]`), 400, []string{"tools[0].function.name"}},
		{"missing model", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, 400, []string{"model", "required"}},
		{"anthropic missing max_tokens", "/v1/messages", `{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`, 400, []string{`"type":"invalid_request_error"`, "max_tokens"}},
		{"anthropic bad thinking", "/v1/messages", `{"model":"claude-x","max_tokens":5,"thinking":{"type":"sometimes"},"messages":[{"role":"user","content":"hi"}]}`, 400, []string{"thinking.type"}},
		{"anthropic bad block", "/v1/messages", `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":[{"type":"hologram"}]}]}`, 400, []string{"messages[0].content[0].type"}},
		{"responses bad role", "/v1/responses", `{"model":"gpt-5.5","input":[{"type":"message","role":"robot","content":"x"}]}`, 400, []string{"input[0].role"}},
		{"completions batch", "/v1/completions", `{"model":"gpt-5.5","prompt":["a","b"]}`, 400, []string{"prompt"}},
		{"unknown model", "/v1/chat/completions", `{"model":"llama-2","messages":[{"role":"user","content":"hi"}]}`, 404, []string{"llama-2", "model_not_found"}},
		{"unknown route", "/v1/embeddings", `{}`, 404, []string{"no route"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, nil)
			resp, body := h.post(t, tc.path, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			for _, c := range tc.contains {
				if !strings.Contains(body, c) {
					t.Errorf("%s does not mention %q", body, c)
				}
			}
			if len(h.engine.requests()) != 0 {
				t.Error("a bad request reached the engine")
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	h := startGateway(t, nil, withConfig(func(c *Config) { c.MaxBodyBytes = 1024 }))
	big := `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("x", 4096) + `"}]}`
	resp, body := h.post(t, "/v1/messages", big)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, `"request_too_large"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestAPIKeys(t *testing.T) {
	h := startGateway(t, nil, withKeys("k1", "k2"))
	for _, tc := range []struct {
		name    string
		headers []string
		status  int
	}{
		{"bearer", []string{"Authorization", "Bearer k2"}, 200},
		{"x-api-key", []string{"x-api-key", "k1"}, 200},
		{"missing", nil, 401},
		{"wrong", []string{"Authorization", "Bearer nope"}, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.post(t, "/v1/chat/completions", chatBody(""), tc.headers...)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
		})
	}
	// Health, metrics and the root (Claude Code's probe) stay open.
	for _, p := range []string{"/health", "/metrics", "/"} {
		resp, err := http.Get(h.url + p)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", p, resp, err)
		}
		resp.Body.Close()
	}
	resp, err := http.Head(h.url + "/")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD /: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestMetricsCountRequests(t *testing.T) {
	h := startGateway(t, nil)
	h.post(t, "/v1/chat/completions", chatBody(""))
	h.post(t, "/v1/chat/completions", `{"model":"nope","messages":[]}`)
	h.router.waitFreed(t, 1)
	resp, err := http.Get(h.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`hearth_gateway_requests_total{code="200",dialect="openai"} 1`,
		`hearth_gateway_request_duration_seconds_count{dialect="openai"} 1`,
		`hearth_gateway_time_to_first_token_seconds_count{dialect="openai"} 1`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestSecurityWarning(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keys      []string
		storeKeys []string // keys the daemon hands over in Deps.Keys (--api-key among them)
		ip        string
		warn      bool
	}{
		{"loopback without key", nil, nil, "127.0.0.1", false},
		{"lan without key", nil, nil, "192.168.1.20", true},
		{"any address without key", nil, nil, "0.0.0.0", true},
		{"lan with key", []string{"k"}, nil, "192.168.1.20", false},
		{"lan with a key in Deps.Keys", nil, []string{"k"}, "0.0.0.0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deps := Deps{Router: newFakeRouter(), Tokenizer: fakeTokenizer{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if tc.storeKeys != nil {
				deps.Keys = &fakeKeys{secrets: tc.storeKeys}
			}
			gw, err := New(Config{Models: []string{"m"}, APIKeys: tc.keys}, deps)
			if err != nil {
				t.Fatal(err)
			}
			gw.checkExposure(context.Background(), &net.TCPAddr{IP: net.ParseIP(tc.ip), Port: 8080})
			if got := gw.SecurityWarning() != ""; got != tc.warn {
				t.Errorf("warning %q, want one: %v", gw.SecurityWarning(), tc.warn)
			}
		})
	}
}

func TestMaxTokensClamp(t *testing.T) {
	for _, tc := range []struct {
		name           string
		maxOut, ctxLen int
		asked          string
		want           string
	}{
		{"no limits", 0, 0, `"max_tokens":64000`, "64000"},
		{"output cap", 4096, 0, `"max_tokens":64000`, "4096"},
		{"context room", 0, 1000, `"max_tokens":64000`, ""}, // computed below
		{"unset gets the cap", 512, 0, "", "512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, nil, withConfig(func(c *Config) { c.MaxOutputTokens, c.ContextTokens = tc.maxOut, tc.ctxLen }))
			resp, body := h.post(t, "/v1/chat/completions", chatBody(tc.asked))
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			want := tc.want
			if want == "" {
				want = fmt.Sprint(tc.ctxLen - h.router.lastRoute(t).PromptTokens)
			}
			if got := string(h.engine.requests()[0]["max_tokens"]); got != want {
				t.Errorf("engine max_tokens %s, want %s", got, want)
			}
		})
	}
}

func TestModelResolver(t *testing.T) {
	r := newModelResolver(Config{Models: []string{"qwen3-14b", "qwen3-8b"}, Aliases: map[string]string{
		"small": "qwen3-8b", "claude-*": "qwen3-14b", "claude-haiku-*": "qwen3-8b",
	}})
	for _, tc := range []struct {
		in, want string
		status   int
	}{
		{"qwen3-8b", "qwen3-8b", 0},
		{"small", "qwen3-8b", 0},
		{"claude-opus-4-8", "qwen3-14b", 0},
		{"claude-haiku-4-5", "qwen3-8b", 0}, // the longer pattern wins
		{"gpt-5.5", "", 404},
		{"", "", 400},
	} {
		got, err := r.resolve(tc.in)
		var ae *apiError
		if tc.status != 0 {
			if !errors.As(err, &ae) || ae.Status != tc.status {
				t.Errorf("%q: err %v, want status %d", tc.in, err, tc.status)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q -> %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"minimal", Config{Models: []string{"m"}}, true},
		{"no model", Config{}, false},
		{"alias to nothing", Config{Models: []string{"m"}, Aliases: map[string]string{"x": "y"}}, false},
		{"bad pattern", Config{Models: []string{"m"}, Aliases: map[string]string{"[": "m"}}, false},
		{"empty key", Config{Models: []string{"m"}, APIKeys: []string{""}}, false},
	} {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: err %v", tc.name, err)
		}
	}
}

// TestStreamsAreNotBuffered holds the engine after its first word: every
// dialect must have delivered that word to the client by then.
func TestStreamsAreNotBuffered(t *testing.T) {
	for _, tc := range []struct{ name, path, body string }{
		{"openai", "/v1/chat/completions", chatBody("")},
		{"anthropic", "/v1/messages", `{"model":"claude-x","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"responses", "/v1/responses", `{"model":"gpt-x","stream":true,"input":"hi"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, nil)
			h.engine.script = func(map[string]json.RawMessage, []chatMessage) engineReply {
				return engineReply{Text: "Firstword and more", Hold: true}
			}
			ctx, cancel := context.WithTimeout(context.Background(), failSafe)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got strings.Builder
			br := bufio.NewReader(resp.Body)
			for !strings.Contains(got.String(), "Firstword") {
				line, err := br.ReadString('\n')
				got.WriteString(line)
				if err != nil {
					t.Fatalf("the first word did not arrive while the engine held the rest (%v); got:\n%s", err, got.String())
				}
			}
			cancel()
			select {
			case <-h.engine.cancelled:
			case <-time.After(failSafe):
				t.Fatal("the engine request was not cancelled after the client left")
			}
		})
	}
}

// TestEngineConnectionsAreReused: streamed requests one after another go
// over one engine connection, which the gateway reads to its end.
func TestEngineConnectionsAreReused(t *testing.T) {
	h := startGateway(t, nil)
	for i := range 5 {
		resp, body := h.post(t, "/v1/chat/completions", chatBody(""))
		if resp.StatusCode != 200 || !strings.Contains(body, "[DONE]") {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
		h.router.waitFreed(t, 1)
	}
	if n := h.engine.conns.Load(); n != 1 {
		t.Errorf("the gateway opened %d connections to the engine for 5 requests in a row, want 1", n)
	}
}

// TestClientLeavingTheQueueIsNoticed: a request waiting in the router's
// queue whose client goes away stops waiting, without any write to tell.
func TestClientLeavingTheQueueIsNoticed(t *testing.T) {
	handled := make(chan string, 1)
	h := startGateway(t, nil, withConfig(func(c *Config) { c.ClientCheck = 10 * time.Millisecond }), withHandled(handled))
	h.router.queue = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(chatBody("")))
	req.Header.Set("Content-Type", "application/json")
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	select {
	case <-h.router.queued:
	case <-time.After(failSafe):
		t.Fatal("the request never reached the router's queue")
	}
	cancel()
	<-errc
	select {
	case <-h.router.queue:
	case <-time.After(failSafe):
		t.Fatal("the queued request still waits after its client left")
	}
	select {
	case <-handled:
	case <-time.After(failSafe):
		t.Fatal("the handler of the queued request did not return")
	}
	if got := testutil.ToFloat64(h.gw.metrics.clientGone); got != 1 {
		t.Errorf("client disconnects metric %v", got)
	}
}

// TestEngineLingeringAfterDoneIsCutOff: an engine that keeps its stream open
// after [DONE] does not hold the client's answer, and its connection is
// closed once the drain's time is up.
func TestEngineLingeringAfterDoneIsCutOff(t *testing.T) {
	h := startGateway(t, nil, withConfig(func(c *Config) { c.ClientCheck = 10 * time.Millisecond }))
	h.engine.script = func(map[string]json.RawMessage, []chatMessage) engineReply {
		return engineReply{Text: "All done here", Finish: "stop", Linger: true}
	}
	start := time.Now()
	resp, body := h.post(t, "/v1/chat/completions", chatBody(""))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "[DONE]") || !strings.Contains(body, `" here"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	select {
	case <-h.engine.cancelled:
	case <-time.After(failSafe):
		t.Fatal("the engine's lingering stream was never closed")
	}
	if d := time.Since(start); d < drainTimeout {
		t.Errorf("the stream was closed after %v, before the drain's %v were up", d, drainTimeout)
	}
	h.router.waitFreed(t, 1)
}
