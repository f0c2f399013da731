package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAnswersNameTheModelAsTheClientDid checks the model-name rule in every
// dialect, streamed and not: each "model" in the answer is the name the
// client sent (an alias included), and x-hearth-model names the served
// model.
func TestAnswersNameTheModelAsTheClientDid(t *testing.T) {
	for _, tc := range []struct {
		name, path, body, model string
	}{
		{"chat", "/v1/chat/completions", `{"model":"gpt-5.5","messages":[{"role":"user","content":"hi"}]}`, "gpt-5.5"},
		{"chat streaming", "/v1/chat/completions", `{"model":"gpt-5.5","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, "gpt-5.5"},
		{"chat by the served name", "/v1/chat/completions", `{"model":"qwen3-14b","stream":true,"messages":[{"role":"user","content":"hi"}]}`, servedModel},
		{"completions", "/v1/completions", `{"model":"local-model","prompt":"hi","max_tokens":4}`, "local-model"},
		{"completions streaming", "/v1/completions", `{"model":"local-model","prompt":"hi","max_tokens":4,"stream":true}`, "local-model"},
		{"responses", "/v1/responses", `{"model":"gpt-5.5","input":"hi"}`, "gpt-5.5"},
		{"responses streaming", "/v1/responses", `{"model":"gpt-5.5","stream":true,"input":"hi"}`, "gpt-5.5"},
		{"anthropic", "/v1/messages", `{"model":"claude-opus-4-8","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, "claude-opus-4-8"},
		{"anthropic streaming", "/v1/messages", `{"model":"claude-opus-4-8","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "claude-opus-4-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, nil)
			resp, body := h.post(t, tc.path, tc.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if got := resp.Header.Get(headerModel); got != servedModel {
				t.Errorf("%s %q, want %q", headerModel, got, servedModel)
			}
			docs := []string{body}
			if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				docs = docs[:0]
				for _, ev := range parseSSE(t, strings.NewReader(body)) {
					if ev.Data != "[DONE]" {
						docs = append(docs, ev.Data)
					}
				}
			}
			var names []string
			for _, d := range docs {
				var v any
				if err := json.Unmarshal([]byte(d), &v); err != nil {
					t.Fatalf("%v: %s", err, d)
				}
				names = append(names, modelNames(v)...)
			}
			if len(names) == 0 {
				t.Fatalf("no model named in %s", body)
			}
			for _, n := range names {
				if n != tc.model {
					t.Errorf("answer names model %q, want %q as the client sent it", n, tc.model)
				}
			}
		})
	}
}

// modelNames returns every string under a "model" key in v.
func modelNames(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "model" {
				out = append(out, s)
			}
			out = append(out, modelNames(e)...)
		}
	case []any:
		for _, e := range v {
			out = append(out, modelNames(e)...)
		}
	}
	return out
}

// TestChatChunkRenamed checks the rewriting of an engine chunk's model:
// in place in vLLM's compact form, by a decode in any other, and not at
// all where the names agree or the client's name is unknown.
func TestChatChunkRenamed(t *testing.T) {
	for _, tc := range []struct {
		name, client, raw, want string
	}{
		{"compact", "gpt-5.5", `{"id":"c","model":"Qwen/Qwen3-14B","choices":[{"delta":{"content":"\"model\":\"Qwen/Qwen3-14B\""}}]}`,
			`{"id":"c","model":"gpt-5.5","choices":[{"delta":{"content":"\"model\":\"Qwen/Qwen3-14B\""}}]}`},
		{"spaced", "gpt-5.5", `{"id": "c", "model": "Qwen/Qwen3-14B", "choices": []}`, `{"id":"c","model":"gpt-5.5","choices":[]}`},
		{"escaped name", `a"b`, `{"model":"m<1>"}`, `{"model":"a\"b"}`},
		{"same name", "Qwen/Qwen3-14B", `{"model": "Qwen/Qwen3-14B"}`, `{"model": "Qwen/Qwen3-14B"}`},
		{"no client name", "", `{"model":"Qwen/Qwen3-14B"}`, `{"model":"Qwen/Qwen3-14B"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &openAIChatResponder{model: tc.client}
			var served struct {
				Model string `json:"model"`
			}
			if err := json.Unmarshal([]byte(tc.raw), &served); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second chunk reuses what the first prepared
				var w bytes.Buffer
				r.writeRenamed(&w, []byte(tc.raw), served.Model)
				if w.String() != tc.want {
					t.Fatalf("got  %s\nwant %s", w.String(), tc.want)
				}
			}
		})
	}
}

// GET /v1/models lists the served models with the served context, as
// vLLM's max_model_len, and leaves it out while the context is unknown.
func TestModelsCarryTheServedContext(t *testing.T) {
	for _, tc := range []struct {
		context int
		want    string
	}{
		{40960, `{"object":"list","data":[{"id":"` + servedModel + `","object":"model","created":0,"owned_by":"hearth","max_model_len":40960}]}`},
		{0, `{"object":"list","data":[{"id":"` + servedModel + `","object":"model","created":0,"owned_by":"hearth"}]}`},
	} {
		h := startGateway(t, nil, withConfig(func(c *Config) { c.ContextTokens = tc.context }))
		resp, err := http.Get(h.url + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != tc.want {
			t.Errorf("context %d: %d %s, want %s", tc.context, resp.StatusCode, b, tc.want)
		}
	}
}
