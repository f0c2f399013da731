package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

func anthropicClient(h *harness, key string) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(h.url), option.WithAPIKey(key), option.WithMaxRetries(0))
}

var anthropicListTool = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
	Name:        "Bash",
	Description: anthropic.String("Run a shell command."),
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"command": map[string]any{"type": "string"}}, Required: []string{"command"}},
}}

// anthropicRoundTrip runs turn 1 (a tool call comes out) and turn 2 (the
// tool result goes back) through the SDK, streaming or not.
func TestAnthropicSDKToolRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
	}{{"non-streaming", false}, {"streaming", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, nil, withKeys("sk-test"))
			h.engine.cachedTokens = 48
			client := anthropicClient(h, "sk-test")
			ctx := context.Background()
			params := anthropic.MessageNewParams{
				Model:     "claude-opus-4-8",
				MaxTokens: 1024,
				System:    []anthropic.TextBlockParam{{Text: "You are a careful coding agent."}},
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("List the files here"))},
				Tools:     []anthropic.ToolUnionParam{anthropicListTool},
				Thinking:  anthropic.ThinkingConfigParamUnion{OfEnabled: &anthropic.ThinkingConfigEnabledParam{BudgetTokens: 2048}},
			}
			call := func(p anthropic.MessageNewParams) *anthropic.Message {
				t.Helper()
				if !tc.stream {
					m, err := client.Messages.New(ctx, p)
					if err != nil {
						t.Fatal(err)
					}
					return m
				}
				stream := client.Messages.NewStreaming(ctx, p)
				var m anthropic.Message
				var sawStop bool
				for stream.Next() {
					ev := stream.Current()
					if ev.Type == "message_stop" {
						sawStop = true
					}
					if err := m.Accumulate(ev); err != nil {
						t.Fatal(err)
					}
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				if !sawStop {
					t.Error("stream lacks message_stop")
				}
				return &m
			}

			m1 := call(params)
			if m1.StopReason != anthropic.StopReasonToolUse {
				t.Fatalf("turn 1 stop_reason %q, want tool_use", m1.StopReason)
			}
			var thinking, text string
			var use anthropic.ToolUseBlock
			for _, b := range m1.Content {
				switch v := b.AsAny().(type) {
				case anthropic.ThinkingBlock:
					thinking = v.Thinking
				case anthropic.TextBlock:
					text = v.Text
				case anthropic.ToolUseBlock:
					use = v
				}
			}
			if thinking != "The user wants a listing." || text != "Let me look." {
				t.Errorf("turn 1 thinking %q text %q", thinking, text)
			}
			var input struct{ Command string }
			if err := json.Unmarshal(use.Input, &input); err != nil || use.Name != "Bash" || input.Command != "ls" || use.ID == "" {
				t.Fatalf("tool_use %+v (input %s, %v)", use, use.Input, err)
			}
			if m1.Usage.CacheReadInputTokens != 48 || m1.Usage.OutputTokens == 0 {
				t.Errorf("usage %+v: want cache_read_input_tokens 48 and output tokens", m1.Usage)
			}
			if m1.Model != "claude-opus-4-8" {
				t.Errorf("model %q, want the client's name back", m1.Model)
			}

			params.Messages = append(params.Messages, m1.ToParam(),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "a.txt\nb.txt\nc.txt", false)))
			m2 := call(params)
			if m2.StopReason != anthropic.StopReasonEndTurn || len(m2.Content) != 1 || m2.Content[0].Text != "There are 3 files here: a.txt, b.txt and c.txt." {
				t.Fatalf("turn 2: stop %q content %+v", m2.StopReason, m2.Content)
			}

			// What the engine saw in turn 2: the tool call and its result in
			// OpenAI shape, thinking switched on.
			reqs := h.engine.requests()
			var msgs []chatMessage
			if err := json.Unmarshal(h.engine.lastChat(t)["messages"], &msgs); err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 4 || msgs[0].Role != "system" || msgs[2].Role != "assistant" || msgs[3].Role != "tool" {
				t.Fatalf("engine messages %+v", msgs)
			}
			if msgs[2].ToolCalls[0].ID != use.ID || msgs[3].ToolCallID != use.ID || msgs[2].ReasoningContent != thinking {
				t.Errorf("tool call ids or reasoning lost: %+v", msgs)
			}
			if got := string(reqs[0]["chat_template_kwargs"]); got != `{"enable_thinking":true}` {
				t.Errorf("chat_template_kwargs %s", got)
			}
		})
	}
}

func TestAnthropicSDKCountTokens(t *testing.T) {
	h := startGateway(t, nil)
	client := anthropicClient(h, "")
	params := anthropic.MessageCountTokensParams{
		Model:    "claude-opus-4-8",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("How many tokens is this?"))},
	}
	got, err := client.Messages.CountTokens(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	_, ids, _ := fakeTokenizer{}.EncodeChat(mustChatRequest(t, []chatMessage{textMessage("user", "How many tokens is this?")}, nil))
	if got.InputTokens != int64(len(ids)) {
		t.Fatalf("input_tokens %d, want %d", got.InputTokens, len(ids))
	}
}

func TestAnthropicSDKErrors(t *testing.T) {
	h := startGateway(t, nil, withKeys("sk-good"))
	ctx := context.Background()
	good := anthropic.MessageNewParams{Model: "claude-opus-4-8", MaxTokens: 16,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	for _, tc := range []struct {
		name     string
		key      string
		mutate   func(p *anthropic.MessageNewParams)
		status   int
		errType  string
		contains string
	}{
		{"wrong key", "sk-bad", nil, http.StatusUnauthorized, "authentication_error", "API key"},
		{"unknown model", "sk-good", func(p *anthropic.MessageNewParams) { p.Model = "llama-2-7b" }, http.StatusNotFound, "not_found_error", "llama-2-7b"},
		{"unknown model names the served ones", "sk-good", func(p *anthropic.MessageNewParams) { p.Model = "llama-2-7b" }, http.StatusNotFound, "not_found_error", "served models: " + servedModel},
		{"tool_use from the user", "sk-good", func(p *anthropic.MessageNewParams) {
			p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewToolUseBlock("toolu_1", map[string]any{}, "Bash"))}
		}, http.StatusBadRequest, "invalid_request_error", "messages[0].content[0].type"},
		{"max_tokens zero", "sk-good", func(p *anthropic.MessageNewParams) { p.MaxTokens = -1 }, http.StatusBadRequest, "invalid_request_error", "max_tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := good
			p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
			if tc.mutate != nil {
				tc.mutate(&p)
			}
			client := anthropicClient(h, tc.key)
			_, err := client.Messages.New(ctx, p)
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err %v, want *anthropic.Error", err)
			}
			if apiErr.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (%s)", apiErr.StatusCode, tc.status, apiErr.RawJSON())
			}
			var body anthropicError
			if err := json.Unmarshal([]byte(apiErr.RawJSON()), &body); err != nil || body.Type != "error" || body.Error.Type != tc.errType {
				t.Fatalf("error body %s (%v), want type %s", apiErr.RawJSON(), err, tc.errType)
			}
			if !containsFold(body.Error.Message, tc.contains) {
				t.Errorf("message %q does not mention %q", body.Error.Message, tc.contains)
			}
		})
	}
}
