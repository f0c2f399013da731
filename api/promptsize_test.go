package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hearth-llm/hearth/tokenizer"
)

// countingTokenizer counts the tokenizations it is asked for.
type countingTokenizer struct {
	fakeTokenizer
	encodes atomic.Int64
}

func (c *countingTokenizer) Encode(text string) []uint32 {
	c.encodes.Add(1)
	return c.fakeTokenizer.Encode(text)
}

func (c *countingTokenizer) EncodeChat(r tokenizer.ChatRequest) (string, []uint32, error) {
	c.encodes.Add(1)
	return c.fakeTokenizer.EncodeChat(r)
}

// A prompt that cannot fit the context whatever its tokens is refused in
// its client's words before it is tokenized, on every endpoint.
func TestHugePromptRefusedWithoutTokenizing(t *testing.T) {
	tok := &countingTokenizer{}
	h := startGateway(t, nil, withConfig(func(c *Config) { c.ContextTokens = 4096 }),
		func(_ *Config, d *Deps) { d.Tokenizer = tok })
	huge, _ := json.Marshal(strings.Repeat("x", 2<<20))
	cases := []struct {
		path, body, want string
		status           int
	}{
		{"/v1/chat/completions", fmt.Sprintf(`{"model":"qwen3-14b","messages":[{"role":"user","content":%s}]}`, huge),
			"maximum context length is 4096 tokens", http.StatusBadRequest},
		{"/v1/completions", fmt.Sprintf(`{"model":"qwen3-14b","prompt":%s}`, huge),
			"maximum context length is 4096 tokens", http.StatusBadRequest},
		{"/v1/messages", fmt.Sprintf(`{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":%s}]}`, huge),
			"prompt is too long", http.StatusBadRequest},
		{"/v1/messages/count_tokens", fmt.Sprintf(`{"model":"claude-x","messages":[{"role":"user","content":%s}]}`, huge),
			"prompt is too long", http.StatusBadRequest},
		{"/v1/responses", fmt.Sprintf(`{"model":"gpt-x","input":%s}`, huge),
			"context_length_exceeded", http.StatusBadRequest},
		{"/v1/responses", fmt.Sprintf(`{"model":"gpt-x","stream":true,"input":%s}`, huge),
			"context_length_exceeded", http.StatusOK}, // Codex: response.failed in the stream
	}
	for _, tc := range cases {
		resp, body := h.post(t, tc.path, tc.body)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s: status %d, body %.300s; want %d with %q", tc.path, resp.StatusCode, body, tc.status, tc.want)
		}
	}
	if n := tok.encodes.Load(); n != 0 {
		t.Errorf("%d prompts were tokenized; none can fit", n)
	}
	// One that may fit is tokenized.
	h.post(t, "/v1/chat/completions", `{"model":"qwen3-14b","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	if tok.encodes.Load() == 0 {
		t.Error("a prompt that fits was not tokenized")
	}
}
