package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// chatBody builds a chat request with one user message of text.
func chatBody(text string, extra map[string]any) map[string]any {
	body := map[string]any{
		"model":    "qwen3-test",
		"messages": []map[string]any{{"role": "system", "content": "You are terse."}, {"role": "user", "content": text}},
	}
	for k, v := range extra {
		body[k] = v
	}
	return body
}

func decodeChat(t *testing.T, data []byte) chatResponse {
	t.Helper()
	var resp chatResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return resp
}

// collectChatStream parses a chat SSE body: the concatenated content and
// reasoning, the tool calls put together from their deltas, the finish
// reason and the usage chunk.
type streamedChat struct {
	content, reasoning string
	calls              []toolCallJSON
	finish             string
	usage              *usage
	chunks             int
}

func collectChatStream(t *testing.T, body []byte) streamedChat {
	t.Helper()
	events := readSSE(t, body)
	if len(events) < 3 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", events)
	}
	var out streamedChat
	for i, ev := range events[:len(events)-1] {
		var chunk chatResponse
		if err := json.Unmarshal([]byte(ev), &chunk); err != nil {
			t.Fatalf("chunk %d %q: %v", i, ev, err)
		}
		if chunk.Object != "chat.completion.chunk" || !strings.HasPrefix(chunk.ID, "chatcmpl-") {
			t.Fatalf("chunk %d has object %q id %q", i, chunk.Object, chunk.ID)
		}
		out.chunks++
		if chunk.Usage != nil {
			if len(chunk.Choices) != 0 {
				t.Errorf("usage chunk has %d choices, want 0", len(chunk.Choices))
			}
			out.usage = chunk.Usage
			continue
		}
		if len(chunk.Choices) != 1 {
			t.Fatalf("chunk %d has %d choices", i, len(chunk.Choices))
		}
		c := chunk.Choices[0]
		if i == 0 && (c.Delta.Role != "assistant") {
			t.Errorf("first delta role %q, want assistant", c.Delta.Role)
		}
		if c.Delta.Content != nil {
			out.content += *c.Delta.Content
		}
		if c.Delta.ReasoningContent != nil {
			out.reasoning += *c.Delta.ReasoningContent
		}
		for _, tc := range c.Delta.ToolCalls {
			if tc.Index == nil {
				t.Fatalf("tool call delta without index: %s", ev)
			}
			for len(out.calls) <= *tc.Index {
				out.calls = append(out.calls, toolCallJSON{})
			}
			call := &out.calls[*tc.Index]
			if tc.ID != "" {
				call.ID, call.Type = tc.ID, tc.Type
			}
			call.Function.Name += tc.Function.Name
			call.Function.Arguments += tc.Function.Arguments
		}
		if c.FinishReason != nil {
			if out.finish != "" {
				t.Errorf("second finish_reason %q after %q", *c.FinishReason, out.finish)
			}
			out.finish = *c.FinishReason
		}
	}
	return out
}

func TestChatCompletion(t *testing.T) {
	srv := startServer(t, newTestEngine(t, 1000), nil)
	prompt := strings.Repeat("Explain the prefix cache of the engine in one line. ", 8)

	resp, data := srv.post(t, "/v1/chat/completions", chatBody(prompt, nil))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	first := decodeChat(t, data)
	if first.Object != "chat.completion" || first.Model != "qwen3-test" || len(first.Choices) != 1 {
		t.Fatalf("response %s", data)
	}
	msg := first.Choices[0].Message
	if msg.Role != "assistant" || msg.Content == nil || len(*msg.Content) < 20 {
		t.Fatalf("message %+v", msg)
	}
	if *first.Choices[0].FinishReason != "stop" {
		t.Errorf("finish_reason %q, want stop", *first.Choices[0].FinishReason)
	}
	u := first.Usage
	if u.PromptTokens < len(prompt) || u.CompletionTokens != len(*msg.Content) || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage %+v for a %d-byte answer", u, len(*msg.Content))
	}

	t.Run("repeat is cached and identical", func(t *testing.T) {
		_, data := srv.post(t, "/v1/chat/completions", chatBody(prompt, nil))
		again := decodeChat(t, data)
		if *again.Choices[0].Message.Content != *msg.Content {
			t.Error("the same prompt got a different answer")
		}
		if again.Usage.PromptTokensDetails.CachedTokens <= 0 {
			t.Errorf("cached_tokens %d on a repeated prompt", again.Usage.PromptTokensDetails.CachedTokens)
		}
		if again.ID == first.ID {
			t.Error("two requests share an id")
		}
	})

	t.Run("streaming matches", func(t *testing.T) {
		body := chatBody(prompt, map[string]any{"stream": true, "stream_options": map[string]any{"include_usage": true}})
		resp, data := srv.post(t, "/v1/chat/completions", body)
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Errorf("content type %q", ct)
		}
		got := collectChatStream(t, data)
		if got.content != *msg.Content {
			t.Errorf("streamed content %q, want %q", got.content, *msg.Content)
		}
		if got.chunks < 10 {
			t.Errorf("only %d chunks: the answer was not streamed token by token", got.chunks)
		}
		if got.finish != "stop" {
			t.Errorf("finish %q", got.finish)
		}
		if got.usage == nil || got.usage.CompletionTokens != u.CompletionTokens || got.usage.PromptTokensDetails.CachedTokens <= 0 {
			t.Errorf("usage %+v", got.usage)
		}
	})

	t.Run("streaming without usage", func(t *testing.T) {
		_, data := srv.post(t, "/v1/chat/completions", chatBody(prompt, map[string]any{"stream": true}))
		if got := collectChatStream(t, data); got.usage != nil {
			t.Errorf("usage chunk sent without include_usage: %+v", got.usage)
		}
	})

	t.Run("max_tokens cuts with length", func(t *testing.T) {
		for _, field := range []string{"max_tokens", "max_completion_tokens"} {
			_, data := srv.post(t, "/v1/chat/completions", chatBody(prompt, map[string]any{field: 5}))
			r := decodeChat(t, data)
			if r.Usage.CompletionTokens != 5 || *r.Choices[0].FinishReason != "length" {
				t.Errorf("%s=5: %d tokens, finish %q", field, r.Usage.CompletionTokens, *r.Choices[0].FinishReason)
			}
		}
	})
}

func TestChatReasoning(t *testing.T) {
	srv := startServer(t, newTestEngine(t, 1000), nil)
	body := chatBody("Think first.", map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": true}})
	_, data := srv.post(t, "/v1/chat/completions", body)
	r := decodeChat(t, data)
	msg := r.Choices[0].Message
	if msg.ReasoningContent == nil || *msg.ReasoningContent == "" || strings.Contains(*msg.ReasoningContent, "think>") {
		t.Errorf("reasoning_content %v", msg.ReasoningContent)
	}
	if msg.Content == nil || *msg.Content == "" || strings.Contains(*msg.Content, "think>") {
		t.Errorf("content %v", msg.Content)
	}
	body["stream"] = true
	_, data = srv.post(t, "/v1/chat/completions", body)
	got := collectChatStream(t, data)
	if got.reasoning != *msg.ReasoningContent || got.content != *msg.Content {
		t.Errorf("streamed reasoning %q content %q differ from %q %q", got.reasoning, got.content, *msg.ReasoningContent, *msg.Content)
	}
}

var testTools = []map[string]any{
	{"type": "function", "function": map[string]any{
		"name": "read_file", "description": "Read a file",
		"parameters": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"file_path": map[string]any{"type": "string"},
				"mode":      map[string]any{"type": "string", "enum": []any{"text", "binary"}, "default": "text"},
				"offset":    map[string]any{"type": "integer"},
			},
			"required": []any{"file_path", "mode"},
		},
	}},
	{"type": "function", "function": map[string]any{
		"name": "write_file", "description": "Write a file",
		"parameters": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"file_path": map[string]any{"type": "string"},
				"content":   map[string]any{"type": "string"},
			},
			"required": []any{"file_path", "content"},
		},
	}},
}

// checkReadFileCall checks a call against testTools' schema: the path is one
// the conversation named (wantPath), the enum takes its default, optional
// properties stay out.
func checkReadFileCall(t *testing.T, call toolCallJSON, wantPath string) {
	t.Helper()
	if call.Function.Name != "read_file" || call.Type != "function" || !strings.HasPrefix(call.ID, "chatcmpl-tool-") {
		t.Fatalf("call %+v", call)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil {
		t.Fatalf("arguments %q: %v", call.Function.Arguments, err)
	}
	if args["file_path"] != wantPath {
		t.Errorf("file_path %v, want %s", args["file_path"], wantPath)
	}
	if args["mode"] != "text" {
		t.Errorf("mode %v, want the default", args["mode"])
	}
	if _, ok := args["offset"]; ok {
		t.Error("optional property offset was filled in")
	}
}

// toolTurns is a conversation of one task that has made n read_file calls
// of main.go, each answered.
func toolTurns(n int) []map[string]any {
	msgs := []map[string]any{{"role": "user", "content": "Explain what main.go does."}}
	for i := range n {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": "read_file", "arguments": `{"file_path":"main.go","mode":"text"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": "package main"})
	}
	return msgs
}

func TestChatToolCalls(t *testing.T) {
	srv := startServer(t, newTestEngine(t, 1000), nil)
	tests := []struct {
		name     string
		body     map[string]any
		wantCall bool
	}{
		{"user turn calls a tool", chatBody("Open main.go.", map[string]any{"tools": testTools}), true},
		{"after a tool result calls another", map[string]any{"messages": toolTurns(1), "tools": testTools}, true},
		{"after the task's calls answers", map[string]any{"messages": toolTurns(defaultMaxToolCalls), "tools": testTools}, false},
		{"nothing to read answers", chatBody("Say hello.", map[string]any{"tools": testTools}), false},
		{"tool_choice none", chatBody("Open main.go.", map[string]any{"tools": testTools, "tool_choice": "none"}), false},
		{"a turn asking for text only answers", chatBody("Summarize main.go. Respond with TEXT ONLY. Do NOT call any tools.",
			map[string]any{"tools": testTools}), false},
		{"text only, asked in content parts", map[string]any{"tools": testTools, "messages": []map[string]any{{"role": "user",
			"content": []map[string]any{{"type": "text", "text": "Compact main.go."}, {"type": "text", "text": "Do not use tools."}}}}}, false},
		{"tool_choice required after the task's calls", map[string]any{"messages": toolTurns(defaultMaxToolCalls), "tools": testTools, "tool_choice": "required"}, true},
		{"tool_choice names the function", chatBody("Open main.go.", map[string]any{"tools": testTools,
			"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "read_file"}}}), true},
		{"tool_choice naming a writing tool gets text", chatBody("Open main.go.", map[string]any{"tools": testTools,
			"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "write_file"}}}), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := srv.post(t, "/v1/chat/completions", tc.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, data)
			}
			r := decodeChat(t, data)
			msg, finish := r.Choices[0].Message, *r.Choices[0].FinishReason
			if !tc.wantCall {
				if len(msg.ToolCalls) != 0 || finish != "stop" || msg.Content == nil || strings.Contains(*msg.Content, "<tool_call>") {
					t.Fatalf("want prose, got %s", data)
				}
				if !strings.Contains(*msg.Content, "simulated model") {
					t.Errorf("answer %q does not say it is simulated", *msg.Content)
				}
				return
			}
			if finish != "tool_calls" || len(msg.ToolCalls) != 1 {
				t.Fatalf("want one tool call, got %s", data)
			}
			if msg.Content != nil {
				t.Errorf("content %q next to the tool call, want null", *msg.Content)
			}
			checkReadFileCall(t, msg.ToolCalls[0], "main.go")

			stream := map[string]any{"stream": true}
			for k, v := range tc.body {
				stream[k] = v
			}
			_, data = srv.post(t, "/v1/chat/completions", stream)
			got := collectChatStream(t, data)
			if got.finish != "tool_calls" || len(got.calls) != 1 || got.content != "" {
				t.Fatalf("stream: finish %q, %d calls, content %q", got.finish, len(got.calls), got.content)
			}
			checkReadFileCall(t, got.calls[0], "main.go")
			if got.calls[0].Function.Arguments != msg.ToolCalls[0].Function.Arguments {
				t.Errorf("streamed arguments %s differ from %s", got.calls[0].Function.Arguments, msg.ToolCalls[0].Function.Arguments)
			}
		})
	}

	t.Run("call cut by max_tokens stays text", func(t *testing.T) {
		_, data := srv.post(t, "/v1/chat/completions", chatBody("Open main.go.", map[string]any{"tools": testTools, "max_tokens": 20}))
		r := decodeChat(t, data)
		if *r.Choices[0].FinishReason != "length" || len(r.Choices[0].Message.ToolCalls) != 0 ||
			!strings.HasPrefix(*r.Choices[0].Message.Content, "<tool_call>") {
			t.Errorf("got %s", data)
		}
	})
}

func TestCompletions(t *testing.T) {
	srv := startServer(t, newTestEngine(t, 1000), nil)
	prompt := strings.Repeat("def fibonacci(n):\n", 10)
	ids := byteTokenizer{}.Encode(prompt)
	tests := []struct {
		name   string
		prompt any
	}{
		{"string", prompt},
		{"token ids", ids},
		{"one-element list", []string{prompt}},
		{"one-element batch of ids", [][]uint32{ids}},
	}
	var want string
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := srv.post(t, "/v1/completions", map[string]any{"prompt": tc.prompt})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, data)
			}
			var r completionResponse
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatal(err)
			}
			if r.Object != "text_completion" || len(r.Choices) != 1 || r.Usage.PromptTokens != len(ids) {
				t.Fatalf("response %s", data)
			}
			// Default max_tokens is 16, shorter than any composed answer.
			if r.Usage.CompletionTokens != 16 || *r.Choices[0].FinishReason != "length" {
				t.Errorf("%d tokens, finish %q; want 16, length", r.Usage.CompletionTokens, *r.Choices[0].FinishReason)
			}
			if want == "" {
				want = r.Choices[0].Text
			} else if r.Choices[0].Text != want {
				t.Errorf("text %q, want %q (same prompt)", r.Choices[0].Text, want)
			}
		})
	}
	t.Run("stream", func(t *testing.T) {
		_, data := srv.post(t, "/v1/completions", map[string]any{"prompt": prompt, "stream": true, "max_tokens": 40,
			"stream_options": map[string]any{"include_usage": true}})
		events := readSSE(t, data)
		if events[len(events)-1] != "[DONE]" {
			t.Fatalf("no [DONE]: %q", events)
		}
		var text, finish string
		var u *usage
		for _, ev := range events[:len(events)-1] {
			var c completionResponse
			if err := json.Unmarshal([]byte(ev), &c); err != nil {
				t.Fatal(err)
			}
			if c.Usage != nil {
				u = c.Usage
				continue
			}
			text += c.Choices[0].Text
			if c.Choices[0].FinishReason != nil {
				finish = *c.Choices[0].FinishReason
			}
		}
		if len(text) != 40 || !strings.HasPrefix(text, want) || finish != "length" {
			t.Errorf("streamed %q finish %q", text, finish)
		}
		if u == nil || u.CompletionTokens != 40 || u.PromptTokensDetails.CachedTokens == 0 {
			t.Errorf("usage %+v", u)
		}
	})
}

func TestPriorityIsPassedOn(t *testing.T) {
	fake := &fakeEngine{}
	srv := startServer(t, fake, nil)
	srv.post(t, "/v1/chat/completions", chatBody("hi", map[string]any{"priority": -3}))
	if got := fake.last().Priority; got != -3 {
		t.Errorf("chat priority %d, want -3", got)
	}
	srv.post(t, "/v1/completions", map[string]any{"prompt": "hi", "priority": 7})
	if got := fake.last().Priority; got != 7 {
		t.Errorf("completion priority %d, want 7", got)
	}
}

func TestErrors(t *testing.T) {
	long := strings.Repeat("x", 5000)
	tests := []struct {
		name       string
		path       string
		body       any
		wantStatus int
		wantParam  string
		wantInMsg  string
	}{
		{"malformed JSON", "/v1/chat/completions", `{"messages": [`, 400, "", "invalid JSON"},
		{"wrong type", "/v1/chat/completions", `{"messages": "hi"}`, 400, "messages", "messages"},
		{"empty messages", "/v1/chat/completions", `{"messages": []}`, 400, "messages", "non-empty"},
		{"prompt too long", "/v1/chat/completions", chatBody(long, nil), 400, "", "maximum context length is 4096"},
		{"completion too long", "/v1/completions", map[string]any{"prompt": long}, 400, "", "maximum context length"},
		{"max_tokens too large", "/v1/chat/completions", chatBody("hi", map[string]any{"max_tokens": 5000}), 400, "max_tokens", "too large"},
		{"max_tokens zero", "/v1/completions", map[string]any{"prompt": "hi", "max_tokens": 0}, 400, "max_tokens", "at least 1"},
		{"unknown model", "/v1/chat/completions", chatBody("hi", map[string]any{"model": "gpt-9"}), 404, "model", "does not exist"},
		{"bad tool_choice", "/v1/chat/completions", chatBody("hi", map[string]any{"tools": testTools, "tool_choice": "sometimes"}), 400, "tool_choice", "sometimes"},
		{"tool_choice not in tools", "/v1/chat/completions", chatBody("hi", map[string]any{"tools": testTools,
			"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "rm"}}}), 400, "tool_choice", "rm"},
		{"batch of prompts", "/v1/completions", map[string]any{"prompt": []string{"a", "b"}}, 400, "prompt", "batch"},
		{"empty prompt", "/v1/completions", map[string]any{"prompt": ""}, 400, "prompt", "empty"},
		{"negative token id", "/v1/completions", `{"prompt": [1, -2]}`, 400, "prompt", "-2"},
		{"tokenize nothing", "/tokenize", `{}`, 400, "", "prompt or messages"},
		{"detokenize bad ids", "/detokenize", `{"tokens": ["a"]}`, 400, "", "invalid JSON"},
	}
	srv := startServer(t, newTestEngine(t, 1000), nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := srv.post(t, tc.path, tc.body)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.wantStatus, data)
			}
			var body struct {
				Error map[string]any `json:"error"`
			}
			if err := json.Unmarshal(data, &body); err != nil {
				t.Fatalf("body %s: %v", data, err)
			}
			e := body.Error
			wantType := map[int]string{400: "BadRequestError", 404: "NotFoundError"}[tc.wantStatus]
			if len(e) != 4 || e["type"] != wantType || e["code"] != float64(tc.wantStatus) {
				t.Errorf("error body %s: want exactly message, type %s, param, code %d", data, wantType, tc.wantStatus)
			}
			msg, _ := e["message"].(string)
			if !strings.Contains(msg, tc.wantInMsg) {
				t.Errorf("message %q does not mention %q", msg, tc.wantInMsg)
			}
			if tc.wantParam == "" && e["param"] != nil || tc.wantParam != "" && e["param"] != tc.wantParam {
				t.Errorf("param %v, want %q", e["param"], tc.wantParam)
			}
		})
	}

	t.Run("unknown fields are ignored", func(t *testing.T) {
		resp, data := srv.post(t, "/v1/chat/completions", chatBody("hi", map[string]any{
			"nvext": map[string]any{"agent_hints": map[string]any{"osl": 10}}, "frobnicate": true, "temperature": 0.2}))
		if resp.StatusCode != http.StatusOK {
			t.Errorf("status %d: %s", resp.StatusCode, data)
		}
	})
}

func TestClientDisconnectFreesBlocks(t *testing.T) {
	// Real time: the answer takes seconds of wall time, so the client is
	// certain to leave in the middle of it.
	engine := newTestEngine(t, 1)
	srv := startServer(t, engine, nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := chatBody(strings.Repeat("a long prompt that fills several blocks ", 20), map[string]any{
		"stream": true, "max_tokens": 3000, "chat_template_kwargs": map[string]any{"enable_thinking": true}})
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.url+"/v1/chat/completions", strings.NewReader(string(raw)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Read until the first generated token: the request is running.
	buf := make([]byte, 4096)
	var seen string
	for !strings.Contains(seen, "reasoning_content") {
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatalf("stream ended early: %v (%q)", err, seen)
		}
		seen += string(buf[:n])
	}
	if used := engine.Stats().UsedBlocks; used == 0 {
		t.Fatal("no blocks in use while the request runs")
	}
	cancel()
	resp.Body.Close()
	if path := <-srv.handled; path != "/v1/chat/completions" {
		t.Fatalf("handled %q", path)
	}
	// The handler only returns once the engine closed the token channel,
	// which it does after freeing the request's blocks.
	st := engine.Stats()
	if st.UsedBlocks != 0 || st.Running != 0 {
		t.Errorf("after disconnect: %d blocks used, %d running", st.UsedBlocks, st.Running)
	}
	if st.GenerationTokens >= 3000 {
		t.Errorf("%d tokens generated: the request ran to its end instead of being aborted", st.GenerationTokens)
	}
}

func TestHealth(t *testing.T) {
	s, err := NewServer(ServerOptions{Engine: &fakeEngine{}, Tokenizer: byteTokenizer{}, ServedModelName: "m", MaxModelLen: 100})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("before Run: %d, want 503", rec.Code)
	}
	srv := startServer(t, &fakeEngine{}, nil)
	if resp, _ := srv.get(t, "/health"); resp.StatusCode != http.StatusOK {
		t.Errorf("while running: %d, want 200", resp.StatusCode)
	}
}

func TestModels(t *testing.T) {
	srv := startServer(t, &fakeEngine{}, nil)
	_, data := srv.get(t, "/v1/models")
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string `json:"id"`
			Object      string `json:"object"`
			Root        string `json:"root"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "qwen3-test" ||
		list.Data[0].Root != "qwen3-8b" || list.Data[0].MaxModelLen != 4096 {
		t.Errorf("models %s", data)
	}
}

func TestMetricsNames(t *testing.T) {
	srv := startServer(t, newTestEngine(t, 1000), nil)
	srv.post(t, "/v1/chat/completions", chatBody("hello metrics", nil))
	resp, data := srv.get(t, "/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	text := string(data)
	for _, name := range []string{
		"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
		"vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:num_preemptions_total",
		"vllm:prompt_tokens_total", "vllm:generation_tokens_total",
		"vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
		"vllm:e2e_request_latency_seconds_bucket", "vllm:request_queue_time_seconds_bucket",
	} {
		if !strings.Contains(text, name+"{") {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	for _, want := range []string{
		`vllm:time_to_first_token_seconds_count{engine="0",model_name="qwen3-test"} 1`,
		`vllm:request_queue_time_seconds_count{engine="0",model_name="qwen3-test"} 1`,
		`vllm:num_requests_running{engine="0",model_name="qwen3-test"} 0`,
		`vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",num_gpu_blocks="512"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks line %s", want)
		}
	}
	if strings.Contains(text, `vllm:generation_tokens_total{engine="0",model_name="qwen3-test"} 0`) {
		t.Error("generation_tokens_total is 0 after a request")
	}
}

// TestMetricsExternalPrefixCache: vLLM exports the connector's external
// prefix-cache counters only when a KV connector (here the host-RAM tier)
// is configured.
func TestMetricsExternalPrefixCache(t *testing.T) {
	tests := []struct {
		name      string
		cpuBlocks int
		want      bool
	}{
		{"no tier", 0, false},
		{"host-RAM tier", 100, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, newTestEngine(t, 1000), func(o *ServerOptions) { o.NumCPUBlocks = tt.cpuBlocks })
			_, data := srv.get(t, "/metrics")
			for _, name := range []string{"vllm:external_prefix_cache_queries_total", "vllm:external_prefix_cache_hits_total"} {
				if got := strings.Contains(string(data), name+"{"); got != tt.want {
					t.Errorf("/metrics has %s: %v, want %v", name, got, tt.want)
				}
			}
		})
	}
}

func TestTokenizeRoundTrip(t *testing.T) {
	srv := startServer(t, &fakeEngine{}, nil)
	type tokenized struct {
		Count       int      `json:"count"`
		MaxModelLen int      `json:"max_model_len"`
		Tokens      []uint32 `json:"tokens"`
	}
	text := "héllo wörld ✓"
	_, data := srv.post(t, "/tokenize", map[string]any{"prompt": text})
	var tok tokenized
	if err := json.Unmarshal(data, &tok); err != nil {
		t.Fatal(err)
	}
	if tok.Count != len(tok.Tokens) || tok.Count != len(text) || tok.MaxModelLen != 4096 {
		t.Errorf("tokenize %s", data)
	}
	_, data = srv.post(t, "/detokenize", map[string]any{"tokens": tok.Tokens})
	var detok struct {
		Prompt string `json:"prompt"`
	}
	if err := json.Unmarshal(data, &detok); err != nil {
		t.Fatal(err)
	}
	if detok.Prompt != text {
		t.Errorf("round trip %q, want %q", detok.Prompt, text)
	}

	// The chat form renders the template: the count is the rendered
	// prompt's, the same as the chat endpoint's prompt_tokens.
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	_, data = srv.post(t, "/tokenize", map[string]any{"messages": msgs, "tools": testTools, "add_generation_prompt": true})
	if err := json.Unmarshal(data, &tok); err != nil {
		t.Fatal(err)
	}
	_, data = srv.post(t, "/v1/chat/completions", map[string]any{"messages": msgs, "tools": testTools})
	if r := decodeChat(t, data); r.Usage.PromptTokens != tok.Count {
		t.Errorf("tokenize count %d, chat prompt_tokens %d", tok.Count, r.Usage.PromptTokens)
	}
}

// holdingEngine keeps every request open until its context ends, and
// reports submissions and aborts.
type holdingEngine struct {
	fakeEngine
	submitted chan struct{}
	aborted   chan struct{}
}

func (h *holdingEngine) Submit(ctx context.Context, req *Request) (<-chan TokenOutput, error) {
	ch := make(chan TokenOutput)
	h.submitted <- struct{}{}
	go func() {
		<-ctx.Done()
		close(ch)
		h.aborted <- struct{}{}
	}()
	return ch, nil
}

// TestDisconnectAbortsNonStreaming: a client that gives up on a
// non-streaming request aborts it too.
func TestDisconnectAbortsNonStreaming(t *testing.T) {
	for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
		t.Run(path, func(t *testing.T) {
			engine := &holdingEngine{submitted: make(chan struct{}, 1), aborted: make(chan struct{}, 1)}
			srv := startServer(t, engine, nil)
			ctx, cancel := context.WithCancel(context.Background())
			body := `{"messages":[{"role":"user","content":"hi"}],"prompt":"hi"}`
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.url+path, strings.NewReader(body))
			errc := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				errc <- err
			}()
			<-engine.submitted
			cancel()
			<-engine.aborted
			if got := <-srv.handled; got != path {
				t.Errorf("handled %q", got)
			}
			if err := <-errc; err == nil {
				t.Error("the cancelled client got a response")
			}
		})
	}
}

// gatedEngine hands each request's tokens out only when the test sends
// them, so that a test can look at the stream between engine outputs.
type gatedEngine struct {
	fakeEngine
	outputs chan TokenOutput
}

func (g *gatedEngine) Submit(ctx context.Context, req *Request) (<-chan TokenOutput, error) {
	return g.outputs, nil
}

func TestStreamHeadersComeFirstAndRoleWithFirstToken(t *testing.T) {
	engine := &gatedEngine{outputs: make(chan TokenOutput)}
	srv := startServer(t, engine, nil)
	raw, _ := json.Marshal(chatBody("hello", map[string]any{"stream": true}))
	resp, err := http.Post(srv.url+"/v1/chat/completions", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The headers came before any engine output: vLLM's server sends them
	// as soon as the request is accepted.
	lines := make(chan string)
	go func() {
		defer close(lines)
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
				lines <- data
			}
		}
	}()
	select {
	case data := <-lines:
		t.Fatalf("%s arrived before the engine produced anything", data)
	case <-time.After(200 * time.Millisecond):
	}

	engine.outputs <- TokenOutput{Token: 'H', PromptTokens: 5}
	role := <-lines
	var first chatResponse
	if err := json.Unmarshal([]byte(role), &first); err != nil || len(first.Choices) != 1 ||
		first.Choices[0].Delta.Role != "assistant" || first.Choices[0].Delta.Content == nil || *first.Choices[0].Delta.Content != "" {
		t.Fatalf("first chunk %s, want the role with empty content", role)
	}
	if text := <-lines; !strings.Contains(text, `"content":"H"`) {
		t.Fatalf("second chunk %s, want the first token", text)
	}
	engine.outputs <- TokenOutput{Token: 'i', PromptTokens: 5, Finished: true, FinishReason: "stop"}
	close(engine.outputs)
	var rest []string
	for data := range lines {
		rest = append(rest, data)
	}
	if len(rest) < 2 || !strings.Contains(rest[0], `"content":"i"`) || rest[len(rest)-1] != "[DONE]" {
		t.Errorf("rest of the stream %q", rest)
	}
}
