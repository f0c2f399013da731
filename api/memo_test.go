package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/tokenizer"
)

func TestMemoRemembersResultsNotErrors(t *testing.T) {
	m := newMemo[string](2)
	calls := 0
	conv := func(s string, err error) func() (string, error) {
		return func() (string, error) { calls++; return s, err }
	}
	for range 3 {
		if v, err := m.get([]byte("a"), conv("A", nil)); v != "A" || err != nil {
			t.Fatalf("get a = %q, %v", v, err)
		}
	}
	if calls != 1 {
		t.Errorf("converted a %d times, want once", calls)
	}
	boom := errors.New("boom")
	for range 2 {
		if _, err := m.get([]byte("bad"), conv("", boom)); err != boom {
			t.Fatalf("err = %v", err)
		}
	}
	if calls != 3 {
		t.Errorf("%d conversions after two failing ones, want 3: errors are not remembered", calls)
	}
	m.get([]byte("b"), conv("B", nil))
	m.get([]byte("c"), conv("C", nil)) // evicts a, the oldest
	calls = 0
	m.get([]byte("a"), conv("A", nil))
	if calls != 1 || len(m.m) != 2 {
		t.Errorf("after eviction: %d conversions, %d kept", calls, len(m.m))
	}
}

// TestRememberedToolsStayUnchanged sends the same tools with a server tool
// twice: the second request must get what the first got.
func TestRememberedToolsStayUnchanged(t *testing.T) {
	body := `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[` +
		`{"name":"bash","description":"Run a command","input_schema":{"type":"object","properties":{"command":{"type":"string"}}}},` +
		`{"type":"web_search_20250305","name":"web_search"}]}`
	var first *engineRequest
	for i := range 2 {
		req, _, err := decodeMessages([]byte(body), modelResolverFor(t), true)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = req
			req.DroppedTools = append(req.DroppedTools, "changed by a caller")
			continue
		}
		if string(req.Tools) != string(first.Tools) || len(req.DroppedTools) != 1 || req.DroppedTools[0] != "web_search_20250305" {
			t.Errorf("request %d: tools %s, dropped %q", i, req.Tools, req.DroppedTools)
		}
	}
}

func modelResolverFor(t testing.TB) modelResolver {
	cfg := Config{Models: []string{"qwen3-8b"}, Aliases: map[string]string{"*": "qwen3-8b"}}
	cfg.setDefaults()
	return newModelResolver(cfg)
}

// sizedTools is how many tools an agent-sized request offers; each schema
// (sizedToolSchema) is about 2.5 KB.
const sizedTools = 24

// sizedToolSchema is the parameter schema of tool i of an agent-sized
// request: twelve described string parameters.
func sizedToolSchema(i int) map[string]any {
	props := map[string]any{}
	for j := range 12 {
		props[fmt.Sprintf("param_%d", j)] = map[string]any{"type": "string", "description": strings.Repeat(fmt.Sprintf("What parameter %d of tool %d means. ", j, i), 4)}
	}
	return map[string]any{"type": "object", "properties": props, "required": []string{"param_0"}}
}

// claudeSizedRequest is an Anthropic request the size of a Claude Code
// turn: about 60 KB of tool schemas, a long system prompt and a
// conversation of tool calls.
func claudeSizedRequest(turns int) []byte {
	var tools []map[string]any
	for i := range sizedTools {
		tools = append(tools, map[string]any{"name": fmt.Sprintf("tool_%d", i), "description": strings.Repeat("Does one thing well. ", 20),
			"input_schema": sizedToolSchema(i)})
	}
	msgs := []map[string]any{{"role": "user", "content": "Fix the failing test in the router."}}
	for t := range turns {
		id := fmt.Sprintf("toolu_%d", t)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": id, "name": "tool_1", "input": map[string]string{"param_0": "ls"}}}},
			map[string]any{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": id, "content": strings.Repeat("output line\n", 30)}}})
	}
	body, _ := json.Marshal(map[string]any{"model": "claude-opus-4-8", "max_tokens": 32000, "stream": true,
		"system": strings.Repeat("You are a coding agent. Follow the repository's conventions. ", 60), "tools": tools, "messages": msgs})
	return body
}

// BenchmarkRequestHandling is what the gateway does with a Claude Code
// sized request before sending it to an engine: decode and normalise it,
// render and tokenize the prompt (the turn before in the conversation's
// tokenizer session), and build the engine's body.
//
//	go test -run '^$' -bench RequestHandling -benchtime 200x ./api/
func BenchmarkRequestHandling(b *testing.B) {
	tok, err := tokenizer.Qwen3()
	if err != nil {
		b.Fatal(err)
	}
	models := modelResolverFor(b)
	prev, body := claudeSizedRequest(19), claudeSizedRequest(20)
	p := newPrompts(tok, 4, 0)
	handle := func(body []byte) {
		req, _, err := decodeMessages(body, models, true)
		if err != nil {
			b.Fatal(err)
		}
		creq, err := req.chatRequest()
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := p.encode(b.Context(), "s", creq); err != nil {
			b.Fatal(err)
		}
		if _, err := req.body(req.Messages, 64, true); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		handle(prev)
		b.StartTimer()
		handle(body)
	}
	b.ReportMetric(float64(len(body)), "request-bytes")
}
