package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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

func TestBareChunks(t *testing.T) {
	for _, tc := range []struct {
		data string
		bare bool
	}{
		{`{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`, true},
		{`{"choices":[{"index":0,"delta":{}}]}`, true},
		{`{"choices":[]}`, true},
		{`{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`, false},
		{`{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}`, false},
		{`{"choices":[{"index":0,"delta":{"reasoning":"hmm"}}]}`, false},
		{`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"ls"}}]}}]}`, false},
		{`{"choices":[{"index":0,"text":"Hi"}]}`, false},
		{`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, false},
		{`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, false},
	} {
		var ch chatChunk
		if err := decodeChunk(new(fastjson.Parser), []byte(tc.data), &ch); err != nil {
			t.Fatal(err)
		}
		if got := ch.bare(); got != tc.bare {
			t.Errorf("%s: bare %v, want %v", tc.data, got, tc.bare)
		}
	}
}

// piecewise returns one piece per Read, as chunks arrive from a socket.
type piecewise [][]byte

func (p *piecewise) Read(b []byte) (int, error) {
	if len(*p) == 0 {
		return 0, io.EOF
	}
	n := copy(b, (*p)[0])
	(*p)[0] = (*p)[0][n:]
	if len((*p)[0]) == 0 {
		*p = (*p)[1:]
	}
	return n, nil
}

// TestRoleChunkGoesOutWithFirstToken: the engine's role-only chunk is not
// written to the client on its own.
func TestRoleChunkGoesOutWithFirstToken(t *testing.T) {
	g := &Gateway{router: newFakeRouter(), log: slog.New(slog.NewTextHandler(io.Discard, nil)), traffic: NewTraffic(TrafficLimits{})}
	g.metrics, _ = newMetrics(prometheus.NewRegistry())
	stream := piecewise{
		[]byte(`data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"),
		[]byte(`data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}` + "\n\n"),
		[]byte(`data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"),
		[]byte("data: [DONE]\n\n"),
	}
	ex := &exchange{g: g, req: &engineRequest{}, body: io.NopCloser(&stream), status: http.StatusOK}
	body := &streamBody{ex: ex, r: &openAIChatResponder{}}
	defer body.Close()
	buf := make([]byte, 4096)
	n, err := body.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if first := string(buf[:n]); !strings.Contains(first, `"role":"assistant"`) || !strings.Contains(first, "Hello") {
		t.Errorf("first write to the client:\n%s\nwant the role and the first token together", first)
	}
	n, _ = body.Read(buf)
	if next := string(buf[:n]); !strings.Contains(next, `"finish_reason":"stop"`) || strings.Contains(next, "Hello") {
		t.Errorf("second write:\n%s\nwant the finish chunk alone", next)
	}
}

// TestChunksReceivedTogetherGoOutTogether: engine chunks that arrived in
// one read are handed to the client in one write, even when they are more
// than the line reader holds.
func TestChunksReceivedTogetherGoOutTogether(t *testing.T) {
	release := make(chan struct{})
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 6 {
			fmt.Fprintf(w, `data: {"id":"c","choices":[{"index":0,"delta":{"content":"word%d %s"},"finish_reason":null}]}`+"\n\n",
				i, strings.Repeat("x", 300))
		}
		w.(http.Flusher).Flush() // one write, longer than engineLineBuffer
		<-release
		fmt.Fprint(w, `data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	})
	g := &Gateway{router: newFakeRouter(), log: slog.New(slog.NewTextHandler(io.Discard, nil)), traffic: NewTraffic(TrafficLimits{})}
	g.metrics, _ = newMetrics(prometheus.NewRegistry())
	client := newEngineClient()
	defer client.closeIdle()
	resp, err := post(t, client, context.Background(), srv.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	ex := &exchange{g: g, req: &engineRequest{}, body: resp.Body, status: http.StatusOK}
	body := &streamBody{ex: ex, r: &openAIChatResponder{}}
	buf := make([]byte, 16<<10)
	n, err := body.Read(buf)
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(buf[:n]), "data: "); got != 6 {
		t.Errorf("the first write carries %d of the 6 chunks received together", got)
	}
	if _, err := io.ReadAll(body); err != nil {
		t.Fatal(err)
	}
	body.Close()
}
