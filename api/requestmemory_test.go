package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestRequestMemory measures what one request costs the gateway at most:
// everything it allocates while serving it, with the collector off (an
// upper bound on the heap the request holds at its peak). The figures are
// in docs/perf.md. Run with
//
//	HEARTH_MEASURE=1 go test ./api -run TestRequestMemory -v -count=1
func TestRequestMemory(t *testing.T) {
	if os.Getenv("HEARTH_MEASURE") == "" {
		t.Skip("set HEARTH_MEASURE=1 to measure")
	}
	const contextTokens = 40960
	tok := qwen3(t)
	// An engine that reads the prompt and answers one word.
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer engine.Close()
	gw, err := New(Config{Models: []string{servedModel}, Aliases: map[string]string{"claude-*": servedModel}, ContextTokens: contextTokens},
		Deps{Router: newFakeRouter(Route{Worker: "w1", BaseURL: engine.URL}), Tokenizer: tok, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go gw.Serve(ctx, ln)
	url := "http://" + ln.Addr().String() + "/v1/messages"

	code, err := os.ReadFile("gateway.go")
	if err != nil {
		t.Fatal(err)
	}
	repeat := func(s string, n int) string { return strings.Repeat(s, n/len(s)+1)[:n] }
	rnd := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, contextTokens*tok.MaxTokenBytes()-4096)
	for i := range random {
		random[i] = byte(' ' + rnd.IntN(95)) // printable ASCII: the most tokens per byte a text gets
	}
	message := func(text string) []byte {
		content, _ := json.Marshal(text)
		return []byte(fmt.Sprintf(`{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":%s}]}`, content))
	}
	// Requests whose parts are each small but many, or one part too large
	// for any template (chatbounds.go).
	tools := make([]string, 240_000)
	for i := range tools {
		tools[i] = fmt.Sprintf(`{"name":"tool_%d","description":"reads a file of the project and returns its text","input_schema":{"type":"object"}}`, i)
	}
	image := strings.Repeat("QUFB", 30e6/4)
	prompts := []struct {
		name string
		body []byte
	}{
		{"30 MB of code, refused untokenized", message(repeat(string(code), 30e6))},
		{"the largest code prompt that reaches the tokenizer", message(repeat(string(code), contextTokens*tok.MaxTokenBytes()-4096))},
		{"as large, random printable ASCII", message(string(random))},
		{"an agent turn of 30k tokens", message(repeat(string(code), 30000*3))},
		{"240k tools", []byte(`{"model":"claude-x","max_tokens":10,"tools":[` + strings.Join(tools, ",") + `],"messages":[{"role":"user","content":"hi"}]}`)},
		{"a million one-letter messages", []byte(`{"model":"claude-x","max_tokens":10,"messages":[` +
			strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"a"},`, 1e6), ",") + `]}`)},
		{"a 30 MB base64 image", []byte(`{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` +
			image + `"}}]}]}`)},
	}
	if os.Getenv("HEARTH_MEASURE") == "first" {
		prompts = prompts[:1]
	}
	for _, p := range prompts {
		body := p.body
		var before, after runtime.MemStats
		runtime.GC()
		old := debug.SetGCPercent(-1)
		runtime.ReadMemStats(&before)
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		runtime.ReadMemStats(&after)
		debug.SetGCPercent(old)
		t.Logf("%-52s body %5.1f MB: status %d, allocated %6.1f MB (%.1f× the body)  %.80s", p.name, float64(len(body))/1e6, resp.StatusCode,
			float64(after.TotalAlloc-before.TotalAlloc)/1e6, float64(after.TotalAlloc-before.TotalAlloc)/float64(len(body)), answer)
	}
}
