package sim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/tokenizer"
)

func qwen3(t *testing.T) *tokenizer.Model {
	t.Helper()
	tok, err := tokenizer.Qwen3()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestVLLMTokenize: vLLM's /tokenize bodies and answer
// (vllm/entrypoints/serve/tokenize/protocol.py): token_strs null unless
// return_token_strs, then the vocabulary's spelling; max_model_len the
// engine's; continue_final_message with add_generation_prompt refused;
// continue_final_message cutting the prompt after the last message; no
// /v1/tokenize.
func TestVLLMTokenize(t *testing.T) {
	tok := qwen3(t)
	ts := startServer(t, &fakeEngine{}, func(o *ServerOptions) { o.Tokenizer = tok })

	resp, body := ts.post(t, "/tokenize", map[string]any{"prompt": "hello world"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("tokenize: %d %s", resp.StatusCode, body)
	}
	if want := `"token_strs":null`; !strings.Contains(string(body), want) {
		t.Errorf("tokenize %s: want %s", body, want)
	}
	_, body = ts.post(t, "/tokenize", map[string]any{"prompt": "hello world", "return_token_strs": true})
	var got struct {
		Count       int      `json:"count"`
		MaxModelLen int      `json:"max_model_len"`
		Tokens      []uint32 `json:"tokens"`
		TokenStrs   []string `json:"token_strs"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.TokenStrs, "|") != "hello|Ġworld" || got.Count != 2 || got.MaxModelLen != 4096 {
		t.Errorf("tokenize with token strings: %s", body)
	}

	user := map[string]any{"role": "user", "content": "What is six times seven?"}
	partial := map[string]any{"role": "assistant", "content": "The answer is "}
	resp, body = ts.post(t, "/tokenize", map[string]any{
		"messages": []any{user, partial}, "continue_final_message": true, "add_generation_prompt": true})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Cannot set both") {
		t.Errorf("both continue_final_message and add_generation_prompt: %d %s", resp.StatusCode, body)
	}
	resp, body = ts.post(t, "/tokenize", map[string]any{"messages": []any{user, partial}, "continue_final_message": true})
	if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("continue_final_message: %d %s", resp.StatusCode, body)
	}
	if text := tok.Decode(got.Tokens); !strings.HasSuffix(text, "</think>\n\nThe answer is") {
		t.Errorf("continue_final_message renders %q", text)
	}

	if resp, _ := ts.post(t, "/v1/tokenize", map[string]any{"prompt": "x"}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("vLLM /v1/tokenize = %d, want 404", resp.StatusCode)
	}
}

// TestSGLangTokenize: SGLang's /tokenize, also at /v1/tokenize
// (http_server.py, serving_tokenize.py, openai/protocol.py): a prompt or a
// list of them, or messages, exactly one; {tokens, count, max_model_len}
// with the tokenizer's model_max_length and no token_strs.
func TestSGLangTokenize(t *testing.T) {
	tok := qwen3(t)
	ts := startServer(t, &fakeEngine{}, func(o *ServerOptions) { o.Tokenizer, o.Kind = tok, hruntime.KindSGLang })
	want := tok.Encode("hello world")
	for _, path := range []string{"/tokenize", "/v1/tokenize"} {
		resp, body := ts.post(t, path, map[string]any{"prompt": "hello world"})
		var got map[string]json.RawMessage
		if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		if len(got) != 3 || string(got["count"]) != "2" || string(got["max_model_len"]) != "131072" {
			t.Errorf("%s answers %s", path, body)
		}
		var ids []uint32
		if err := json.Unmarshal(got["tokens"], &ids); err != nil || len(ids) != 2 || ids[0] != want[0] || ids[1] != want[1] {
			t.Errorf("%s tokens %s, want %v", path, got["tokens"], want)
		}
	}
	_, body := ts.post(t, "/tokenize", map[string]any{"prompt": []string{"hello world", "", "x"}})
	var batch struct {
		Tokens [][]uint32 `json:"tokens"`
		Count  []int      `json:"count"`
	}
	if err := json.Unmarshal(body, &batch); err != nil || len(batch.Tokens) != 3 || len(batch.Tokens[1]) != 0 || batch.Count[0] != 2 {
		t.Errorf("a list of prompts: %s", body)
	}
	msgs := []any{map[string]any{"role": "user", "content": "hi"}}
	rendered, chat, err := tok.EncodeChat(tokenizer.ChatRequest{Messages: mustJSON(t, msgs), AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	_, body = ts.post(t, "/tokenize", map[string]any{"messages": msgs})
	var one struct {
		Tokens []uint32 `json:"tokens"`
	}
	if err := json.Unmarshal(body, &one); err != nil || tok.Decode(one.Tokens) != rendered || len(one.Tokens) != len(chat) {
		t.Errorf("messages: %s, want the rendered chat %q", body, rendered)
	}
	for _, bad := range []map[string]any{{}, {"prompt": "x", "messages": msgs}} {
		if resp, body := ts.post(t, "/tokenize", bad); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Exactly one of") {
			t.Errorf("%v: %d %s", bad, resp.StatusCode, body)
		}
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
