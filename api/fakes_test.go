package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hearth-llm/hearth/api/store"
	"github.com/hearth-llm/hearth/tokenizer"
)

// fakeTokenizer renders chats in a Qwen-like layout and uses one token per
// byte: deterministic per text, so equal prefixes give equal block hashes.
type fakeTokenizer struct{}

func (f fakeTokenizer) EncodeChat(r tokenizer.ChatRequest) (string, []uint32, error) {
	s, err := f.ApplyChatTemplate(r)
	if err != nil {
		return "", nil, err
	}
	return s, bytesToIDs(s), nil
}

// MinTokens is exact: one token per byte.
func (fakeTokenizer) MinTokens(text string) int { return len(text) }

func (fakeTokenizer) ApplyChatTemplate(r tokenizer.ChatRequest) (string, error) {
	var msgs []chatMessage
	if err := json.Unmarshal(r.Messages, &msgs); err != nil {
		return "", fmt.Errorf("fake template: %w", err)
	}
	var sb strings.Builder
	if len(r.Tools) > 0 && string(r.Tools) != "null" {
		sb.WriteString("<|im_start|>system\n<tools>")
		sb.Write(r.Tools)
		sb.WriteString("</tools><|im_end|>\n")
	}
	for _, m := range msgs {
		rest, _ := json.Marshal(struct {
			Content   json.RawMessage `json:"content"`
			Reasoning string          `json:"reasoning,omitempty"`
			Calls     []toolCall      `json:"calls,omitempty"`
			CallID    string          `json:"call_id,omitempty"`
		}{m.Content, m.ReasoningContent, m.ToolCalls, m.ToolCallID})
		fmt.Fprintf(&sb, "<|im_start|>%s\n%s<|im_end|>\n", m.Role, rest)
	}
	if r.AddGenerationPrompt {
		sb.WriteString("<|im_start|>assistant\n")
	}
	if v, ok := r.Kwargs["enable_thinking"].(bool); ok && !v {
		sb.WriteString("<think>\n\n</think>\n\n")
	}
	return sb.String(), nil
}

func (fakeTokenizer) Encode(text string) []uint32 { return bytesToIDs(text) }

func bytesToIDs(s string) []uint32 {
	ids := make([]uint32, len(s))
	for i := range len(s) {
		ids[i] = uint32(s[i])
	}
	return ids
}

// fakeRouter routes to fixed workers in order, skipping excluded ones.
type fakeRouter struct {
	mu        sync.Mutex
	workers   []Route
	err       error // returned by Route when set
	routed    []RouteRequest
	prefilled map[string]int
	freed     map[string]int
	freedCh   chan string
	// queue, when set, keeps every Route waiting, as a full router queue
	// does, until its context ends; then it is closed. queued gets a value
	// as each Route starts to wait.
	queue  chan struct{}
	queued chan struct{}
}

func newFakeRouter(workers ...Route) *fakeRouter {
	return &fakeRouter{workers: workers, prefilled: map[string]int{}, freed: map[string]int{}, freedCh: make(chan string, 100), queued: make(chan struct{}, 100)}
}

func (r *fakeRouter) Route(ctx context.Context, req RouteRequest) (Route, error) {
	if r.queue != nil {
		r.queued <- struct{}{}
		<-ctx.Done()
		close(r.queue)
		return Route{}, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	req.Hashes = append([]tokenizer.SeqHash(nil), req.Hashes...)
	req.Exclude = append([]string(nil), req.Exclude...)
	r.routed = append(r.routed, req)
	if r.err != nil {
		return Route{}, r.err
	}
next:
	for _, w := range r.workers {
		for _, x := range req.Exclude {
			if x == w.Worker {
				continue next
			}
		}
		w.PromptBlocks = len(req.Hashes)
		return w, nil
	}
	return Route{}, fmt.Errorf("fake: %w", ErrNoWorker)
}

func (r *fakeRouter) PrefillDone(id string) {
	r.mu.Lock()
	r.prefilled[id]++
	r.mu.Unlock()
}

func (r *fakeRouter) Free(id string) {
	r.mu.Lock()
	r.freed[id]++
	r.mu.Unlock()
	select {
	case r.freedCh <- id:
	default: // benchmarks end more requests than anyone waits for
	}
}

func (r *fakeRouter) lastRoute(t *testing.T) RouteRequest {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.routed) == 0 {
		t.Fatal("nothing was routed")
	}
	return r.routed[len(r.routed)-1]
}

// waitFreed waits until the router was told that n more requests ended.
func (r *fakeRouter) waitFreed(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		select {
		case id := <-r.freedCh:
			ids = append(ids, id)
		case <-time.After(failSafe):
			t.Fatalf("router was not told that a request ended (got %d of %d)", len(ids), n)
		}
	}
	return ids
}

// failSafe bounds every wait for something that takes milliseconds: it
// only stops a test that hangs, however busy the machine.
const failSafe = time.Minute

// waitPeerClosed waits until the other end's close of conn has arrived,
// which a read sees as the end of the stream. Nothing may be left to read.
func waitPeerClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(failSafe))
	defer conn.SetReadDeadline(time.Time{})
	var b [1]byte
	if n, err := conn.Read(b[:]); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("waiting for the peer to close: read %d bytes, %v", n, err)
	}
}

// engineReply scripts one answer of the fake engine.
type engineReply struct {
	Reasoning string
	Text      string
	ToolCalls []toolFunction
	Finish    string
	Status    int    // non-200: answer with this error status
	Error     string // the error message with Status; a scripted one if empty
	BreakAt   int    // > 0: drop the connection after this many chunks
	Hold      bool   // after the first word of Text, wait until the client cancels
	Linger    bool   // after [DONE], keep the body open until the gateway closes it
}

// fakeEngine is an OpenAI-compatible engine in the shape vLLM streams.
type fakeEngine struct {
	srv          *httptest.Server
	script       func(body map[string]json.RawMessage, msgs []chatMessage) engineReply
	cachedTokens int
	conns        atomic.Int32 // connections the gateway opened

	mu        sync.Mutex
	bodies    []map[string]json.RawMessage
	cancelled chan struct{} // closed when a held request saw its context end
	seen      chan map[string]json.RawMessage
}

func newFakeEngine(t testing.TB) *fakeEngine {
	e := &fakeEngine{script: defaultScript, cancelled: make(chan struct{}), seen: make(chan map[string]json.RawMessage, 100)}
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(e.serve))
	e.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.conns.Add(1)
		}
	}
	e.srv.Start()
	t.Cleanup(e.srv.Close)
	return e
}

// defaultScript asks for a tool when tools are offered and the last message
// is the user's, and answers in text once a tool result came back.
func defaultScript(body map[string]json.RawMessage, msgs []chatMessage) engineReply {
	last := msgs[len(msgs)-1]
	if last.Role != "tool" && len(body["tools"]) > 0 {
		var tools []chatTool
		_ = json.Unmarshal(body["tools"], &tools)
		return engineReply{Reasoning: "The user wants a listing.", Text: "Let me look.", ToolCalls: []toolFunction{{Name: tools[0].Function.Name, Arguments: `{"command":"ls"}`}}, Finish: "tool_calls"}
	}
	if last.Role == "tool" {
		return engineReply{Text: "There are 3 files here: a.txt, b.txt and c.txt.", Finish: "stop"}
	}
	return engineReply{Text: "Hello from the engine.", Finish: "stop"}
}

func (e *fakeEngine) requests() []map[string]json.RawMessage {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]map[string]json.RawMessage(nil), e.bodies...)
}

// lastChat is the body of the last chat request the engine got: the
// gateway's own prefills in a tool pause (a completions prompt of token
// ids, no messages) may reach it after the turn that followed them.
func (e *fakeEngine) lastChat(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	reqs := e.requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if _, ok := reqs[i]["messages"]; ok {
			return reqs[i]
		}
	}
	t.Fatal("the engine got no chat request")
	return nil
}

func (e *fakeEngine) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	e.mu.Lock()
	e.bodies = append(e.bodies, body)
	e.mu.Unlock()
	select {
	case e.seen <- body:
	default:
	}
	var msgs []chatMessage
	_ = json.Unmarshal(body["messages"], &msgs)
	if r.URL.Path == "/v1/chat/completions" && len(msgs) == 0 {
		http.Error(w, `{"error":{"message":"no messages"}}`, http.StatusBadRequest)
		return
	}
	var reply engineReply
	if r.URL.Path == "/v1/completions" {
		reply = engineReply{Text: "completed text", Finish: "length"}
	} else {
		reply = e.script(body, msgs)
	}
	if reply.Status != 0 {
		msg := reply.Error
		if msg == "" {
			msg = fmt.Sprintf("scripted failure %d", reply.Status)
		}
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg}})
		w.WriteHeader(reply.Status)
		w.Write(b)
		return
	}
	var stream bool
	_ = json.Unmarshal(body["stream"], &stream)
	if !stream { // speculative prefills
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"."},"finish_reason":"length"}],"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	sent := 0
	send := func(v any) bool {
		if reply.BreakAt > 0 && sent == reply.BreakAt {
			panic(http.ErrAbortHandler) // drop the connection mid-stream
		}
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
		sent++
		return true
	}
	completions := r.URL.Path == "/v1/completions"
	chunk := func(delta map[string]any, finish any) map[string]any {
		if completions {
			return map[string]any{"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "qwen3-14b",
				"choices": []any{map[string]any{"index": 0, "text": delta["content"], "finish_reason": finish}}}
		}
		return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "qwen3-14b",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	if !completions {
		send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	}
	if reply.Hold {
		if words := splitWords(reply.Text); len(words) > 0 {
			send(chunk(map[string]any{"content": words[0]}, nil))
		}
		select {
		case <-r.Context().Done():
			close(e.cancelled)
		case <-time.After(failSafe):
		}
		return
	}
	for _, part := range splitWords(reply.Reasoning) {
		send(chunk(map[string]any{"reasoning_content": part}, nil))
	}
	for _, part := range splitWords(reply.Text) {
		send(chunk(map[string]any{"content": part}, nil))
	}
	for i, tc := range reply.ToolCalls {
		send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": fmt.Sprintf("call_%d_%d", len(msgs), i), "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""}}}}, nil))
		half := len(tc.Arguments) / 2
		for _, a := range []string{tc.Arguments[:half], tc.Arguments[half:]} {
			send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": a}}}}, nil))
		}
	}
	send(chunk(map[string]any{}, reply.Finish))
	prompt := len(raw) / 4
	completion := len(strings.Fields(reply.Text+" "+reply.Reasoning)) + 3*len(reply.ToolCalls)
	send(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "qwen3-14b", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
			"prompt_tokens_details": map[string]any{"cached_tokens": e.cachedTokens}}})
	fmt.Fprint(w, "data: [DONE]\n\n")
	// The end of the chunked body comes a moment after [DONE], as it does
	// from an engine whose last write is [DONE].
	fl.Flush()
	if reply.Linger {
		select {
		case <-r.Context().Done():
			close(e.cancelled)
		case <-time.After(failSafe):
		}
		return
	}
	time.Sleep(2 * time.Millisecond)
}

// splitWords splits s into pieces that concatenate back to s.
func splitWords(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s[1:], ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// refusedAddr returns a loopback URL nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// memStore is an in-memory ResponseStore.
type memStore struct {
	mu sync.Mutex
	m  map[string]store.Response
}

func (s *memStore) PutResponse(_ context.Context, r store.Response) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]store.Response{}
	}
	s.m[r.ID] = r
	return nil
}

func (s *memStore) GetResponse(_ context.Context, id string) (store.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[id]
	if !ok {
		return r, fmt.Errorf("mem: %w", store.ErrNotFound)
	}
	return r, nil
}

const servedModel = "qwen3-14b"

// harness is a gateway on a real loopback port in front of fakes.
type harness struct {
	url      string // e.g. http://127.0.0.1:1234
	gw       *Gateway
	router   *fakeRouter
	engine   *fakeEngine
	registry *prometheus.Registry
}

type harnessOption func(*Config, *Deps)

func withConfig(fn func(*Config)) harnessOption {
	return func(c *Config, _ *Deps) { fn(c) }
}

// withHandled sends the path of every request to handled once the
// gateway's handler has returned (a streamed body may still be flowing).
func withHandled(handled chan<- string) harnessOption {
	return func(_ *Config, d *Deps) {
		mount := d.Mount
		d.Mount = func(r fiber.Router) {
			r.Use(func(c *fiber.Ctx) error {
				err := c.Next()
				handled <- strings.Clone(c.Path())
				return err
			})
			if mount != nil {
				mount(r)
			}
		}
	}
}

func withKeys(keys ...string) harnessOption {
	return func(c *Config, _ *Deps) { c.APIKeys = keys }
}

func startGateway(t testing.TB, router *fakeRouter, opts ...harnessOption) *harness {
	t.Helper()
	h := &harness{router: router, registry: prometheus.NewRegistry()}
	if router == nil {
		h.engine = newFakeEngine(t)
		h.router = newFakeRouter(Route{Worker: "w1", BaseURL: h.engine.srv.URL, CachedBlocks: 3, Policy: "kv"})
	}
	cfg := Config{
		Models:  []string{servedModel},
		Aliases: map[string]string{"claude-*": servedModel, "gpt-*": servedModel, "local-model": servedModel},
	}
	deps := Deps{Router: h.router, Tokenizer: fakeTokenizer{}, Registry: h.registry, Store: &memStore{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(&cfg, &deps)
	}
	gw, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	h.gw = gw
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.url = "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- gw.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return h
}

// post sends a JSON body and returns the response with its body read.
func (h *harness) post(t *testing.T, path, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}
