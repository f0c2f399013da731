package api

import (
	"fmt"

	"github.com/valyala/fastjson"
)

// chatChunk is one chat.completion.chunk (or text_completion chunk) of an
// engine's stream: only the fields the gateway reads.
type chatChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *chunkUsage   `json:"usage"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
	Message string `json:"message"` // vLLM's older top-level error object
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	Text         string     `json:"text"` // completions
	FinishReason *string    `json:"finish_reason"`
}

type chunkDelta struct {
	Role             string          `json:"role"`
	Content          string          `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	Reasoning        string          `json:"reasoning"` // newer vLLM name
	ToolCalls        []toolCallDelta `json:"tool_calls"`
}

// bare reports whether the chunk carries nothing a client could show or act
// on: no text, reasoning, tool call, finish reason or usage. vLLM's first
// chunk, which only names the role, is one.
func (c *chatChunk) bare() bool {
	if c.Usage != nil {
		return false
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		d := &ch.Delta
		if d.Content != "" || d.reasoning() != "" || len(d.ToolCalls) > 0 || ch.Text != "" ||
			(ch.FinishReason != nil && *ch.FinishReason != "") {
			return false
		}
	}
	return true
}

// reasoning returns the reasoning text of a delta under either name.
func (d *chunkDelta) reasoning() string {
	if d.ReasoningContent != "" {
		return d.ReasoningContent
	}
	return d.Reasoning
}

type toolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chunkUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *chunkUsage) cached() int {
	if u == nil || u.PromptTokensDetails == nil {
		return 0
	}
	return u.PromptTokensDetails.CachedTokens
}

// streamError reports an error the engine put into its stream, or nil.
func (c *chatChunk) streamError() error {
	if c.Error != nil {
		return fmt.Errorf("engine: %s", c.Error.Message)
	}
	if c.Object == "error" {
		return fmt.Errorf("engine: %s", c.Message)
	}
	return nil
}

// chunkParsers decode engine chunks. Decoding is most of what relaying a
// chunk costs, so it is done with a parser that is reused from chunk to
// chunk and allocates only the strings it keeps, instead of
// encoding/json's validating pass and reflection (four times the CPU).
var chunkParsers fastjson.ParserPool

// decodeChunk decodes one engine chunk into ch, reusing ch's slices and,
// when they repeat, its id, object and model strings. A field of another
// type than expected counts as absent; of a key given twice the last one
// counts, as with encoding/json. Keys match exactly.
func decodeChunk(p *fastjson.Parser, data []byte, ch *chatChunk) error {
	v, err := p.ParseBytes(data)
	if err != nil {
		return err
	}
	o, err := v.Object()
	if err != nil {
		return fmt.Errorf("a chunk is a JSON object, not %s", v.Type())
	}
	prev := *ch
	*ch = chatChunk{}
	choices := prev.Choices[:0]
	o.Visit(func(key []byte, v *fastjson.Value) {
		switch string(key) {
		case "id":
			ch.ID = reuseString(prev.ID, v)
		case "object":
			ch.Object = reuseString(prev.Object, v)
		case "model":
			ch.Model = reuseString(prev.Model, v)
		case "created":
			if v.Type() == fastjson.TypeNumber {
				ch.Created, _ = v.Int64()
			}
		case "choices":
			choices = decodeChoices(v, choices[:0])
		case "usage":
			ch.Usage = decodeUsage(v)
		case "error":
			if v.Type() == fastjson.TypeObject {
				ch.Error = &struct {
					Message string `json:"message"`
				}{Message: stringOf(v.Get("message"))}
			}
		case "message":
			ch.Message = stringOf(v)
		}
	})
	ch.Choices = choices
	return nil
}

func decodeChoices(v *fastjson.Value, into []chunkChoice) []chunkChoice {
	arr, err := v.Array()
	if err != nil {
		return into
	}
	for _, cv := range arr {
		o, err := cv.Object()
		if err != nil {
			continue
		}
		var calls []toolCallDelta
		if len(into) < cap(into) {
			calls = into[:len(into)+1][len(into)].Delta.ToolCalls[:0] // reuse the slot's slice
		}
		c := chunkChoice{Delta: chunkDelta{ToolCalls: calls}}
		o.Visit(func(key []byte, v *fastjson.Value) {
			switch string(key) {
			case "index":
				c.Index = intOf(v)
			case "text":
				c.Text = stringOf(v)
			case "finish_reason":
				c.FinishReason = nil
				if v.Type() == fastjson.TypeString {
					s := stringOf(v)
					c.FinishReason = &s
				}
			case "delta":
				decodeDelta(v, &c.Delta)
			}
		})
		into = append(into, c)
	}
	return into
}

func decodeDelta(v *fastjson.Value, d *chunkDelta) {
	o, err := v.Object()
	if err != nil {
		return
	}
	calls := d.ToolCalls[:0]
	*d = chunkDelta{}
	o.Visit(func(key []byte, v *fastjson.Value) {
		switch string(key) {
		case "role":
			d.Role = stringOf(v)
		case "content":
			d.Content = stringOf(v)
		case "reasoning_content":
			d.ReasoningContent = stringOf(v)
		case "reasoning":
			d.Reasoning = stringOf(v)
		case "tool_calls":
			calls = decodeToolCalls(v, calls[:0])
		}
	})
	d.ToolCalls = calls
}

func decodeToolCalls(v *fastjson.Value, into []toolCallDelta) []toolCallDelta {
	arr, err := v.Array()
	if err != nil {
		return into
	}
	for _, tv := range arr {
		o, err := tv.Object()
		if err != nil {
			continue
		}
		var tc toolCallDelta
		o.Visit(func(key []byte, v *fastjson.Value) {
			switch string(key) {
			case "index":
				tc.Index = intOf(v)
			case "id":
				tc.ID = stringOf(v)
			case "type":
				tc.Type = stringOf(v)
			case "function":
				f, err := v.Object()
				if err != nil {
					return
				}
				tc.Function.Name, tc.Function.Arguments = "", ""
				f.Visit(func(key []byte, v *fastjson.Value) {
					switch string(key) {
					case "name":
						tc.Function.Name = stringOf(v)
					case "arguments":
						tc.Function.Arguments = stringOf(v)
					}
				})
			}
		})
		into = append(into, tc)
	}
	return into
}

func decodeUsage(v *fastjson.Value) *chunkUsage {
	o, err := v.Object()
	if err != nil {
		return nil
	}
	u := new(chunkUsage)
	o.Visit(func(key []byte, v *fastjson.Value) {
		switch string(key) {
		case "prompt_tokens":
			u.PromptTokens = intOf(v)
		case "completion_tokens":
			u.CompletionTokens = intOf(v)
		case "total_tokens":
			u.TotalTokens = intOf(v)
		case "prompt_tokens_details":
			d, err := v.Object()
			if err != nil {
				u.PromptTokensDetails = nil
				return
			}
			u.PromptTokensDetails = &struct {
				CachedTokens int `json:"cached_tokens"`
			}{}
			d.Visit(func(key []byte, v *fastjson.Value) {
				if string(key) == "cached_tokens" {
					u.PromptTokensDetails.CachedTokens = intOf(v)
				}
			})
		}
	})
	return u
}

// The accessors below check a value's type first: fastjson reports a
// mismatch, such as the null of every "finish_reason" but the last, with
// an error it formats and allocates.

// stringOf returns v's string value, or "" when v is absent or no string.
func stringOf(v *fastjson.Value) string {
	if v == nil || v.Type() != fastjson.TypeString {
		return ""
	}
	b, _ := v.StringBytes()
	return string(b)
}

// reuseString is stringOf that returns prev, without allocating, when the
// value equals it.
func reuseString(prev string, v *fastjson.Value) string {
	if v.Type() != fastjson.TypeString {
		return ""
	}
	b, _ := v.StringBytes()
	if string(b) == prev {
		return prev
	}
	return string(b)
}

// intOf returns v's integer value, or 0 when v is no integer.
func intOf(v *fastjson.Value) int {
	if v.Type() != fastjson.TypeNumber {
		return 0
	}
	n, _ := v.Int()
	return n
}
