package sim

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestPlaceholderFor(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   string // JSON of the placeholder
	}{
		{"required only", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["b"]}`, `{"b":1}`},
		{"all types", `{"type":"object","required":["s","i","n","b","a","o","z"],"properties":{
			"s":{"type":"string"},"i":{"type":"integer"},"n":{"type":"number"},"b":{"type":"boolean"},
			"a":{"type":"array","items":{"type":"integer"}},"o":{"type":"object","properties":{}},"z":{"type":"null"}}}`,
			`{"a":[1],"b":true,"i":1,"n":1,"o":{},"s":"example","z":null}`},
		{"enum const default", `{"type":"object","required":["e","c","d"],"properties":{
			"e":{"type":"string","enum":["x","y"]},"c":{"const":42},"d":{"type":"string","default":"dflt"}}}`,
			`{"c":42,"d":"dflt","e":"x"}`},
		{"nullable type list", `{"type":"object","required":["p"],"properties":{"p":{"type":["null","integer"]}}}`, `{"p":1}`},
		{"anyOf", `{"type":"object","required":["p"],"properties":{"p":{"anyOf":[{"type":"boolean"},{"type":"string"}]}}}`, `{"p":true}`},
		{"named strings", `{"type":"object","required":["file_path","command","url"],"properties":{
			"file_path":{"type":"string"},"command":{"type":"string"},"url":{"type":"string"}}}`,
			`{"command":"ls","file_path":"README.md","url":"https://example.com"}`},
		{"required without property", `{"type":"object","required":["ghost"]}`, `{"ghost":"example"}`},
		{"no schema", ``, `{}`},
		{"not an object", `[1,2]`, `{}`},
		{"top level not typed object", `{"type":"string"}`, `{}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(placeholderFor(json.RawMessage(tc.schema), "", 0, new(placeholderBudget)))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPlaceholderDeepSchemaTerminates(t *testing.T) {
	// A self-similar schema 50 levels deep: the placeholder stops descending.
	schema := `{"type":"string"}`
	for range 50 {
		schema = `{"type":"object","required":["x"],"properties":{"x":` + schema + `}}`
	}
	b, err := json.Marshal(placeholderFor(json.RawMessage(schema), "", 0, new(placeholderBudget)))
	if err != nil {
		t.Fatal(err)
	}
	if depth := strings.Count(string(b), "{"); depth > 10 {
		t.Errorf("placeholder nests %d objects", depth)
	}
}

func TestPlaceholderRepeatedRequiredIsCheap(t *testing.T) {
	// Each level lists the same required name 50 times; without
	// de-duplication and a budget the work would be 50^depth.
	schema := `{"type":"string"}`
	for range 6 {
		schema = `{"type":"object","required":[` + strings.Repeat(`"x",`, 49) + `"x"],"properties":{"x":` + schema + `}}`
	}
	var budget placeholderBudget
	placeholderFor(json.RawMessage(schema), "", 0, &budget)
	if budget > maxPlaceholderNodes {
		t.Errorf("visited %d nodes", budget)
	}
	if budget > 10 {
		t.Errorf("visited %d nodes for a 7-level chain", budget)
	}
}

func TestComposeAnswerIsDeterministic(t *testing.T) {
	conv := readConversation([]agentMessage{{Role: "user", Text: "Look at /src/app/main.go and /src/app/util.go"}})
	spec := answerSpec{Seed: 99, Tools: []toolSpec{{Name: "list_dir"}, {Name: "read_file", Parameters: json.RawMessage(
		`{"type":"object","required":["path"],"properties":{"path":{"type":"string"}}}`)}},
		ToolCall: true, ForcedTool: -1, Thinking: true, Conversation: &conv}
	first := composeAnswer(spec)
	if composeAnswer(spec) != first {
		t.Fatal("same spec, different answers")
	}
	spec.Seed = 100
	other := composeAnswer(spec)
	spec.Seed = 101
	if other == first && composeAnswer(spec) == first {
		t.Error("the seed does not change the answer")
	}
	p := splitAnswer(first, true, true)
	if p.Reasoning == "" || len(p.Calls) != 1 || p.Content != "" {
		t.Errorf("split %+v", p)
	}
}

func TestSplitAnswer(t *testing.T) {
	call := "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"
	tests := []struct {
		name  string
		text  string
		tools bool
		final bool
		want  parsedAnswer
	}{
		{"prose", "Hello there.", false, true, parsedAnswer{Content: "Hello there."}},
		{"reasoning and content", "<think>\nhmm\n</think>\n\nDone.", false, true, parsedAnswer{Reasoning: "hmm\n", Content: "Done."}},
		{"reasoning cut", "<think>\nhmm", false, true, parsedAnswer{Reasoning: "hmm"}},
		{"partial think tag held", "<thi", false, false, parsedAnswer{}},
		{"partial close tag held", "<think>\nhmm</thi", false, false, parsedAnswer{Reasoning: "hmm"}},
		{"tool call", call, true, true, parsedAnswer{Calls: []toolCall{{Name: "f", Arguments: `{"a": 1}`}}}},
		{"two tool calls", call + "\n" + call, true, true, parsedAnswer{Calls: []toolCall{{Name: "f", Arguments: `{"a": 1}`}, {Name: "f", Arguments: `{"a": 1}`}}}},
		{"text before call", "Let me look.\n" + call, true, true, parsedAnswer{Content: "Let me look.", Calls: []toolCall{{Name: "f", Arguments: `{"a": 1}`}}}},
		{"incomplete call held", "<tool_call>\n{\"name\": ", true, false, parsedAnswer{}},
		{"incomplete call at end is text", "<tool_call>\n{\"name\": ", true, true, parsedAnswer{Content: "<tool_call>\n{\"name\": "}},
		{"bad JSON call is text", "<tool_call>\nnope\n</tool_call>", true, true, parsedAnswer{Content: "<tool_call>\nnope\n</tool_call>"}},
		{"partial open tag held", "See <tool_c", true, false, parsedAnswer{Content: "See "}},
		{"tags ignored without tools", call, false, true, parsedAnswer{Content: call}},
		{"null arguments", "<tool_call>\n{\"name\": \"f\", \"arguments\": null}\n</tool_call>", true, true, parsedAnswer{Calls: []toolCall{{Name: "f", Arguments: "{}"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := splitAnswer(tc.text, tc.tools, tc.final)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestSplitAnswerOnlyGrows checks what streaming relies on: as text arrives
// byte by byte, reasoning and content only ever extend what was sent.
func TestSplitAnswerOnlyGrows(t *testing.T) {
	for seed := range uint64(50) {
		conv := readConversation([]agentMessage{{Role: "user", Text: "What does cmd/tool/main.go print?"}})
		spec := answerSpec{Seed: seed, Tools: []toolSpec{{Name: "read", Parameters: json.RawMessage(`{"type":"object","required":["path"],"properties":{"path":{"type":"string"}}}`)}},
			ToolCall: seed%2 == 0, ForcedTool: -1, Thinking: seed%3 == 0, Conversation: &conv}
		text := composeAnswer(spec)
		var prev parsedAnswer
		for i := 1; i <= len(text); i++ {
			cur := splitAnswer(text[:i], true, i == len(text))
			if !strings.HasPrefix(cur.Reasoning, prev.Reasoning) || !strings.HasPrefix(cur.Content, prev.Content) {
				t.Fatalf("seed %d at %d: %+v does not extend %+v", seed, i, cur, prev)
			}
			prev = cur
		}
		if spec.ToolCall && len(prev.Calls) != 1 {
			t.Errorf("seed %d: final split has %d calls", seed, len(prev.Calls))
		}
	}
}
