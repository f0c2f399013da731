package tokenizer

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// renderBoth renders req with the Go version of Qwen3's template and with
// gonja. native is "" when the Go version declined.
func renderBoth(t testing.TB, m *Model, req ChatRequest) (native string, nativeOK bool, jinja string, jinjaErr error) {
	t.Helper()
	messages, err := parseOrderedJSON(req.Messages)
	if err != nil {
		return "", false, "", err
	}
	list, isList := messages.(pyList)
	if !isList {
		return "", false, "", nil
	}
	var tools any
	if !isNull(req.Tools) {
		if tools, err = parseOrderedJSON(req.Tools); err != nil {
			return "", false, "", err
		}
	}
	if block, ok := qwen3ToolBlock(req.Tools); ok {
		native, nativeOK = renderQwen3(list, block, req.AddGenerationPrompt, req.Kwargs)
	}
	jinja, jinjaErr = m.template.renderJinja(messages, tools, req)
	return native, nativeOK, jinja, jinjaErr
}

func TestQwen3TemplateIsRecognised(t *testing.T) {
	m := qwen3Model(t)
	if !m.template.qwen3 {
		t.Fatal("the embedded Qwen3 template is not recognised: every render goes through gonja")
	}
	if isQwen3Template(" ") {
		t.Fatal("an arbitrary template is taken for Qwen3's")
	}
}

func TestQwen3GoTemplateEqualsJinja(t *testing.T) {
	m := qwen3Model(t)
	vectors := readJSONLines[chatVector](t, "chat.jsonl.gz")
	native := 0
	for _, v := range vectors {
		got, ok, jinja, err := renderBoth(t, m, v.request())
		if err != nil {
			t.Errorf("%s: gonja: %v", v.ID, err)
			continue
		}
		if jinja != v.Rendered {
			t.Errorf("%s: gonja's rendering differs from the reference", v.ID)
		}
		if !ok {
			continue
		}
		native++
		if got != v.Rendered {
			t.Errorf("%s: Go rendering differs from the reference:\n got %q\nwant %q", v.ID, got, v.Rendered)
		}
	}
	// Every reference conversation has string contents: the Go version must
	// take all of them.
	if native != len(vectors) {
		t.Errorf("Go template rendered %d of %d conversations", native, len(vectors))
	}
}

func FuzzQwen3GoTemplateEqualsJinja(f *testing.F) {
	m := qwen3Model(f)
	for _, v := range readJSONLines[chatVector](f, "chat.jsonl.gz") {
		if len(v.Messages) < 2000 {
			f.Add(string(v.Messages), string(v.Tools), true, false)
		}
	}
	f.Add(`[{"role":"user","content":"a"},{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":{"x":1.5e-7}}}]}]`, `[]`, false, true)
	f.Fuzz(func(t *testing.T, messages, tools string, addGen, noThinking bool) {
		req := ChatRequest{Messages: []byte(messages), Tools: []byte(tools), AddGenerationPrompt: addGen}
		if noThinking {
			req.Kwargs = map[string]any{"enable_thinking": false}
		}
		got, ok, jinja, err := renderBoth(t, m, req)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("Go template rendered what gonja refuses (%v):\n%q", err, got)
		}
		if got != jinja {
			t.Fatalf("renderings differ:\n  go %q\njinja %q", got, jinja)
		}
	})
}

// TestQwen3GoTemplateEqualsJinjaOnRandomConversations builds conversations
// from the pieces the template branches on (think tags, tool responses
// written as user turns, reasoning fields, tool-call shapes) and holds the
// Go rendering equal to gonja's.
func TestQwen3GoTemplateEqualsJinjaOnRandomConversations(t *testing.T) {
	m := qwen3Model(t)
	rng := rand.New(rand.NewPCG(7, 11))
	texts := []string{"", "hi", "\n", "\n\nx\n", "<think>", "</think>", "<think>\nr\n</think>\n\nanswer", "a</think>b</think>c",
		"<tool_response>", "</tool_response>", "<tool_response>\nok\n</tool_response>", "ünï 中文", "\"q\" \\ /", "tab\t"}
	pick := func() string {
		var b strings.Builder
		for range rng.IntN(3) {
			b.WriteString(texts[rng.IntN(len(texts))])
		}
		return b.String()
	}
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	roles := []string{"system", "user", "assistant", "tool", "user", "assistant", "developer"}
	rendered := 0
	for n := range 400 {
		var msgs []string
		for range 1 + rng.IntN(6) {
			role := roles[rng.IntN(len(roles))]
			fields := []string{`"role":` + quote(role), `"content":` + quote(pick())}
			if role == "assistant" {
				switch rng.IntN(4) {
				case 0:
					fields = append(fields, `"reasoning_content":`+quote(pick()))
				case 1:
					fields = append(fields, `"reasoning_content":null`)
				}
				if rng.IntN(2) == 0 {
					var calls []string
					for range rng.IntN(3) {
						args := `{"path":"a.go","n":[1,2.5,{"deep":true}],"s":` + quote(pick()) + `}`
						if rng.IntN(2) == 0 {
							args = quote(`{"raw": 1}`)
						}
						call := `{"name":"read","arguments":` + args + `}`
						if rng.IntN(3) > 0 {
							call = `{"type":"function","function":` + call + `}`
						}
						calls = append(calls, call)
					}
					fields = append(fields, `"tool_calls":[`+strings.Join(calls, ",")+`]`)
				}
			}
			msgs = append(msgs, "{"+strings.Join(fields, ",")+"}")
		}
		req := ChatRequest{Messages: []byte("[" + strings.Join(msgs, ",") + "]"), AddGenerationPrompt: rng.IntN(2) == 0}
		switch rng.IntN(3) {
		case 0:
			req.Tools = []byte(`[{"type":"function","function":{"name":"read","description":"Reads ü","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}]`)
		case 1:
			req.Tools = []byte(`[]`)
		}
		if rng.IntN(3) == 0 {
			req.Kwargs = map[string]any{"enable_thinking": rng.IntN(2) == 0}
		}
		got, ok, jinja, err := renderBoth(t, m, req)
		if !ok {
			t.Fatalf("conversation %d: Go template declined %s", n, req.Messages)
		}
		if err != nil {
			t.Fatalf("conversation %d: gonja: %v\n%s", n, err, req.Messages)
		}
		if got != jinja {
			t.Fatalf("conversation %d differs:\n  go %q\njinja %q\nmessages %s", n, got, jinja, req.Messages)
		}
		rendered++
	}
	t.Logf("%d random conversations rendered identically", rendered)
}

// TestToolBlocksAnswerAsWrittenFresh asks the tool-block cache for more
// tool lists than it keeps, round after round: every answer must be the
// block written from scratch.
func TestToolBlocksAnswerAsWrittenFresh(t *testing.T) {
	var c toolBlocks
	lists := [][]byte{[]byte(`null`), []byte(`[]`), []byte(`{"not":"a list"}`), []byte(`[{"broken"`)}
	for i := range 12 {
		lists = append(lists, []byte(fmt.Sprintf(`[{"type":"function","function":{"name":"tool_%d","parameters":{"type":"object","properties":{"x":{"type":"integer"}}}}}]`, i)))
	}
	for round := range 3 {
		for i, raw := range lists {
			got, gotOK := c.get(raw)
			want, wantOK := qwen3ToolBlock(raw)
			if got != want || gotOK != wantOK {
				t.Fatalf("round %d, list %d: cached (%q, %v), fresh (%q, %v)", round, i, got, gotOK, want, wantOK)
			}
		}
	}
}
