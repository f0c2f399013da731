package api

import (
	"bytes"
	"sort"
	"strings"
	"unicode/utf8"

	json "github.com/goccy/go-json"

	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/tokenizer"
)

// chatMessage is one message in the OpenAI chat shape the engine receives.
// Every dialect is translated into a list of these, normalised so that the
// same conversation always renders to the same prompt.
type chatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"` // a JSON string, or an array of parts
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCall      `json:"tool_calls,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
	Name             string          `json:"name,omitempty"`
}

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// chatTool is an OpenAI function tool. Parameters stay raw so that the
// schema's key order (which the template prints) survives.
type chatTool struct {
	Type     string           `json:"type"`
	Function chatToolFunction `json:"function"`
}

type chatToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// engineRequest is the one internal request every dialect becomes.
type engineRequest struct {
	Dialect     dialect
	ClientModel string // as the client named it
	Model       string // served name

	Messages          []chatMessage
	Tools             json.RawMessage // JSON array of OpenAI tools, or nil
	ToolChoice        json.RawMessage
	ParallelToolCalls *bool
	MaxTokens         int // 0 = engine default
	Temperature       *float64
	TopP              *float64
	TopK              *int
	Stop              []string
	Kwargs            map[string]any // chat_template_kwargs
	// Extra are further OpenAI chat fields passed to the engine untouched
	// (seed, response_format, logprobs, ...).
	Extra map[string]json.RawMessage
	// CacheSalt is the request's cache_salt (OpenAI dialects), "" for
	// none: the engine gets it in Extra, the router hashes the prompt
	// with it (tokenizer.Hasher.WithSalt), since the engine's cache holds
	// a salted prompt apart from every other salt's.
	CacheSalt string

	ClientStream bool
	IncludeUsage bool // the client asked for a usage chunk (OpenAI chat)

	SessionID   string
	Session     router.SessionControl
	Hints       router.Hints
	HintOrigins HintOrigins // where each of Hints came from
	Kind        RequestKind
	// EnginePriority is the "priority" field of the engine's body, in the
	// engine's convention (Config.EnginePriority); nil leaves it out.
	EnginePriority *int
	Policy         string
	DroppedTools   []string // built-in tools the engine cannot run, left out

	// onAnswer, when set, receives a complete answer (stored responses).
	onAnswer func(acc *accumulator)
}

// stringJSON returns s as a JSON string value.
func stringJSON(s string) json.RawMessage {
	if len(s) >= largeStringJSON {
		return appendStringJSON(make([]byte, 0, stringJSONLen(s)), s)
	}
	b, _ := json.Marshal(s)
	return b
}

// largeStringJSON is the size from which stringJSON writes a string into
// a buffer sized for it at once: the encoder's growing buffer allocated
// six times the text (a 30 MB prompt cost 190 MB there).
const largeStringJSON = 1 << 20

// stringJSONLen is the length of s as a JSON string (appendStringJSON's).
func stringJSONLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// appendStringJSON appends s as a JSON string, escaped as the encoder
// does: HTML's <, > and & too, and invalid UTF-8 as U+FFFD.
func appendStringJSON(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			var esc string
			switch c {
			case '"':
				esc = `\"`
			case '\\':
				esc = `\\`
			case '\n':
				esc = `\n`
			case '\r':
				esc = `\r`
			case '\t':
				esc = `\t`
			default:
				if c >= 0x20 && c != '<' && c != '>' && c != '&' {
					i++
					continue
				}
			}
			b = append(b, s[start:i]...)
			if esc != "" {
				b = append(b, esc...)
			} else {
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}

// textMessage builds a message whose content is plain text.
func textMessage(role, text string) chatMessage {
	return chatMessage{Role: role, Content: stringJSON(text)}
}

// upstreamBody is the engine's chat completion request.
type upstreamBody struct {
	Model             string          `json:"model"`
	Messages          []chatMessage   `json:"messages"`
	Tools             json.RawMessage `json:"tools,omitempty"`
	ToolChoice        json.RawMessage `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	MaxTokens         *int            `json:"max_tokens,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	TopP              *float64        `json:"top_p,omitempty"`
	TopK              *int            `json:"top_k,omitempty"`
	Stop              []string        `json:"stop,omitempty"`
	Stream            bool            `json:"stream"`
	StreamOptions     *streamOptions  `json:"stream_options,omitempty"`
	Kwargs            map[string]any  `json:"chat_template_kwargs,omitempty"`
	Priority          *int            `json:"priority,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// body marshals the request for the engine. The engine always streams with
// usage: the gateway needs the first token for the router and the cached
// token count for the client, whatever the client asked for.
func (r *engineRequest) body(messages []chatMessage, maxTokens int, stream bool) ([]byte, error) {
	u := upstreamBody{
		Model: r.Model, Messages: messages, Tools: r.Tools, ToolChoice: r.ToolChoice,
		ParallelToolCalls: r.ParallelToolCalls, Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK,
		Stop: r.Stop, Stream: stream, Kwargs: r.Kwargs, Priority: r.EnginePriority,
	}
	if maxTokens > 0 {
		u.MaxTokens = &maxTokens
	}
	if stream {
		u.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	b, err := json.Marshal(u)
	if err != nil || len(r.Extra) == 0 {
		return b, err
	}
	// Splice the passthrough fields in, sorted for a stable body.
	keys := make([]string, 0, len(r.Extra))
	for k := range r.Extra {
		if k == "priority" && r.EnginePriority != nil {
			continue // the gateway's, in the engine's convention
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	buf.Write(b[:len(b)-1])
	for _, k := range keys {
		kb, _ := json.Marshal(k)
		buf.WriteByte(',')
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(r.Extra[k])
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// chatRequestFor is what the tokenizer renders: exactly the messages and
// tools sent to the engine.
func (r *engineRequest) chatRequest() (tokenizer.ChatRequest, error) {
	msgs, err := json.Marshal(r.Messages)
	if err != nil {
		return tokenizer.ChatRequest{}, err
	}
	return tokenizer.ChatRequest{Messages: msgs, Tools: r.Tools, AddGenerationPrompt: true, Kwargs: r.Kwargs}, nil
}

// compactJSON returns raw without insignificant whitespace, so that the same
// value always prints the same; invalid JSON is returned as is.
func compactJSON(raw []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

// isNullJSON reports whether raw is absent or JSON null.
func isNullJSON(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) == 0 || string(s) == "null"
}

// billingHeaderPrefix starts the system line Claude Code adds for billing.
// Its cc_version suffix differs per session and its cch= value per request,
// so it must never reach the prompt.
const billingHeaderPrefix = "x-anthropic-billing-header:"

// stripVolatileSystemText removes lines that change between requests of the
// same conversation from a system text.
func stripVolatileSystemText(s string) string {
	if !strings.Contains(s, billingHeaderPrefix) {
		return s
	}
	lines := strings.Split(s, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), billingHeaderPrefix) {
			continue
		}
		kept = append(kept, l)
	}
	return strings.Join(kept, "\n")
}

// sessionFromUserID extracts the session part of Claude Code's
// metadata.user_id: a JSON object with session_id, or the older
// "user_<hash>_account_<uuid>_session_<uuid>" form.
func sessionFromUserID(uid string) string {
	if uid == "" {
		return ""
	}
	if strings.HasPrefix(uid, "{") {
		var v struct {
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal([]byte(uid), &v) == nil && v.SessionID != "" {
			return v.SessionID
		}
		return ""
	}
	if i := strings.LastIndex(uid, "_session_"); i >= 0 {
		return uid[i+len("_session_"):]
	}
	return uid
}

// sessionHeaders are the headers clients put a session id in, in order of
// preference: OpenCode's, Codex's, Claude Code's.
var sessionHeaders = []string{"x-session-affinity", "x-session-id", "session-id", "x-claude-code-session-id"}
