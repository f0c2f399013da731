package sim

import (
	"encoding/json"
	"hash/fnv"
	"math/rand/v2"
	"strings"
)

// What the simulated model answers. The text is chosen deterministically from
// a seed (the prompt's hash mixed with the server's seed), so a replayed
// workload produces the same tokens; only its length and shape matter to the
// engine model, but clients (coding agents) need well-formed tool calls and
// readable prose to keep a session going.

// toolSpec is one function a chat request offers.
type toolSpec struct {
	Name       string
	Parameters json.RawMessage // JSON schema of the arguments
}

// answerSpec is what shapes an answer.
type answerSpec struct {
	Seed     uint64
	Tools    []toolSpec
	ToolCall bool // answer with a call of Tools[ForcedTool] or a chosen tool
	// ForcedTool is the index of the tool tool_choice names, or -1.
	ForcedTool int
	Thinking   bool // open with a <think> block, as Qwen3 does
	// Conversation, when set, is what the model plays an agent from: the
	// arguments of its calls and its final answer. Nil for plain prose
	// (the completions API).
	Conversation *conversation
	Agent        AgentOptions
}

// Hermes / Qwen3 markers in the generated text.
const (
	thinkOpen     = "<think>"
	thinkClose    = "</think>"
	toolCallOpen  = "<tool_call>"
	toolCallClose = "</tool_call>"
)

// seedFor mixes the server's seed with the prompt, so the same prompt always
// gets the same answer and different prompts different ones.
func seedFor(serverSeed int64, prompt []uint32) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, id := range prompt {
		b[0], b[1], b[2], b[3] = byte(id), byte(id>>8), byte(id>>16), byte(id>>24)
		h.Write(b[:])
	}
	return h.Sum64() ^ uint64(serverSeed)*0x9e3779b97f4a7c15
}

// composeAnswer returns the full text the model generates for spec, before
// any max_tokens truncation.
func composeAnswer(spec answerSpec) string {
	rng := rand.New(rand.NewPCG(spec.Seed, 0x5eed))
	var b strings.Builder
	if spec.Thinking {
		b.WriteString(thinkOpen + "\n")
		b.WriteString(prose(rng, 1+rng.IntN(3)))
		b.WriteString("\n" + thinkClose + "\n\n")
	}
	if spec.ToolCall && len(spec.Tools) > 0 {
		if text, ok := agentToolCall(spec, rng); ok {
			b.WriteString(text)
			return b.String()
		}
	}
	if spec.Conversation != nil {
		b.WriteString(finalAnswer(rng, spec.Conversation, spec.Agent.AllowWriteTools))
		return b.String()
	}
	b.WriteString(prose(rng, 2+rng.IntN(7)))
	return b.String()
}

// agentToolCall chooses this turn's call: the tool tool_choice names, or one
// of the usable calls. A tool that writes is never called unless allowed,
// even when named; a named tool that only looks or is unknown (a client's
// structured-output tool) is called with what can be filled, placeholders
// for the rest.
func agentToolCall(spec answerSpec, rng *rand.Rand) (string, bool) {
	conv := spec.Conversation
	if conv == nil {
		conv = &conversation{Called: map[string]bool{}}
	}
	allowWrite := spec.Agent.AllowWriteTools
	if i := spec.ForcedTool; i >= 0 && i < len(spec.Tools) {
		t := spec.Tools[i]
		if classifyTool(t.Name) == toolWriting && !allowWrite {
			return "", false
		}
		if args, ok := fillArguments(t, conv, rng); ok {
			return toolCallJSONText(t.Name, args), true
		}
		return toolCallText(t), true
	}
	calls := candidateCalls(spec.Tools, conv, allowWrite, rng)
	if len(calls) == 0 {
		return "", false
	}
	c := calls[rng.IntN(len(calls))]
	return toolCallOpen + "\n" + `{"name": ` + jsonString(c.Name) + `, "arguments": ` + c.Args + "}\n" + toolCallClose, true
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func toolCallJSONText(name string, args map[string]any) string {
	b, err := json.Marshal(args)
	if err != nil {
		b = []byte("{}")
	}
	return toolCallOpen + "\n" + `{"name": ` + jsonString(name) + `, "arguments": ` + string(b) + "}\n" + toolCallClose
}

var proseWords = strings.Fields(`the a this that function module change test build cache request token block
router engine prefix file path error value result config handler server client stream session agent model
update check return read write parse call run step queue worker index hash event metric latency budget
small large first next last each every simple careful clear`)

var proseVerbs = strings.Fields(`reads writes checks updates returns parses calls runs keeps frees stores
moves splits joins counts finds sends`)

// prose writes n sentences of plausible filler.
func prose(rng *rand.Rand, n int) string {
	var b strings.Builder
	for s := range n {
		if s > 0 {
			b.WriteByte(' ')
		}
		words := 5 + rng.IntN(12)
		for w := range words {
			word := proseWords[rng.IntN(len(proseWords))]
			if w == words/2 {
				word = proseVerbs[rng.IntN(len(proseVerbs))]
			}
			if w == 0 {
				word = strings.ToUpper(word[:1]) + word[1:]
			} else {
				b.WriteByte(' ')
			}
			b.WriteString(word)
		}
		b.WriteByte('.')
	}
	return b.String()
}

// toolCallText writes one call of t in the hermes format Qwen3 emits.
func toolCallText(t toolSpec) string {
	name, _ := json.Marshal(t.Name)
	args, err := json.Marshal(placeholderFor(t.Parameters, "", 0, new(placeholderBudget)))
	if err != nil || len(args) == 0 || args[0] != '{' {
		args = []byte("{}")
	}
	return toolCallOpen + "\n" + `{"name": ` + string(name) + `, "arguments": ` + string(args) + "}\n" + toolCallClose
}

// schemaNode is the part of a JSON schema placeholders are made from.
type schemaNode struct {
	Type       json.RawMessage            `json:"type"`
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
	Items      json.RawMessage            `json:"items"`
	Enum       []any                      `json:"enum"`
	Const      any                        `json:"const"`
	Default    any                        `json:"default"`
	AnyOf      []json.RawMessage          `json:"anyOf"`
	OneOf      []json.RawMessage          `json:"oneOf"`
}

// placeholderBudget bounds the schema nodes one placeholder visits: the
// schema comes from the client, and a list of required names that repeats
// itself would otherwise multiply the work at every level.
type placeholderBudget int

const maxPlaceholderNodes = 2000

// placeholderFor returns a value that validates against schema: an object
// with its required properties, enums and constants honoured, strings that
// look like what their name asks for. Unknown or broken schemas give an empty
// object at the top and null below it; depth and work are bounded.
func placeholderFor(schema json.RawMessage, name string, depth int, budget *placeholderBudget) any {
	var s schemaNode
	*budget++
	if depth > 8 || *budget > maxPlaceholderNodes || json.Unmarshal(schema, &s) != nil {
		if depth == 0 {
			return map[string]any{}
		}
		return nil
	}
	switch {
	case s.Const != nil:
		return s.Const
	case len(s.Enum) > 0:
		return s.Enum[0]
	case s.Default != nil:
		return s.Default
	case len(s.AnyOf) > 0:
		return placeholderFor(s.AnyOf[0], name, depth+1, budget)
	case len(s.OneOf) > 0:
		return placeholderFor(s.OneOf[0], name, depth+1, budget)
	}
	typ := schemaType(s)
	if depth == 0 {
		typ = "object" // tool arguments are always an object
	}
	switch typ {
	case "object":
		obj := map[string]any{}
		for _, req := range s.Required {
			if _, done := obj[req]; done {
				continue
			}
			if sub, ok := s.Properties[req]; ok {
				obj[req] = placeholderFor(sub, req, depth+1, budget)
			} else {
				obj[req] = "example"
			}
		}
		return obj
	case "array":
		if len(s.Items) == 0 {
			return []any{}
		}
		if v := placeholderFor(s.Items, name, depth+1, budget); v != nil {
			return []any{v}
		}
		return []any{}
	case "integer", "number":
		// A whole number fits both: clients such as Codex parse "number"
		// arguments (timeouts, counts) into integer types.
		return 1
	case "boolean":
		return true
	case "null":
		return nil
	}
	return placeholderString(name)
}

// schemaType reads "type", which may be a string or a list of them (the
// first one that is not "null" wins).
func schemaType(s schemaNode) string {
	var one string
	if json.Unmarshal(s.Type, &one) == nil {
		return one
	}
	var many []string
	if json.Unmarshal(s.Type, &many) == nil {
		for _, t := range many {
			if t != "null" {
				return t
			}
		}
	}
	if len(s.Properties) > 0 {
		return "object"
	}
	return "string"
}

func placeholderString(name string) string {
	n := strings.ToLower(name)
	switch {
	case strings.Contains(n, "path") || strings.Contains(n, "file"):
		return "README.md"
	case strings.Contains(n, "command") || n == "cmd":
		return "ls"
	case strings.Contains(n, "pattern") || strings.Contains(n, "query"):
		return "TODO"
	case strings.Contains(n, "url"):
		return "https://example.com"
	case strings.Contains(n, "description"):
		return "look around the repository"
	}
	return "example"
}

// toolCall is one parsed call, as OpenAI's tool_calls carry it.
type toolCall struct {
	Name      string
	Arguments string // JSON object text
}

// parsedAnswer is generated text split the way vLLM's qwen3 reasoning parser
// and hermes tool parser split it.
type parsedAnswer struct {
	Reasoning string
	Content   string
	Calls     []toolCall
}

// splitAnswer splits text. With final false the text is a prefix of what will
// come, and anything that might be the start of a marker, or a tool call not
// yet complete, is held back so that each field only ever grows as more text
// arrives. With final true a tool call that does not parse stays in Content,
// as vLLM returns an unparsable call as plain text.
func splitAnswer(text string, tools, final bool) parsedAnswer {
	var p parsedAnswer
	rest := text
	switch {
	case strings.HasPrefix(text, thinkOpen):
		body := text[len(thinkOpen):]
		if i := strings.Index(body, thinkClose); i >= 0 {
			p.Reasoning, rest = body[:i], body[i+len(thinkClose):]
		} else {
			if !final {
				body = holdBack(body, thinkClose)
			}
			p.Reasoning, rest = body, ""
		}
		p.Reasoning = strings.TrimLeft(p.Reasoning, "\n")
	case !final && strings.HasPrefix(thinkOpen, text):
		return p // might still become "<think>"
	}
	content := strings.TrimLeft(rest, "\n")
	if tools {
		if i := strings.Index(content, toolCallOpen); i >= 0 {
			calls, ok := parseToolCalls(content[i:])
			switch {
			case ok:
				p.Calls = calls
				content = content[:i]
			case !final:
				content = content[:i] // wait for the rest of the call
			}
		} else if !final {
			content = holdBack(content, toolCallOpen)
		}
	}
	if len(p.Calls) > 0 {
		content = strings.TrimRight(content, " \n")
	}
	p.Content = content
	return p
}

// holdBack drops a suffix of s that is a proper prefix of marker.
func holdBack(s, marker string) string {
	for n := min(len(marker)-1, len(s)); n > 0; n-- {
		if strings.HasSuffix(s, marker[:n]) {
			return s[:len(s)-n]
		}
	}
	return s
}

// parseToolCalls parses text that starts with "<tool_call>": one or more
// complete calls separated by whitespace. ok is false unless all of it is.
func parseToolCalls(text string) (calls []toolCall, ok bool) {
	rest := strings.TrimSpace(text)
	for rest != "" {
		if !strings.HasPrefix(rest, toolCallOpen) {
			return nil, false
		}
		end := strings.Index(rest, toolCallClose)
		if end < 0 {
			return nil, false
		}
		var call struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		body := rest[len(toolCallOpen):end]
		if json.Unmarshal([]byte(body), &call) != nil || call.Name == "" {
			return nil, false
		}
		args := strings.TrimSpace(string(call.Arguments))
		if args == "" || args == "null" {
			args = "{}"
		}
		calls = append(calls, toolCall{Name: call.Name, Arguments: args})
		rest = strings.TrimSpace(rest[end+len(toolCallClose):])
	}
	return calls, len(calls) > 0
}
