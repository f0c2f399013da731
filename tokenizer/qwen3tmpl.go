package tokenizer

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/zeebo/xxh3"
)

// qwen3TemplateSHA256 identifies the chat template Qwen3 ships (all sizes of
// the original Qwen3 release). Rendering it through gonja takes several
// milliseconds for a long agent conversation; renderQwen3 does the same in
// Go in a small fraction of that. Tests hold the two equal on the reference
// conversations and on fuzzed ones.
const qwen3TemplateSHA256 = "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5"

func isQwen3Template(source string) bool {
	sum := sha256.Sum256([]byte(source))
	return hex.EncodeToString(sum[:]) == qwen3TemplateSHA256
}

// renderQwen3 renders Qwen3's template. ok is false when the conversation
// has a shape the Go version does not reproduce exactly (a content that is
// not a string, say); the caller then renders through gonja.
//
// toolBlock is the tool definitions as the template writes them, one
// "\n" plus tojson(tool) per tool (see qwen3ToolBlock); "" for none.
func renderQwen3(messages pyList, toolBlock string, addGenerationPrompt bool, kwargs map[string]any) (out string, ok bool) {
	if len(messages) == 0 {
		return "", false
	}
	type message struct {
		role, content       string
		reasoning           string
		hasReasoning        bool
		toolCalls           pyList
		hasToolCalls        bool
		contentWasNonString bool
	}
	msgs := make([]message, len(messages))
	size := 0
	for i, raw := range messages {
		d, isDict := raw.(*exec.Dict)
		if !isDict {
			return "", false
		}
		var m message
		var haveRole, haveContent bool
		for _, p := range d.Pairs {
			switch p.Key.String() {
			case "role":
				m.role, haveRole = p.Value.Interface().(string)
				if !haveRole {
					return "", false
				}
			case "content":
				m.content, haveContent = p.Value.Interface().(string)
				if !haveContent {
					return "", false
				}
			case "reasoning_content":
				switch v := p.Value.Interface().(type) {
				case nil:
				case string:
					m.reasoning, m.hasReasoning = v, true
				default:
					return "", false
				}
			case "tool_calls":
				switch v := p.Value.Interface().(type) {
				case nil:
				case pyList:
					m.toolCalls, m.hasToolCalls = v, len(v) > 0
				default:
					return "", false
				}
			}
		}
		if !haveRole || !haveContent && m.role != "" {
			// Jinja would print an undefined content as "" in some places
			// and fail in others: leave it to the template engine.
			return "", false
		}
		msgs[i] = m
		size += len(m.content) + len(m.reasoning) + 32
	}

	var b strings.Builder
	b.Grow(size + 4096 + len(toolBlock))
	if toolBlock != "" {
		b.WriteString("<|im_start|>system\n")
		if msgs[0].role == "system" {
			b.WriteString(msgs[0].content)
			b.WriteString("\n\n")
		}
		b.WriteString("# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>")
		b.WriteString(toolBlock)
		b.WriteString("\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n")
	} else if msgs[0].role == "system" {
		b.WriteString("<|im_start|>system\n")
		b.WriteString(msgs[0].content)
		b.WriteString("<|im_end|>\n")
	}

	// The last user message that is a real query, not a tool response
	// written as a user turn.
	lastQuery := len(msgs) - 1
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.role == "user" && !(strings.HasPrefix(m.content, "<tool_response>") && strings.HasSuffix(m.content, "</tool_response>")) {
			lastQuery = i
			break
		}
	}

	for i, m := range msgs {
		last := i == len(msgs)-1
		switch {
		case m.role == "user" || m.role == "system" && i > 0:
			b.WriteString("<|im_start|>")
			b.WriteString(m.role)
			b.WriteString("\n")
			b.WriteString(m.content)
			b.WriteString("<|im_end|>\n")
		case m.role == "assistant":
			content, reasoning := m.content, ""
			if m.hasReasoning {
				reasoning = m.reasoning
			} else if strings.Contains(m.content, "</think>") {
				content = strings.TrimLeft(m.content[strings.LastIndex(m.content, "</think>")+len("</think>"):], "\n")
				before := strings.TrimRight(m.content[:strings.Index(m.content, "</think>")], "\n")
				if k := strings.LastIndex(before, "<think>"); k >= 0 {
					before = before[k+len("<think>"):]
				}
				reasoning = strings.TrimLeft(before, "\n")
			}
			b.WriteString("<|im_start|>assistant\n")
			if i > lastQuery && (last || reasoning != "") {
				b.WriteString("<think>\n")
				b.WriteString(strings.Trim(reasoning, "\n"))
				b.WriteString("\n</think>\n\n")
				b.WriteString(strings.TrimLeft(content, "\n"))
			} else {
				b.WriteString(content)
			}
			if m.hasToolCalls {
				for j, raw := range m.toolCalls {
					if j > 0 || content != "" {
						b.WriteString("\n")
					}
					call, isDict := raw.(*exec.Dict)
					if !isDict {
						return "", false
					}
					if fn, found := dictGet(call, "function"); found {
						switch f := fn.(type) {
						case nil:
						case *exec.Dict:
							if len(f.Pairs) > 0 {
								call = f
							}
						default:
							return "", false
						}
					}
					name, found := dictGet(call, "name")
					nameStr, isStr := name.(string)
					if !found || !isStr {
						return "", false
					}
					args, found := dictGet(call, "arguments")
					if !found {
						return "", false
					}
					b.WriteString("<tool_call>\n{\"name\": \"")
					b.WriteString(nameStr)
					b.WriteString("\", \"arguments\": ")
					if s, isStr := args.(string); isStr {
						b.WriteString(s)
					} else if writePyJSON(&b, args, -1, 0) != nil {
						return "", false
					}
					b.WriteString("}\n</tool_call>")
				}
			}
			b.WriteString("<|im_end|>\n")
		case m.role == "tool":
			if i == 0 || msgs[i-1].role != "tool" {
				b.WriteString("<|im_start|>user")
			}
			b.WriteString("\n<tool_response>\n")
			b.WriteString(m.content)
			b.WriteString("\n</tool_response>")
			if last || msgs[i+1].role != "tool" {
				b.WriteString("<|im_end|>\n")
			}
		}
	}
	if addGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
		if v, set := kwargs["enable_thinking"]; set && v == false {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	}
	return b.String(), true
}

func dictGet(d *exec.Dict, key string) (any, bool) {
	for _, p := range d.Pairs {
		if p.Key.String() == key {
			return p.Value.Interface(), true
		}
	}
	return nil, false
}

// qwen3ToolBlock writes the tool definitions of raw (a JSON array of tools,
// or null) as Qwen3's template does: "\n" and tojson(tool) for each. ok is
// false when tools is no list or a tool cannot be written; the template
// then goes through gonja.
func qwen3ToolBlock(raw []byte) (block string, ok bool) {
	if isNull(raw) {
		return "", true
	}
	tools, err := parseOrderedJSON(raw)
	if err != nil {
		return "", false
	}
	list, isList := tools.(pyList)
	if !isList {
		return "", false
	}
	var b strings.Builder
	for _, tool := range list {
		b.WriteString("\n")
		if writePyJSON(&b, tool, -1, 0) != nil {
			return "", false
		}
	}
	return b.String(), true
}

// toolBlocks remembers the latest tool blocks by their JSON's hash: agents
// send the same tools every turn, and parsing and writing Claude Code's
// (60 KB of schemas) was half of rendering a turn.
type toolBlocks struct {
	mu      sync.Mutex
	entries [8]toolBlockEntry
	next    int // the entry replaced next
}

type toolBlockEntry struct {
	key   xxh3.Uint128
	block string
	ok    bool
	used  bool
}

func (c *toolBlocks) get(raw []byte) (string, bool) {
	key := xxh3.Hash128(raw)
	c.mu.Lock()
	for _, e := range c.entries {
		if e.used && e.key == key {
			c.mu.Unlock()
			return e.block, e.ok
		}
	}
	c.mu.Unlock()
	block, ok := qwen3ToolBlock(raw)
	c.mu.Lock()
	c.entries[c.next] = toolBlockEntry{key: key, block: block, ok: ok, used: true}
	c.next = (c.next + 1) % len(c.entries)
	c.mu.Unlock()
	return block, ok
}
