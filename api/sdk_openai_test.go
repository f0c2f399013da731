package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

func openAIClient(h *harness, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(h.url+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

var openAIListTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:        "bash",
	Description: openai.String("Run a shell command."),
	Parameters:  shared.FunctionParameters{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}},
})

func TestOpenAIChatSDKToolRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
	}{{"non-streaming", false}, {"streaming", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, nil, withKeys("sk-test"))
			h.engine.cachedTokens = 32
			client := openAIClient(h, "sk-test")
			ctx := context.Background()
			params := openai.ChatCompletionNewParams{
				Model:         "gpt-5.5",
				Messages:      []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are a coding agent."), openai.UserMessage("List the files here")},
				Tools:         []openai.ChatCompletionToolUnionParam{openAIListTool},
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			}
			call := func(p openai.ChatCompletionNewParams) openai.ChatCompletion {
				t.Helper()
				if !tc.stream {
					p.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
					c, err := client.Chat.Completions.New(ctx, p)
					if err != nil {
						t.Fatal(err)
					}
					return *c
				}
				stream := client.Chat.Completions.NewStreaming(ctx, p)
				var acc openai.ChatCompletionAccumulator
				for stream.Next() {
					acc.AddChunk(stream.Current())
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				return acc.ChatCompletion
			}
			c1 := call(params)
			if len(c1.Choices) != 1 || c1.Choices[0].FinishReason != "tool_calls" {
				t.Fatalf("turn 1: %+v", c1.Choices)
			}
			tcs := c1.Choices[0].Message.ToolCalls
			if len(tcs) != 1 || tcs[0].Function.Name != "bash" || tcs[0].Function.Arguments != `{"command":"ls"}` || tcs[0].ID == "" {
				t.Fatalf("tool calls %+v", tcs)
			}
			if c1.Usage.PromptTokensDetails.CachedTokens != 32 || c1.Usage.PromptTokens == 0 {
				t.Errorf("usage %+v", c1.Usage)
			}
			params.Messages = append(params.Messages, c1.Choices[0].Message.ToParam(), openai.ToolMessage("a.txt\nb.txt\nc.txt", tcs[0].ID))
			c2 := call(params)
			if c2.Choices[0].Message.Content != "There are 3 files here: a.txt, b.txt and c.txt." || c2.Choices[0].FinishReason != "stop" {
				t.Fatalf("turn 2: %+v", c2.Choices[0])
			}
			if c1.Model != "gpt-5.5" || c2.Model != "gpt-5.5" {
				t.Errorf("models %q, %q; want the client's name back", c1.Model, c2.Model)
			}
			reqs := h.engine.requests()
			if got := string(reqs[0]["model"]); got != `"qwen3-14b"` {
				t.Errorf("engine got model %s, want the alias resolved", got)
			}
		})
	}
}

func TestOpenAIChatSDKErrors(t *testing.T) {
	h := startGateway(t, nil, withKeys("sk-good"))
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		key      string
		params   openai.ChatCompletionNewParams
		status   int
		contains string
	}{
		{"wrong key", "sk-bad", openai.ChatCompletionNewParams{Model: "gpt-5.5", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}},
			http.StatusUnauthorized, "API key"},
		{"unknown model", "sk-good", openai.ChatCompletionNewParams{Model: "llama-2-7b", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}},
			http.StatusNotFound, "llama-2-7b"},
		{"unknown model names the served ones", "sk-good", openai.ChatCompletionNewParams{Model: "llama-2-7b", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}},
			http.StatusNotFound, "served models: " + servedModel},
		{"no messages", "sk-good", openai.ChatCompletionNewParams{Model: "gpt-5.5", Messages: []openai.ChatCompletionMessageParamUnion{}},
			http.StatusBadRequest, "messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := openAIClient(h, tc.key)
			_, err := client.Chat.Completions.New(ctx, tc.params)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err %v, want *openai.Error", err)
			}
			if apiErr.StatusCode != tc.status || !containsFold(apiErr.Message, tc.contains) {
				t.Fatalf("status %d message %q, want %d mentioning %q", apiErr.StatusCode, apiErr.Message, tc.status, tc.contains)
			}
		})
	}
}

func TestOpenAIModelsSDK(t *testing.T) {
	h := startGateway(t, nil)
	client := openAIClient(h, "")
	page, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != servedModel {
		t.Fatalf("models %+v", page.Data)
	}
}

// responsesOutput summarises a response's output items.
type responsesOutput struct {
	reasoning, text string
	calls           []responses.ResponseFunctionToolCall
}

func summariseResponse(r *responses.Response) responsesOutput {
	var out responsesOutput
	for _, it := range r.Output {
		switch it.Type {
		case "reasoning":
			for _, c := range it.AsReasoning().Content {
				out.reasoning += c.Text
			}
		case "message":
			out.text += it.AsMessage().Content[0].Text
		case "function_call":
			out.calls = append(out.calls, it.AsFunctionCall())
		}
	}
	return out
}

func TestResponsesSDKToolRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name         string
		stream       bool
		previousByID bool // turn 2 sends only the tool output and previous_response_id
	}{
		{"non-streaming", false, false},
		{"streaming", true, false},
		{"streaming with previous_response_id", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, nil, withKeys("sk-test"))
			h.engine.cachedTokens = 16
			client := openAIClient(h, "sk-test")
			ctx := context.Background()
			input := responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("You are a coding agent.", responses.EasyInputMessageRoleDeveloper),
				responses.ResponseInputItemParamOfMessage("List the files here", responses.EasyInputMessageRoleUser),
			}
			params := responses.ResponseNewParams{
				Model:          "gpt-5.5",
				Input:          responses.ResponseNewParamsInputUnion{OfInputItemList: input},
				Store:          openai.Bool(tc.previousByID),
				PromptCacheKey: openai.String("sess-1"),
				Tools: []responses.ToolUnionParam{
					{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}},
					{OfFunction: &responses.FunctionToolParam{Name: "exec_command", Strict: param.NewOpt(false),
						Parameters: map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}}},
				},
			}
			call := func(p responses.ResponseNewParams) *responses.Response {
				t.Helper()
				if !tc.stream {
					r, err := client.Responses.New(ctx, p)
					if err != nil {
						t.Fatal(err)
					}
					return r
				}
				stream := client.Responses.NewStreaming(ctx, p)
				var types []string
				var done *responses.Response
				var deltas strings.Builder
				for stream.Next() {
					ev := stream.Current()
					types = append(types, ev.Type)
					switch ev.Type {
					case "response.output_text.delta":
						deltas.WriteString(ev.Delta)
					case "response.completed":
						r := ev.AsResponseCompleted().Response
						done = &r
					}
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				if done == nil || types[0] != "response.created" || types[1] != "response.in_progress" {
					t.Fatalf("event sequence %v", types)
				}
				if got := summariseResponse(done).text; got != deltas.String() {
					t.Errorf("completed text %q, deltas %q", got, deltas.String())
				}
				return done
			}
			r1 := call(params)
			out := summariseResponse(r1)
			if len(out.calls) != 1 || out.calls[0].Name != "exec_command" || out.calls[0].Arguments != `{"command":"ls"}` || out.calls[0].CallID == "" {
				t.Fatalf("turn 1 output %+v", out)
			}
			if out.text != "Let me look." || out.reasoning != "The user wants a listing." {
				t.Errorf("turn 1 text %q reasoning %q", out.text, out.reasoning)
			}
			if r1.Model != params.Model {
				t.Errorf("model %q, want the client's name back, %q", r1.Model, params.Model)
			}
			if r1.Usage.InputTokensDetails.CachedTokens != 16 || r1.Usage.OutputTokens == 0 {
				t.Errorf("usage %+v", r1.Usage)
			}
			callID := out.calls[0].CallID
			result := responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: openai.String(callID), Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("a.txt\nb.txt\nc.txt")}}}
			if tc.previousByID {
				params.PreviousResponseID = openai.String(r1.ID)
				params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{result}}
			} else {
				input = append(input, responses.ResponseInputItemParamOfFunctionCall(out.calls[0].Arguments, callID, out.calls[0].Name), result)
				params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
			}
			r2 := call(params)
			if got := summariseResponse(r2).text; got != "There are 3 files here: a.txt, b.txt and c.txt." {
				t.Fatalf("turn 2 text %q", got)
			}
			reqs := h.engine.requests()
			var msgs []chatMessage
			_ = json.Unmarshal(h.engine.lastChat(t)["messages"], &msgs)
			roles := make([]string, len(msgs))
			for i, m := range msgs {
				roles[i] = m.Role
			}
			if strings.Join(roles, ",") != "system,user,assistant,tool" || msgs[2].ToolCalls[0].ID != callID || msgs[3].ToolCallID != callID {
				t.Fatalf("engine saw roles %v: %+v", roles, msgs)
			}
			if tc.previousByID && msgs[2].ReasoningContent != "The user wants a listing." {
				t.Errorf("stored conversation lost the reasoning: %+v", msgs[2])
			}
			var tools []chatTool
			_ = json.Unmarshal(reqs[0]["tools"], &tools)
			if len(tools) != 1 || tools[0].Function.Name != "exec_command" {
				t.Errorf("engine tools %s: web_search must be dropped", reqs[0]["tools"])
			}
			if got := h.router.lastRoute(t).SessionID; got != "sess-1" {
				t.Errorf("session id %q, want prompt_cache_key", got)
			}
		})
	}
}

func TestResponsesSDKErrors(t *testing.T) {
	h := startGateway(t, nil, withKeys("sk-good"))
	ctx := context.Background()
	ok := responses.ResponseNewParams{Model: "gpt-5.5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
	for _, tc := range []struct {
		name     string
		key      string
		mutate   func(*responses.ResponseNewParams)
		status   int
		contains string
	}{
		{"wrong key", "sk-bad", nil, http.StatusUnauthorized, "API key"},
		{"unknown model", "sk-good", func(p *responses.ResponseNewParams) { p.Model = "llama-2-7b" }, http.StatusNotFound, "llama-2-7b"},
		{"unknown previous response", "sk-good", func(p *responses.ResponseNewParams) { p.PreviousResponseID = openai.String("resp_nope") }, http.StatusNotFound, "previous_response_id"},
		{"bad max_output_tokens", "sk-good", func(p *responses.ResponseNewParams) { p.MaxOutputTokens = openai.Int(0) }, http.StatusBadRequest, "max_output_tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ok
			if tc.mutate != nil {
				tc.mutate(&p)
			}
			client := openAIClient(h, tc.key)
			_, err := client.Responses.New(ctx, p)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err %v, want *openai.Error", err)
			}
			if apiErr.StatusCode != tc.status || !containsFold(apiErr.Message, tc.contains) {
				t.Fatalf("status %d message %q, want %d mentioning %q", apiErr.StatusCode, apiErr.Message, tc.status, tc.contains)
			}
		})
	}
}
