package api

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

const benchChunks = 256

// benchStream is a recorded-shape engine stream: a role chunk, content
// chunks of one word each, a finish chunk, a usage chunk and [DONE].
func benchStream() []byte {
	var b bytes.Buffer
	b.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"qwen3-14b","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	for i := range benchChunks {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"qwen3-14b","choices":[{"index":0,"delta":{"content":" word%d"},"logprobs":null,"finish_reason":null}]}`+"\n\n", i)
	}
	b.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"qwen3-14b","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}` + "\n\n")
	b.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"qwen3-14b","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":256,"total_tokens":356,"prompt_tokens_details":{"cached_tokens":64}}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkRelay measures the gateway's own per-request cost of reading an
// engine stream and writing it in each dialect, without any network.
func BenchmarkRelay(b *testing.B) {
	stream := benchStream()
	g := &Gateway{router: newFakeRouter(), log: slog.New(slog.NewTextHandler(io.Discard, nil)), traffic: NewTraffic(TrafficLimits{})}
	g.metrics, _ = newMetrics(prometheus.NewRegistry())
	for _, tc := range []struct {
		name string
		rs   func() responder
	}{
		{"openai", func() responder { return &openAIChatResponder{includeUsage: true} }},
		{"anthropic", func() responder { return &anthropicResponder{tool: -1} }},
		{"responses", func() responder { return &responsesResponder{} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			buf := make([]byte, 4096) // what fasthttp reads a body stream with
			b.ReportAllocs()
			b.SetBytes(int64(len(stream)))
			for b.Loop() {
				ex := &exchange{g: g, req: &engineRequest{}, body: io.NopCloser(bytes.NewReader(stream)), status: http.StatusOK}
				body := &streamBody{ex: ex, r: tc.rs()}
				for {
					_, err := body.Read(buf)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				body.Close()
				if ex.status != http.StatusOK {
					b.Fatalf("status %d", ex.status)
				}
			}
			b.ReportMetric(float64(benchChunks)*float64(b.N)/b.Elapsed().Seconds(), "chunks/s")
		})
	}
}

// BenchmarkGatewayStream measures whole streamed requests through the
// gateway on loopback against an engine that replays a prepared stream.
// It includes the HTTP client's and the fake engine's cost.
func BenchmarkGatewayStream(b *testing.B) {
	stream := benchStream()
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(stream)
	}))
	defer engine.Close()
	for _, tc := range []struct{ name, path, body string }{
		{"openai", "/v1/chat/completions", `{"model":"qwen3-14b","stream":true,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Tell me a story."}]}`},
		{"anthropic", "/v1/messages", `{"model":"claude-x","max_tokens":512,"stream":true,"system":"Be brief.","messages":[{"role":"user","content":"Tell me a story."}]}`},
		{"responses", "/v1/responses", `{"model":"gpt-x","stream":true,"instructions":"Be brief.","input":"Tell me a story."}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := startGateway(b, newFakeRouter(Route{Worker: "w", BaseURL: engine.URL}))
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Post(h.url+tc.path, "application/json", strings.NewReader(tc.body))
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || n == 0 {
					b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
				}
			}
			b.ReportMetric(float64(benchChunks)*float64(b.N)/b.Elapsed().Seconds(), "chunks/s")
		})
	}
}
