package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestMaxTokensCappedToTheRoomLeft sends every dialect's output limit
// (max_tokens, max_completion_tokens, max_output_tokens) above, below and
// beside what the context leaves: above is lowered to the room left and the
// x-hearth-max-tokens-capped header says so; a prompt that alone fills the
// context is refused in the client's dialect and never reaches an engine.
func TestMaxTokensCappedToTheRoomLeft(t *testing.T) {
	const context = 4096
	type outcome int
	const (
		sent     outcome = iota // as asked
		capped                  // lowered to the room left, with the header
		overflow                // refused before dispatch
	)
	long := strings.Repeat("x", 2*context)
	cases := []struct {
		name, path, body string
		asked            int
		want             outcome
		errCheck         func(t *testing.T, resp *http.Response, body string)
	}{
		{"chat max_tokens over", "/v1/chat/completions", `{"model":"gpt-5.5","max_tokens":64000,"messages":[{"role":"user","content":"hi"}]}`, 64000, capped, nil},
		{"chat max_completion_tokens over", "/v1/chat/completions", `{"model":"gpt-5.5","stream":true,"max_completion_tokens":32000,"messages":[{"role":"user","content":"hi"}]}`, 32000, capped, nil},
		{"chat within", "/v1/chat/completions", `{"model":"gpt-5.5","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, 100, sent, nil},
		{"chat prompt too long", "/v1/chat/completions", `{"model":"gpt-5.5","max_tokens":100,"messages":[{"role":"user","content":"` + long + `"}]}`, 100, overflow, openAIOverflow("messages")},
		{"completions over", "/v1/completions", `{"model":"gpt-5.5","prompt":"hi","max_tokens":64000}`, 64000, capped, nil},
		{"completions within", "/v1/completions", `{"model":"gpt-5.5","prompt":"hi","max_tokens":100,"stream":true}`, 100, sent, nil},
		{"completions prompt too long", "/v1/completions", `{"model":"gpt-5.5","prompt":"` + long + `","max_tokens":100}`, 100, overflow, openAIOverflow("prompt")},
		{"anthropic over", "/v1/messages", `{"model":"claude-opus-4-8","max_tokens":64000,"messages":[{"role":"user","content":"hi"}]}`, 64000, capped, nil},
		{"anthropic streaming over", "/v1/messages", `{"model":"claude-opus-4-8","stream":true,"max_tokens":64000,"messages":[{"role":"user","content":"hi"}]}`, 64000, capped, nil},
		{"anthropic within", "/v1/messages", `{"model":"claude-opus-4-8","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, 100, sent, nil},
		{"anthropic prompt too long", "/v1/messages", `{"model":"claude-opus-4-8","max_tokens":100,"messages":[{"role":"user","content":"` + long + `"}]}`, 100, overflow, anthropicOverflow},
		{"responses over", "/v1/responses", `{"model":"gpt-5.5","max_output_tokens":64000,"input":"hi"}`, 64000, capped, nil},
		{"responses within", "/v1/responses", `{"model":"gpt-5.5","stream":true,"max_output_tokens":100,"input":"hi"}`, 100, sent, nil},
		{"responses prompt too long", "/v1/responses", `{"model":"gpt-5.5","max_output_tokens":100,"input":"` + long + `"}`, 100, overflow, openAIOverflow("input")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, nil, withConfig(func(c *Config) { c.ContextTokens = context }))
			resp, body := h.post(t, tc.path, tc.body)
			header := resp.Header.Get(headerMaxTokensCapped)
			if tc.want == overflow {
				tc.errCheck(t, resp, body)
				if n := len(h.engine.requests()); n != 0 {
					t.Errorf("%d engine requests for a prompt that cannot fit", n)
				}
				if header != "" {
					t.Errorf("%s: %q on a refused request", headerMaxTokensCapped, header)
				}
				return
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			reqs := h.engine.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d engine requests", len(reqs))
			}
			got := string(reqs[0]["max_tokens"])
			if tc.want == sent {
				if got != fmt.Sprint(tc.asked) || header != "" {
					t.Errorf("engine max_tokens %s, header %q; want %d and none", got, header, tc.asked)
				}
				return
			}
			room := context - h.router.lastRoute(t).PromptTokens
			if got != fmt.Sprint(room) {
				t.Errorf("engine max_tokens %s, want the room left, %d", got, room)
			}
			if want := fmt.Sprintf("%d->%d", tc.asked, room); header != want {
				t.Errorf("%s %q, want %q", headerMaxTokensCapped, header, want)
			}
		})
	}
}

// openAIOverflow checks an OpenAI 400 with code context_length_exceeded,
// the vLLM wording and param.
func openAIOverflow(param string) func(t *testing.T, resp *http.Response, body string) {
	return func(t *testing.T, resp *http.Response, body string) {
		t.Helper()
		var e openAIError
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code == nil ||
			*e.Error.Code != "context_length_exceeded" || e.Error.Param == nil || *e.Error.Param != param ||
			!openCodeTooLong.MatchString(e.Error.Message) || !strings.Contains(e.Error.Message, "maximum context length is 4096 tokens") {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	}
}

func anthropicOverflow(t *testing.T, resp *http.Response, body string) {
	t.Helper()
	var e anthropicError
	if resp.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(body), &e) != nil || e.Error.Type != "invalid_request_error" {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if m := claudeCodeTooLong.FindStringSubmatch(e.Error.Message); m == nil || m[2] != "4096" {
		t.Errorf("message %q is not Claude Code's prompt-too-long", e.Error.Message)
	}
}
