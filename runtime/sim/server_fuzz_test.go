package sim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

// fuzzServer is a server on a fake engine, called without a network.
func fuzzServer(t testing.TB) *Server {
	s, err := NewServer(ServerOptions{Engine: &fakeEngine{}, Tokenizer: byteTokenizer{},
		ServedModelName: "m", MaxModelLen: 2048})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkFuzzResponse holds for any body: a known status, and JSON (or an
// event stream) that parses.
func checkFuzzResponse(t *testing.T, rec *httptest.ResponseRecorder) {
	switch rec.Code {
	case http.StatusOK:
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
			if !strings.HasSuffix(rec.Body.String(), "data: [DONE]\n\n") {
				t.Fatalf("stream without [DONE]: %q", rec.Body.String())
			}
			return
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("invalid JSON answer: %q", rec.Body.String())
		}
	case http.StatusBadRequest, http.StatusNotFound:
		var body struct {
			Error struct {
				Message string `json:"message"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error.Code != rec.Code || body.Error.Message == "" {
			t.Fatalf("error body %q", rec.Body.String())
		}
	default:
		t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
	}
}

func fuzzPost(t *testing.T, s *Server, path string, body []byte) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(string(body)))
	s.Handler().ServeHTTP(rec, req)
	checkFuzzResponse(t, rec)
}

func FuzzChatCompletionsRequest(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":3}`,
		`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","required":["a"],"properties":{"a":{"type":"array","items":{"type":"object","required":["b"],"properties":{"b":{"type":["null","number"]}}}}}}}}],"tool_choice":"required"}`,
		`{"messages":[{"role":"tool","content":"r"}],"tools":[{"function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		`{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":true},"stream":true}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"priority":-1,"max_completion_tokens":1}`,
		`{"messages":{}}`, `[]`, `null`, `{"messages":[],"tools":"x"}`, `{"messages":[1]}`,
	} {
		f.Add([]byte(seed))
	}
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzPost(t, s, "/v1/chat/completions", body)
	})
}

func FuzzCompletionsRequest(f *testing.F) {
	for _, seed := range []string{
		`{"prompt":"hello"}`, `{"prompt":[1,2,3],"max_tokens":2,"stream":true}`, `{"prompt":[[1,2]]}`,
		`{"prompt":["a"]}`, `{"prompt":["a","b"]}`, `{"prompt":[-1]}`, `{"prompt":[4294967296]}`,
		`{"prompt":1.5}`, `{"prompt":""}`, `{"prompt":"x","max_tokens":-5}`, `{"prompt":{"a":1}}`,
	} {
		f.Add([]byte(seed))
	}
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzPost(t, s, "/v1/completions", body)
	})
}

func FuzzTokenizeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"prompt":"hello"}`, `{"messages":[{"role":"user","content":"x"}],"add_generation_prompt":false}`,
		`{"messages":[],"tools":[1]}`, `{"tokens":[1,2]}`, `{}`, `{"messages":"x"}`,
		`{"prompt":"hi","return_token_strs":true}`, `{"prompt":["a",""]}`, `{"prompt":"a","messages":[]}`,
		`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":" y "}],"continue_final_message":true}`,
		`{"messages":[{"role":"user","content":"x"}],"continue_final_message":true,"add_generation_prompt":true}`,
	} {
		f.Add([]byte(seed))
	}
	s := fuzzServer(f)
	sglang, err := NewServer(ServerOptions{Engine: &fakeEngine{}, Tokenizer: byteTokenizer{},
		ServedModelName: "m", MaxModelLen: 2048, Kind: hruntime.KindSGLang})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzPost(t, s, "/tokenize", body)
		fuzzPost(t, s, "/detokenize", body)
		fuzzPost(t, sglang, "/tokenize", body)
	})
}
