package api

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/valyala/fastjson"
)

func TestDecodeChunk(t *testing.T) {
	finish := func(s string) *string { return &s }
	for _, tc := range []struct {
		name, in string
		want     chatChunk
	}{
		{"role", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"qwen3-14b","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
			chatChunk{ID: "chatcmpl-1", Object: "chat.completion.chunk", Created: 7, Model: "qwen3-14b", Choices: []chunkChoice{{Delta: chunkDelta{Role: "assistant"}}}}},
		{"content with escapes", `{"choices":[{"index":0,"delta":{"content":"a\"b\\n\u00e9\ud83d\ude00"}}]}`,
			chatChunk{Choices: []chunkChoice{{Delta: chunkDelta{Content: "a\"b\\n\u00e9😀"}}}}},
		{"reasoning under both names", `{"choices":[{"index":1,"delta":{"reasoning_content":"r1","reasoning":"r2"}}]}`,
			chatChunk{Choices: []chunkChoice{{Index: 1, Delta: chunkDelta{ReasoningContent: "r1", Reasoning: "r2"}}}}},
		{"tool call", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"c"}}]}}]}`,
			chatChunk{Choices: []chunkChoice{{Delta: chunkDelta{ToolCalls: []toolCallDelta{{ID: "call_1", Type: "function", Function: struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			}{"bash", `{"c`}}}}}}}},
		{"finish", `{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			chatChunk{Choices: []chunkChoice{{FinishReason: finish("tool_calls")}}}},
		{"completions text", `{"object":"text_completion","choices":[{"index":0,"text":"hi","finish_reason":"length"}]}`,
			chatChunk{Object: "text_completion", Choices: []chunkChoice{{Text: "hi", FinishReason: finish("length")}}}},
		{"usage", `{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":5,"total_tokens":105,"prompt_tokens_details":{"cached_tokens":64}}}`,
			chatChunk{Choices: []chunkChoice{}, Usage: &chunkUsage{PromptTokens: 100, CompletionTokens: 5, TotalTokens: 105, PromptTokensDetails: &struct {
				CachedTokens int `json:"cached_tokens"`
			}{64}}}},
		{"error object", `{"error":{"message":"boom","code":500}}`,
			chatChunk{Error: &struct {
				Message string `json:"message"`
			}{"boom"}}},
		{"older error", `{"object":"error","message":"bad"}`, chatChunk{Object: "error", Message: "bad"}},
		{"wrong types count as absent", `{"id":5,"choices":[{"index":"x","delta":{"content":7}},3],"usage":"no"}`,
			chatChunk{Choices: []chunkChoice{{}}}},
		{"last of a repeated key", `{"model":"a","model":"b"}`, chatChunk{Model: "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got chatChunk
			if err := decodeChunk(new(fastjson.Parser), []byte(tc.in), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(normalChunk(got), normalChunk(tc.want)) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{"choices":[}`, `{} {}`} {
		if err := decodeChunk(new(fastjson.Parser), []byte(bad), &chatChunk{}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestDecodeChunkReusesNothingStale decodes a rich chunk and then a sparse
// one into the same value: nothing of the first may show in the second.
func TestDecodeChunkReusesNothingStale(t *testing.T) {
	p, ch := new(fastjson.Parser), &chatChunk{}
	rich := `{"id":"a","choices":[{"index":0,"delta":{"content":"x","tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"},{"index":1,"delta":{"content":"y"}}],"usage":{"prompt_tokens":1}}`
	if err := decodeChunk(p, []byte(rich), ch); err != nil {
		t.Fatal(err)
	}
	if err := decodeChunk(p, []byte(`{"id":"a","choices":[{"index":0,"delta":{"content":"z"}}]}`), ch); err != nil {
		t.Fatal(err)
	}
	want := chatChunk{ID: "a", Choices: []chunkChoice{{Delta: chunkDelta{Content: "z"}}}}
	if !reflect.DeepEqual(normalChunk(*ch), normalChunk(want)) {
		t.Errorf("got %+v", *ch)
	}
}

// normalChunk makes empty and nil slices compare equal.
func normalChunk(c chatChunk) chatChunk {
	if len(c.Choices) == 0 {
		c.Choices = nil
	}
	for i := range c.Choices {
		if len(c.Choices[i].Delta.ToolCalls) == 0 {
			c.Choices[i].Delta.ToolCalls = nil
		}
	}
	return c
}

// FuzzDecodeChunk checks decodeChunk against encoding/json on chunks built
// from arbitrary values, as an engine would marshal them, and that it
// survives arbitrary bytes.
func FuzzDecodeChunk(f *testing.F) {
	f.Add("chatcmpl-1", "hello", "think", "call_1", "bash", `{"a":1}`, "stop", 3, 100, 7, []byte(`{"choices":[{"delta":{}}]}`))
	f.Add("", "\x00\"\\\u2028\xff", "", "", "", "", "", -1, 0, 0, []byte(`{"id":`))
	f.Fuzz(func(t *testing.T, id, content, reasoning, callID, name, args, finish string, index, prompt, cached int, raw []byte) {
		_ = decodeChunk(new(fastjson.Parser), raw, &chatChunk{}) // must not panic

		c := chatChunk{ID: id, Object: "chat.completion.chunk", Model: "m", Choices: []chunkChoice{{Index: index,
			Delta: chunkDelta{Content: content, ReasoningContent: reasoning}}}}
		if callID != "" || name != "" || args != "" {
			tc := toolCallDelta{Index: index, ID: callID, Type: "function"}
			tc.Function.Name, tc.Function.Arguments = name, args
			c.Choices[0].Delta.ToolCalls = []toolCallDelta{tc}
		}
		if finish != "" {
			c.Choices[0].FinishReason = &finish
		}
		if prompt != 0 {
			c.Usage = &chunkUsage{PromptTokens: prompt, PromptTokensDetails: &struct {
				CachedTokens int `json:"cached_tokens"`
			}{cached}}
		}
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var want, got chatChunk
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if err := decodeChunk(new(fastjson.Parser), data, &got); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if !reflect.DeepEqual(normalChunk(got), normalChunk(want)) {
			t.Fatalf("%s\ngot  %+v\nwant %+v", data, got, want)
		}
	})
}
