package api

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hearth-llm/hearth/tokenizer"
)

// renderCountingTokenizer counts the chats it is asked to render.
type renderCountingTokenizer struct {
	fakeTokenizer
	renders atomic.Int64
}

func (r *renderCountingTokenizer) ApplyChatTemplate(req tokenizer.ChatRequest) (string, error) {
	r.renders.Add(1)
	return r.fakeTokenizer.ApplyChatTemplate(req)
}

func (r *renderCountingTokenizer) EncodeChat(req tokenizer.ChatRequest) (string, []uint32, error) {
	r.renders.Add(1)
	return r.fakeTokenizer.EncodeChat(req)
}

// repeatJSON joins n copies of item into a JSON list.
func repeatJSON(item string, n int) string {
	var b strings.Builder
	b.Grow(n * (len(item) + 1))
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	b.WriteByte(']')
	return b.String()
}

// chatBoundCase is a request the gateway must refuse, in its client's
// dialect, without rendering its chat.
type chatBoundCase struct {
	name, path, body string
	want             []string // in the error body, its dialect's shape among them
}

func checkRefusedUnrendered(t *testing.T, h *harness, tok *renderCountingTokenizer, cases []chatBoundCase) {
	t.Helper()
	for _, tc := range cases {
		before := tok.renders.Load()
		resp, body := h.post(t, tc.path, tc.body)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, body %.300s; want 400", tc.name, resp.StatusCode, body)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: body %.300s; want %q in it", tc.name, body, w)
			}
		}
		if n := tok.renders.Load() - before; n != 0 {
			t.Errorf("%s: the chat template was rendered %d times; the request is refused before", tc.name, n)
		}
	}
	// A chat within the bounds is rendered.
	before := tok.renders.Load()
	h.post(t, "/v1/chat/completions", `{"model":"qwen3-14b","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	if tok.renders.Load() == before {
		t.Error("a chat within the bounds was not rendered")
	}
}

const (
	openAIShape    = `"error":{"message":`
	anthropicShape = `"type":"error","error":{"type":"invalid_request_error"`
)

// Every part of a chat is bounded before its template is rendered, with
// or without a context length: the number of messages, the tools, the
// list-form content parts and an image's bytes.
func TestChatPartsBoundedBeforeRendering(t *testing.T) {
	t.Parallel()
	tok := &renderCountingTokenizer{}
	h := startGateway(t, nil, func(_ *Config, d *Deps) { d.Tokenizer = tok })

	million := repeatJSON(`{"role":"user","content":"a"}`, 1_000_000)
	tooMany := repeatJSON(`{"role":"user","content":"a"}`, maxChatMessages+1)
	tools := repeatJSON(`{"type":"function","function":{"name":"t","parameters":{}}}`, maxTools+1)
	anthropicTools := repeatJSON(`{"name":"t","input_schema":{"type":"object"}}`, maxTools+1)
	bigTools := `[{"type":"function","function":{"name":"t","description":"` + strings.Repeat("d", maxToolsBytes) + `"}}]`
	image := base64.StdEncoding.EncodeToString(make([]byte, 7*maxImageBytes/6)) // 9.3 MiB of base64
	parts := repeatJSON(`{"type":"image_url","image_url":{"url":"data:,"}}`, maxContentParts+1)

	checkRefusedUnrendered(t, h, tok, []chatBoundCase{
		{"a million messages", "/v1/chat/completions",
			`{"model":"qwen3-14b","messages":` + million + `}`,
			[]string{openAIShape, "1000000 messages", `"param":"messages"`}},
		{"too many messages (Anthropic)", "/v1/messages",
			`{"model":"claude-x","max_tokens":10,"messages":` + tooMany + `}`,
			[]string{anthropicShape, fmt.Sprintf("%d messages", maxChatMessages+1)}},
		{"too many messages (count_tokens)", "/v1/messages/count_tokens",
			`{"model":"claude-x","messages":` + tooMany + `}`,
			[]string{anthropicShape, fmt.Sprintf("%d messages", maxChatMessages+1)}},
		{"many tools", "/v1/chat/completions",
			`{"model":"qwen3-14b","tools":` + tools + `,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{openAIShape, fmt.Sprintf("%d tools", maxTools+1), `"param":"tools"`}},
		{"many tools (Anthropic)", "/v1/messages",
			`{"model":"claude-x","max_tokens":10,"tools":` + anthropicTools + `,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{anthropicShape, fmt.Sprintf("%d tools", maxTools+1)}},
		{"large tools", "/v1/chat/completions",
			`{"model":"qwen3-14b","tools":` + bigTools + `,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{openAIShape, "the tools take"}},
		{"many content parts", "/v1/chat/completions",
			`{"model":"qwen3-14b","messages":[{"role":"user","content":` + parts + `}]}`,
			[]string{openAIShape, "content parts"}},
		{"a huge image (OpenAI)", "/v1/chat/completions",
			`{"model":"qwen3-14b","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + image + `"}}]}]}`,
			[]string{openAIShape, "an image of"}},
		{"a huge image (Anthropic)", "/v1/messages",
			`{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + image + `"}},{"type":"text","text":"what is this?"}]}]}`,
			[]string{anthropicShape, "an image of"}},
		{"a huge image (Responses)", "/v1/responses",
			`{"model":"gpt-x","input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,` + image + `"}]}]}`,
			[]string{openAIShape, "an image of"}},
	})
}

// The fits-the-context check counts every message, the tools and list-form
// text, so that a chat whose parts are each small but together cannot fit
// is refused before it is rendered, in the words each client acts on.
func TestChatFitsCountsToolsAndEveryMessage(t *testing.T) {
	t.Parallel()
	tok := &renderCountingTokenizer{}
	h := startGateway(t, nil, withConfig(func(c *Config) { c.ContextTokens = 4096 }),
		func(_ *Config, d *Deps) { d.Tokenizer = tok })

	messages := repeatJSON(`{"role":"user","content":"a"}`, 5000)
	tools := repeatJSON(`{"type":"function","function":{"name":"t","description":"`+strings.Repeat("d", 100)+`"}}`, 100)
	parts := repeatJSON(`{"type":"text","text":"`+strings.Repeat("p", 100)+`"}`, 100)
	checkRefusedUnrendered(t, h, tok, []chatBoundCase{
		{"many small messages", "/v1/chat/completions",
			`{"model":"qwen3-14b","messages":` + messages + `}`,
			[]string{"maximum context length is 4096 tokens"}},
		{"many small messages (Anthropic)", "/v1/messages",
			`{"model":"claude-x","max_tokens":10,"messages":` + messages + `}`,
			[]string{"prompt is too long", `"invalid_request_error"`}},
		{"tools past the context", "/v1/chat/completions",
			`{"model":"qwen3-14b","tools":` + tools + `,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{"maximum context length is 4096 tokens"}},
		{"list-form text past the context", "/v1/messages/count_tokens",
			`{"model":"claude-x","messages":[{"role":"user","content":` + parts + `}]}`,
			[]string{"prompt is too long"}},
		{"list-form text past the context (Responses)", "/v1/responses",
			`{"model":"gpt-x","input":[{"role":"user","content":` + strings.ReplaceAll(parts, `"type":"text"`, `"type":"input_text"`) + `}]}`,
			[]string{"context_length_exceeded"}},
	})
}

// The bounds read content parts and tools from the client; what they count
// against the context must never exceed what a template renders: with the
// fake template (one token per byte, every text whole), a chat's counted
// tokens are at most its rendered length.
func FuzzBoundChat(f *testing.F) {
	f.Add([]byte(`{"model":"m","tools":[{"type":"function","function":{"name":"t","description":"d\u00e9"}}],"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]},{"role":"tool","tool_call_id":"c","content":"r"}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"assistant","content":"x"},{"role":"user","content":"\ud800"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, _, err := decodeChatCompletion(body, fuzzModels)
		if err != nil {
			return
		}
		shape, err := boundChat(req.Messages, req.Tools, true)
		if err != nil {
			return
		}
		rendered, err := (fakeTokenizer{}).ApplyChatTemplate(mustChatRequest(t, req.Messages, req.Tools))
		if err != nil {
			return
		}
		n := shape.rendered
		for _, text := range shape.texts {
			n += max(len(text)-1, 0)
		}
		if n > len(rendered) {
			t.Fatalf("%d tokens counted before rendering, %d rendered", n, len(rendered))
		}
	})
}
