package api

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

var fuzzModels = newModelResolver(Config{Models: []string{servedModel}, Aliases: map[string]string{"*": servedModel}})

// addFixtureBodies seeds a fuzz corpus with the bodies of the fixtures.
func addFixtureBodies(f *testing.F, names ...string) {
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		fx := struct{ Body []byte }{}
		_ = jsonUnmarshal(b, &fx)
		f.Add(fx.Body)
	}
}

func FuzzDecodeChatCompletion(f *testing.F) {
	addFixtureBodies(f, "opencode-title.json", "opencode-turn1.json", "opencode-turn2.json")
	f.Add([]byte(`{"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}],"nvext":{"agent_hints":{"osl":3}},"seed":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, _, err := decodeChatCompletion(body, fuzzModels)
		if err != nil {
			return
		}
		if _, err := req.body(req.Messages, 10, true); err != nil {
			t.Fatalf("a decoded request does not marshal: %v", err)
		}
		if _, _, err := (fakeTokenizer{}).EncodeChat(mustChatRequest(t, req.Messages, req.Tools)); err != nil {
			t.Fatalf("a decoded request does not render: %v", err)
		}
	})
}

func FuzzDecodeMessages(f *testing.F) {
	addFixtureBodies(f, "claude-turn1.json", "claude-turn2.json")
	f.Add([]byte(`{"model":"c","max_tokens":1,"system":[{"type":"text","text":"x-anthropic-billing-header: a"}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image"}]}]}],"tool_choice":{"type":"tool","name":"x"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, _, err := decodeMessages(body, fuzzModels, true)
		if err != nil {
			return
		}
		if _, err := req.body(req.Messages, 10, true); err != nil {
			t.Fatalf("a decoded request does not marshal: %v", err)
		}
	})
}

func FuzzDecodeResponses(f *testing.F) {
	addFixtureBodies(f, "codex-turn1.json", "codex-turn2.json")
	f.Add([]byte(`{"model":"m","input":[{"type":"reasoning","encrypted_content":"hearth1:!!"},{"type":"function_call","name":"a","namespace":"n"}],"tool_choice":{"type":"function","name":"a"},"tools":[{"type":"function","name":"a"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		tr, err := decodeResponses(body, fuzzModels)
		if err != nil {
			return
		}
		if err := tr.appendInput(nil); err != nil {
			return
		}
		if _, err := tr.req.body(tr.req.Messages, 10, true); err != nil {
			t.Fatalf("a decoded request does not marshal: %v", err)
		}
	})
}

func FuzzDecodeCompletion(f *testing.F) {
	f.Add([]byte(`{"model":"m","prompt":"hello","max_tokens":3}`))
	f.Add([]byte(`{"model":"m","prompt":[1,2,3]}`))
	f.Add([]byte(`{"model":"m","prompt":["one"],"nvext":{}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		_, _, _, _, _ = decodeCompletion(body, fuzzModels, func(text string) ([]uint32, error) {
			return newPrompts(fakeTokenizer{}, -1, 0).encodeText(t.Context(), text)
		})
	})
}

// FuzzEngineStream feeds arbitrary engine output through the streamed body
// of every dialect, as the server pulls it: it must end, and every event it
// writes must carry valid JSON when the engine's did (OpenAI chunks pass
// through as the engine wrote them).
func FuzzEngineStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\",\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{\"}}]}}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"r\\u0000\\ud800\"},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":3}}\n\n"))
	f.Add([]byte("data: {\"error\":{\"message\":\"boom\"}}\n\n"))
	f.Add([]byte(": comment\nevent: x\ndata:{\"choices\":[{\"index\":2000,\"delta\":{\"tool_calls\":[{\"index\":-1}]}}]}\n"))
	g := &Gateway{router: newFakeRouter(), log: slog.New(slog.NewTextHandler(io.Discard, nil)), traffic: NewTraffic(TrafficLimits{})}
	g.metrics, _ = newMetrics(prometheus.NewRegistry())
	f.Fuzz(func(t *testing.T, stream []byte) {
		engineValid := true
		for _, line := range bytes.Split(stream, []byte("\n")) {
			if data, ok := sseData(append(line, '\n')); ok && string(data) != "[DONE]" && !json.Valid(data) {
				engineValid = false
			}
		}
		for _, r := range []responder{&openAIChatResponder{includeUsage: true}, &anthropicResponder{tool: -1}, &responsesResponder{}} {
			ex := &exchange{g: g, req: &engineRequest{}, body: io.NopCloser(bytes.NewReader(stream))}
			body := &streamBody{ex: ex, r: r}
			out, err := io.ReadAll(body)
			body.Close()
			if err != nil {
				t.Fatalf("%T: %v", r, err)
			}
			for _, line := range bytes.Split(out, []byte("\n")) {
				data, ok := bytes.CutPrefix(line, []byte("data: "))
				if ok && string(data) != "[DONE]" && !json.Valid(data) && engineValid {
					t.Fatalf("%T wrote invalid JSON: %s", r, data)
				}
			}
			if _, err := r.final(&ex.acc); err != nil {
				t.Fatalf("final: %v", err)
			}
		}
	})
}

// FuzzDecodeStrictAgreesWithEncodingJSON: whatever encoding/json decodes,
// decodeStrict (goccy/go-json first) decodes to the same request.
func FuzzDecodeStrictAgreesWithEncodingJSON(f *testing.F) {
	for _, name := range []string{"claude-turn2.json", "opencode-turn2.json", "codex-turn2.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"model":"m","MODEL":"n","messages":[{"role":"user","content":"\u00e9\ud800"}],"max_tokens":1e2}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var wantChat, gotChat chatCompletionRequest
		if json.Unmarshal(body, &wantChat) == nil {
			if err := decodeStrict(body, &gotChat, ""); err != nil || !reflect.DeepEqual(gotChat, wantChat) {
				t.Fatalf("chat request: %v\ngot  %+v\nwant %+v", err, gotChat, wantChat)
			}
		}
		var wantMsgs, gotMsgs messagesRequest
		if json.Unmarshal(body, &wantMsgs) == nil {
			if err := decodeStrict(body, &gotMsgs, ""); err != nil || !reflect.DeepEqual(gotMsgs, wantMsgs) {
				t.Fatalf("messages request: %v\ngot  %+v\nwant %+v", err, gotMsgs, wantMsgs)
			}
		}
	})
}

// FuzzUnknownFieldsAgreeWithEncodingJSON: the fields passed on to the
// engine are those encoding/json finds in the body, with equal values.
func FuzzUnknownFieldsAgreeWithEncodingJSON(f *testing.F) {
	addFixtureBodies(f, "opencode-turn1.json", "opencode-turn2.json")
	f.Add([]byte(`{"model":"m","seed":1,"logit_bias":{"1":-100},"x\u00e9":"\ud800","n":1e2,"model":"again","deep":[[[{"a":null}]]]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var all map[string]json.RawMessage
		if json.Unmarshal(body, &all) != nil {
			return
		}
		got := unknownFields(body, chatKnownFields)
		want := 0
		for k, raw := range all {
			if chatKnownFields[k] {
				continue
			}
			want++
			a, _ := decodeAny(raw)
			if b, err := decodeAny(got[k]); err != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("field %q: got %s (%v), want %s", k, got[k], err, raw)
			}
		}
		if len(got) != want {
			t.Fatalf("got %d fields %v, want %d", len(got), got, want)
		}
	})
}

// decodeAny decodes JSON with numbers kept as written.
func decodeAny(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}
