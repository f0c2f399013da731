package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/hearth-llm/hearth/tokenizer"
)

// byteTokenizer is a deterministic stand-in for the real tokenizer: one
// token per byte, and a ChatML-like template. Decoding a token that ends
// inside a UTF-8 character yields U+FFFD, as byte-level BPE decoders do.
type byteTokenizer struct{}

func (byteTokenizer) Encode(text string) []uint32 {
	ids := make([]uint32, len(text))
	for i := range len(text) {
		ids[i] = uint32(text[i])
	}
	return ids
}

// TokenStrings names each byte token by its byte.
func (byteTokenizer) TokenStrings(ids []uint32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(rune(id))
	}
	return out
}

func (byteTokenizer) Decode(ids []uint32) string {
	b := make([]byte, 0, len(ids))
	for _, id := range ids {
		b = append(b, byte(id))
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func (byteTokenizer) ApplyChatTemplate(req tokenizer.ChatRequest) (string, error) {
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(req.Messages, &msgs); err != nil {
		return "", fmt.Errorf("messages: %w", err)
	}
	var b strings.Builder
	if len(req.Tools) > 0 {
		fmt.Fprintf(&b, "<|im_start|>system\n# Tools\n%s<|im_end|>\n", req.Tools)
	}
	for _, m := range msgs {
		var text string
		if json.Unmarshal(m.Content, &text) != nil {
			text = string(m.Content)
		}
		fmt.Fprintf(&b, "<|im_start|>%s\n%s<|im_end|>\n", m.Role, text)
	}
	if req.AddGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
		if req.Kwargs["enable_thinking"] == false {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	}
	return b.String(), nil
}

// testEngine is a real Core behind a Runner, fast enough for tests.
type testEngine struct {
	*Runner
	core *Core
}

func newTestEngine(t *testing.T, speedup float64) *testEngine {
	t.Helper()
	core, err := NewCore(Config{GPU: "rtx4090", Model: "qwen3-8b", NumGPUBlocks: 512, MaxModelLen: 4096}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &testEngine{Runner: NewRunner(core, RunnerOptions{Speedup: speedup}), core: core}
}

// testServer is a Server running on loopback with its engine loop.
type testServer struct {
	*Server
	engine  Engine
	url     string
	cancel  context.CancelFunc
	done    chan error
	handled chan string // path of every request whose handler returned
}

func startServer(t *testing.T, engine Engine, mutate func(*ServerOptions)) *testServer {
	t.Helper()
	opts := ServerOptions{
		Engine: engine, Tokenizer: byteTokenizer{}, ServedModelName: "qwen3-test", ModelName: "qwen3-8b",
		MaxModelLen: 4096, NumGPUBlocks: 512, BlockSize: 16, GPUMemoryUtilization: 0.9, Speedup: 1000, Seed: 1,
	}
	if mutate != nil {
		mutate(&opts)
	}
	s, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, engine: engine, done: make(chan error, 1), handled: make(chan string, 64)}
	// Wrap the mux so tests can wait for a handler to finish.
	inner := s.mux
	wrapped := http.NewServeMux()
	wrapped.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(w, r)
		select {
		case ts.handled <- r.URL.Path:
		default:
		}
	}))
	s.mux = wrapped

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts.cancel = cancel
	ts.url = "http://" + ln.Addr().String()
	go func() { ts.done <- s.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ts.done; err != nil {
			t.Errorf("server Run: %v", err)
		}
	})
	return ts
}

func (ts *testServer) post(t *testing.T, path string, body any) (*http.Response, []byte) {
	t.Helper()
	return ts.postCtx(t, context.Background(), path, body)
}

func (ts *testServer) postCtx(t *testing.T, ctx context.Context, path string, body any) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

func (ts *testServer) get(t *testing.T, path string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(ts.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

// readSSE splits an event stream into its data payloads.
func readSSE(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an SSE data line: %q", line)
		}
		out = append(out, data)
	}
	return out
}

// fakeEngine answers every request at once with its output tokens; Run
// only blocks. It checks the HTTP layer without the engine model.
type fakeEngine struct {
	mu       sync.Mutex
	requests []Request
	submit   func(req *Request) error // optional failure injection
}

func (f *fakeEngine) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

func (f *fakeEngine) Submit(ctx context.Context, req *Request) (<-chan TokenOutput, error) {
	if f.submit != nil {
		if err := f.submit(req); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	f.requests = append(f.requests, *req)
	f.mu.Unlock()
	ch := make(chan TokenOutput, len(req.Output))
	for i, tok := range req.Output {
		ch <- TokenOutput{RequestID: req.ID, Token: tok, Index: i, PromptTokens: len(req.Prompt),
			Finished: i == len(req.Output)-1, FinishReason: "length"}
	}
	close(ch)
	return ch, nil
}

func (f *fakeEngine) Stats() Stats { return Stats{NumGPUBlocks: 8, BlockSize: 16} }

func (f *fakeEngine) last() Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1]
}
