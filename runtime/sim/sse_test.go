package sim

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	gojson "github.com/goccy/go-json"
)

// chunkOf is a streamed chat chunk whose delta carries content.
func chunkOf(content string, finish *string, u *usage) chatResponse {
	c := chatResponse{ID: "chatcmpl-1", Object: "chat.completion.chunk", Created: 1764400000, Model: "qwen3-8b"}
	if u != nil {
		c.Choices, c.Usage = []chatChoice{}, u
		return c
	}
	c.Choices = []chatChoice{{Delta: &chatDelta{Content: &content}, FinishReason: finish}}
	return c
}

// FuzzEventsMarshalAsEncodingJSON: the events the engine streams say what
// encoding/json would write (goccy escapes a few control characters
// differently, \u0008 for \b).
func FuzzEventsMarshalAsEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "Hello", "<tool_call>\n{\"name\": \"ls\"}\n</tool_call>", "a & b > c", "é\u2028😀", "\x00\x1f\"\\", "\xff"} {
		f.Add(s)
	}
	stop, index := "stop", 0
	f.Fuzz(func(t *testing.T, s string) {
		for _, v := range []any{
			chunkOf(s, nil, nil),
			chunkOf(s, &stop, nil),
			chunkOf(s, nil, &usage{PromptTokens: 3, TotalTokens: 4, CompletionTokens: 1}),
			chatResponse{ID: s, Choices: []chatChoice{{Delta: &chatDelta{Role: "assistant", ReasoningContent: &s,
				ToolCalls: []toolCallJSON{{Index: &index, ID: s, Type: "function", Function: functionCall{Name: s, Arguments: s}}}}}}},
		} {
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := gojson.Marshal(v)
			if err != nil || !reflect.DeepEqual(decoded(t, got), decoded(t, want)) {
				t.Fatalf("goccy wrote\n%s (%v)\nencoding/json\n%s", got, err, want)
			}
		}
	})
}

// decoded is JSON as values, numbers as written.
func decoded(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}
