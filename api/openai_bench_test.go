package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// chatSizedRequest is an OpenAI chat request the size of an agent's turn:
// about 60 KB of tool schemas, a long system prompt and turns of tool
// calls.
func chatSizedRequest(turns int) []byte {
	var tools []map[string]any
	for i := range sizedTools {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
			"name": fmt.Sprintf("tool_%d", i), "description": strings.Repeat("Does one thing well. ", 20),
			"parameters": sizedToolSchema(i)}})
	}
	msgs := []map[string]any{
		{"role": "system", "content": strings.Repeat("You are a coding agent. Follow the repository's conventions. ", 60)},
		{"role": "user", "content": "Fix the failing test in the router."},
	}
	for t := range turns {
		id := fmt.Sprintf("call_%d", t)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": "", "tool_calls": []map[string]any{{"id": id, "type": "function",
				"function": map[string]any{"name": "tool_1", "arguments": `{"param_0":"ls"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": strings.Repeat("output line\n", 30)})
	}
	body, _ := json.Marshal(map[string]any{"model": "gpt-x", "max_tokens": 32000, "stream": true, "seed": 7,
		"tools": tools, "messages": msgs})
	return body
}

// BenchmarkDecodeChatCompletion decodes and normalises an agent-sized chat
// request:
//
//	go test -run '^$' -bench DecodeChatCompletion -benchtime 2000x ./api/
func BenchmarkDecodeChatCompletion(b *testing.B) {
	body := chatSizedRequest(20)
	models := modelResolverFor(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		req, _, err := decodeChatCompletion(body, models)
		if err != nil {
			b.Fatal(err)
		}
		if len(req.Extra) != 1 {
			b.Fatalf("extra fields %v, want seed", req.Extra)
		}
	}
}
