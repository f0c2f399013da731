package api

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/goccy/go-json"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// simBehind runs the simulated vLLM engine (real time scaled by speedup)
// behind wrap, on loopback.
func simBehind(t *testing.T, tok *tokenizer.Model, maxSeqs int, speedup float64, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	core, err := sim.NewCore(sim.Config{GPU: "rtx4090", Model: "qwen3-8b", NumGPUBlocks: 2048, MaxModelLen: 16384, MaxNumSeqs: maxSeqs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	runner := sim.NewRunner(core, sim.RunnerOptions{Speedup: speedup})
	srv, err := sim.NewServer(sim.ServerOptions{
		Engine: runner, Tokenizer: tok, ServedModelName: servedModel, ModelName: "qwen3-8b",
		MaxModelLen: 16384, NumGPUBlocks: 2048, BlockSize: 16, Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	hs := httptest.NewServer(wrap(srv.Handler()))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		<-done
	})
	return hs.URL
}

// engineLog keeps the chat requests the engine received (the last one's
// body) and the fate of every completions request.
type engineLog struct {
	mu        sync.Mutex
	lastChat  []byte
	prefills  chan struct{} // a completions request arrived
	hold      chan struct{} // closed: completions requests go on to the engine
	cancelled chan struct{} // a completions request's client went away
	finished  chan struct{} // a completions request was answered
}

func newEngineLog() *engineLog {
	l := &engineLog{prefills: make(chan struct{}, 16), hold: make(chan struct{}), cancelled: make(chan struct{}, 16), finished: make(chan struct{}, 16)}
	close(l.hold)
	return l
}

func (l *engineLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/chat/completions":
			b, _ := io.ReadAll(r.Body)
			l.mu.Lock()
			l.lastChat = b
			l.mu.Unlock()
			r.Body = io.NopCloser(strings.NewReader(string(b)))
		case "/v1/completions":
			l.prefills <- struct{}{}
			l.mu.Lock()
			hold := l.hold
			l.mu.Unlock()
			<-hold
			next.ServeHTTP(w, r)
			if r.Context().Err() != nil {
				l.cancelled <- struct{}{}
			} else {
				l.finished <- struct{}{}
			}
			return
		}
		next.ServeHTTP(w, r)
	})
}

// tokensBeforeResult renders the engine's last chat request as the engine
// does and counts the tokens before the tool result text.
func (l *engineLog) tokensBeforeResult(t *testing.T, tok *tokenizer.Model, result string) int {
	t.Helper()
	l.mu.Lock()
	body := l.lastChat
	l.mu.Unlock()
	var req struct {
		Messages json.RawMessage `json:"messages"`
		Tools    json.RawMessage `json:"tools"`
		Kwargs   map[string]any  `json:"chat_template_kwargs"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	text, err := tok.ApplyChatTemplate(tokenizer.ChatRequest{Messages: req.Messages, Tools: req.Tools, AddGenerationPrompt: true, Kwargs: req.Kwargs})
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndex(text, result)
	if i < 0 {
		t.Fatalf("the tool result is not in the engine's prompt")
	}
	return len(tok.Encode(text[:i]))
}

// toolPauseClient is one client's way through a tool pause: its first
// request, and its next one built from the answer to the first (as the
// recorded client builds it), with the tool's result.
type toolPauseClient struct {
	name    string
	path    string
	headers []string
	first   func(system, task string) map[string]any
	// next returns the next request and whether the answer was a tool call.
	next func(first map[string]any, answer []byte, result string) (map[string]any, bool)
	// cached reads the cached prompt tokens from an answer.
	cached func(answer []byte) int
}

var toolPauseTools = []map[string]any{{"name": "read_file", "description": "Read a file of the project.",
	"schema": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []string{"path"}}}}

func toolPauseClients() []toolPauseClient {
	openAITools := []map[string]any{}
	respTools := []map[string]any{}
	anthTools := []map[string]any{}
	for _, tl := range toolPauseTools {
		openAITools = append(openAITools, map[string]any{"type": "function", "function": map[string]any{"name": tl["name"], "description": tl["description"], "parameters": tl["schema"]}})
		respTools = append(respTools, map[string]any{"type": "function", "name": tl["name"], "description": tl["description"], "parameters": tl["schema"]})
		anthTools = append(anthTools, map[string]any{"name": tl["name"], "description": tl["description"], "input_schema": tl["schema"]})
	}
	return []toolPauseClient{{
		// Claude Code: thinking blocks and tool_use blocks come back as
		// they were answered, the result in a tool_result block.
		name: "claude-code", path: "/v1/messages?beta=true",
		headers: []string{"User-Agent", "claude-cli/2.1.197 (external, sdk-cli)", "X-Claude-Code-Session-Id", "s-claude"},
		first: func(system, task string) map[string]any {
			return map[string]any{"model": "claude-opus-4-8", "max_tokens": 300, "system": []map[string]any{{"type": "text", "text": system}},
				"tools": anthTools, "thinking": map[string]any{"type": "adaptive"},
				"messages": []map[string]any{{"role": "user", "content": []map[string]any{{"type": "text", "text": task}}}}}
		},
		next: func(first map[string]any, answer []byte, result string) (map[string]any, bool) {
			var a struct {
				Content []map[string]any `json:"content"`
			}
			_ = json.Unmarshal(answer, &a)
			var id string
			for _, b := range a.Content {
				if b["type"] == "tool_use" {
					id, _ = b["id"].(string)
				}
			}
			msgs := append(first["messages"].([]map[string]any),
				map[string]any{"role": "assistant", "content": a.Content},
				map[string]any{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": id, "content": result}}})
			n := copyMap(first)
			n["messages"] = msgs
			return n, id != ""
		},
		cached: func(answer []byte) int {
			var a struct {
				Usage struct {
					CacheRead int `json:"cache_read_input_tokens"`
				} `json:"usage"`
			}
			_ = json.Unmarshal(answer, &a)
			return a.Usage.CacheRead
		},
	}, {
		// Codex: the output items come back as input items (reasoning with
		// its encrypted_content), then a function_call_output.
		name: "codex", path: "/v1/responses",
		headers: []string{"User-Agent", "codex_exec/0.171.0", "originator", "codex_exec", "session-id", "s-codex"},
		first: func(system, task string) map[string]any {
			return map[string]any{"model": "local-model", "stream": false, "store": false, "tools": respTools,
				"reasoning": map[string]any{"effort": "medium"}, "include": []string{"reasoning.encrypted_content"}, "max_output_tokens": 300,
				"input": []map[string]any{{"type": "message", "role": "developer", "content": []map[string]any{{"type": "input_text", "text": system}}},
					{"type": "message", "role": "user", "content": []map[string]any{{"type": "input_text", "text": task}}}}}
		},
		next: func(first map[string]any, answer []byte, result string) (map[string]any, bool) {
			var a struct {
				Output []map[string]any `json:"output"`
			}
			_ = json.Unmarshal(answer, &a)
			input := first["input"].([]map[string]any)
			var call string
			for _, it := range a.Output {
				input = append(input, it)
				if it["type"] == "function_call" {
					call, _ = it["call_id"].(string)
				}
			}
			input = append(input, map[string]any{"type": "function_call_output", "call_id": call, "output": result})
			n := copyMap(first)
			n["input"] = input
			return n, call != ""
		},
		cached: func(answer []byte) int {
			var a struct {
				Usage struct {
					Details struct {
						Cached int `json:"cached_tokens"`
					} `json:"input_tokens_details"`
				} `json:"usage"`
			}
			_ = json.Unmarshal(answer, &a)
			return a.Usage.Details.Cached
		},
	}, {
		// OpenCode: the AI SDK sends the assistant message back without its
		// reasoning and with the arguments re-serialised.
		name: "opencode", path: "/v1/chat/completions",
		headers: []string{"User-Agent", "opencode/1.18.33 ai-sdk/provider-utils/4.0.23", "x-session-id", "ses_opencode"},
		first: func(system, task string) map[string]any {
			return map[string]any{"model": "local-model", "max_tokens": 300, "tools": openAITools,
				"chat_template_kwargs": map[string]any{"enable_thinking": true},
				"messages":             []map[string]any{{"role": "system", "content": system}, {"role": "user", "content": task}}}
		},
		next: func(first map[string]any, answer []byte, result string) (map[string]any, bool) {
			var a struct {
				Choices []struct {
					Message struct {
						Content   string `json:"content"`
						ToolCalls []struct {
							ID       string `json:"id"`
							Function struct {
								Name      string `json:"name"`
								Arguments string `json:"arguments"`
							} `json:"function"`
						} `json:"tool_calls"`
					} `json:"message"`
				} `json:"choices"`
			}
			_ = json.Unmarshal(answer, &a)
			if len(a.Choices) == 0 || len(a.Choices[0].Message.ToolCalls) == 0 {
				return nil, false
			}
			m := a.Choices[0].Message
			var calls []map[string]any
			for _, tc := range m.ToolCalls {
				var args any
				_ = json.Unmarshal([]byte(tc.Function.Arguments), &args)
				compact, _ := json.Marshal(args)
				calls = append(calls, map[string]any{"id": tc.ID, "type": "function", "function": map[string]any{"name": tc.Function.Name, "arguments": string(compact)}})
			}
			msgs := append(first["messages"].([]map[string]any),
				map[string]any{"role": "assistant", "content": m.Content, "tool_calls": calls},
				map[string]any{"role": "tool", "tool_call_id": m.ToolCalls[0].ID, "content": result})
			n := copyMap(first)
			n["messages"] = msgs
			return n, true
		},
		cached: func(answer []byte) int {
			var a struct {
				Usage struct {
					Details struct {
						Cached int `json:"cached_tokens"`
					} `json:"prompt_tokens_details"`
				} `json:"usage"`
			}
			_ = json.Unmarshal(answer, &a)
			return a.Usage.Details.Cached
		},
	}}
}

func copyMap(m map[string]any) map[string]any {
	n := make(map[string]any, len(m))
	for k, v := range m {
		n[k] = v
	}
	return n
}

// postJSON posts v to path and returns the answer's body, which must
// come with 200.
func (h *harness) postJSON(t *testing.T, path string, v any, headers []string) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	resp, out := h.post(t, path, string(b), headers...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, out)
	}
	return []byte(out)
}

const toolPauseResult = "package main\n\nfunc main() {}\n"

// toolPauseShare runs one client's turn, its tool pause and its next turn
// through a gateway in front of the simulated engine, and returns the
// share of the next turn's prompt before the tool result that the engine
// found cached.
func toolPauseShare(t *testing.T, tok *tokenizer.Model, c toolPauseClient, system string, infer bool) float64 {
	t.Helper()
	log := newEngineLog()
	url := simBehind(t, tok, 0, 1000, log.wrap)
	h := startGateway(t, newFakeRouter(Route{Worker: "sim", BaseURL: url}), func(cfg *Config, d *Deps) {
		d.Tokenizer = tok
		cfg.NoInferredHints = !infer
	})
	first := c.first(system, "Explain what main.go does in this project.")
	answer := h.postJSON(t, c.path, first, c.headers)
	next, ok := c.next(first, answer, toolPauseResult)
	if !ok {
		t.Fatalf("%s: the first answer is not a tool call: %s", c.name, answer)
	}
	if infer {
		select { // the prefill in the pause, answered before the tool returns
		case <-log.finished:
		case <-log.cancelled:
			t.Fatalf("%s: the prefill was cancelled", c.name)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no prefill reached the engine in the tool pause", c.name)
		}
	}
	answer2 := h.postJSON(t, c.path, next, c.headers)
	before := log.tokensBeforeResult(t, tok, toolPauseResult)
	t.Logf("%s: %d of the %d prompt tokens before the tool result cached", c.name, c.cached(answer2), before)
	return min(1, float64(c.cached(answer2))/float64(before))
}

// TestToolPausePrefillCachesTheNextPrompt: after a turn that ends in a tool
// call, the next turn's prompt up to the tool result is found cached (at
// least 95% of it, the rest being the partial last block), for each
// client's way of sending the answer back and the real Qwen3 template.
func TestToolPausePrefillCachesTheNextPrompt(t *testing.T) {
	tok, err := tokenizer.Qwen3()
	if err != nil {
		t.Skipf("the Qwen3 tokenizer does not load: %v", err)
	}
	system := "You are a coding helper working in /home/dev/project. " + longText(10)
	for _, c := range toolPauseClients() {
		t.Run(c.name, func(t *testing.T) {
			off := toolPauseShare(t, tok, c, system, false)
			share := toolPauseShare(t, tok, c, system, true)
			t.Logf("%s: %.1f%% of the prompt before the tool result cached (%.1f%% without the prefill)", c.name, 100*share, 100*off)
			if share < 0.95 {
				t.Errorf("%s: %.1f%% of the prompt before the tool result cached, want at least 95%%", c.name, 100*share)
			}
		})
	}
}

// TestToolPausePrefillIsCancelledByTheNextTurn: a prefill still waiting in
// the engine when the session's next turn arrives is cancelled (its HTTP
// request ends, the engine aborts it) and the turn is served.
func TestToolPausePrefillIsCancelledByTheNextTurn(t *testing.T) {
	tok, err := tokenizer.Qwen3()
	if err != nil {
		t.Skipf("the Qwen3 tokenizer does not load: %v", err)
	}
	log := newEngineLog()
	log.hold = make(chan struct{})
	url := simBehind(t, tok, 1, 0.1, log.wrap) // one running request at a time, ten times slower than a 4090
	h := startGateway(t, newFakeRouter(Route{Worker: "sim", BaseURL: url}), func(cfg *Config, d *Deps) { d.Tokenizer = tok })
	c := toolPauseClients()[2]
	first := c.first("You are a coding helper working in /home/dev/project.", "Explain what main.go does in this project.")
	delete(first, "chat_template_kwargs") // no reasoning: a short first turn
	answer := h.postJSON(t, c.path, first, c.headers)
	next, ok := c.next(first, answer, toolPauseResult)
	if !ok {
		t.Fatalf("the first answer is not a tool call: %s", answer)
	}
	select {
	case <-log.prefills:
	case <-time.After(30 * time.Second):
		t.Fatal("no prefill reached the engine in the tool pause")
	}
	// Another client's long answer takes the engine's only place, so the
	// prefill waits in the engine's queue.
	bctx, stopBlocker := context.WithCancel(context.Background())
	defer stopBlocker()
	body := `{"model":"` + servedModel + `","stream":true,"max_tokens":4000,"messages":[{"role":"user","content":"Write a long story."}]}`
	breq, _ := http.NewRequestWithContext(bctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	breq.Header.Set("Content-Type", "application/json")
	bresp, err := http.DefaultClient.Do(breq)
	if err != nil {
		t.Fatal(err)
	}
	defer bresp.Body.Close()
	if _, err := bufio.NewReader(bresp.Body).ReadString('\n'); err != nil { // its first token: it runs
		t.Fatal(err)
	}
	close(log.hold)
	turn := make(chan []byte, 1)
	go func() { turn <- h.postJSON(t, c.path, next, c.headers) }()
	select {
	case <-log.cancelled:
	case <-log.finished:
		t.Fatal("the prefill was answered, not cancelled, though the next turn had arrived")
	case <-time.After(30 * time.Second):
		t.Fatal("the next turn did not cancel the prefill")
	}
	stopBlocker()
	select {
	case <-turn:
	case <-time.After(60 * time.Second):
		t.Fatal("the next turn was not answered")
	}
	h2 := h.gw.metrics.speculative.WithLabelValues("cancelled")
	if n := testutil.ToFloat64(h2); n != 1 {
		t.Errorf("cancelled prefills counted %v, want 1", n)
	}
}
