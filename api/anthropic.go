package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	json "github.com/goccy/go-json"
	"github.com/gofiber/fiber/v2"

	"github.com/hearth-llm/hearth/tokenizer"
)

// messagesRequest is an Anthropic Messages request.
type messagesRequest struct {
	Model         string             `json:"model"`
	Messages      []anthropicMessage `json:"messages"`
	System        json.RawMessage    `json:"system"`
	Tools         json.RawMessage    `json:"tools"`
	ToolChoice    *anthropicChoice   `json:"tool_choice"`
	MaxTokens     *int               `json:"max_tokens"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	TopK          *int               `json:"top_k"`
	StopSequences []string           `json:"stop_sequences"`
	Stream        bool               `json:"stream"`
	Thinking      *struct {
		Type string `json:"type"`
	} `json:"thinking"`
	Metadata *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
	Nvext json.RawMessage `json:"nvext"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// anthropicBlock is any content block; Type says which fields apply.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	Source    *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
}

type anthropicTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// decodeMessages translates an Anthropic Messages body. needMaxTokens is
// false for count_tokens.
func decodeMessages(body []byte, models modelResolver, needMaxTokens bool) (*engineRequest, *messagesRequest, error) {
	var in messagesRequest
	if err := decodeStrict(body, &in, ""); err != nil {
		return nil, nil, err
	}
	model, err := models.resolve(in.Model)
	if err != nil {
		return nil, nil, err
	}
	req := &engineRequest{
		Dialect: dialectAnthropic, ClientModel: in.Model, Model: model, ClientStream: in.Stream,
		Temperature: in.Temperature, TopP: in.TopP, TopK: in.TopK, Stop: in.StopSequences,
	}
	switch {
	case in.MaxTokens != nil && *in.MaxTokens < 1:
		return nil, nil, badRequest("max_tokens", "must be at least 1")
	case in.MaxTokens != nil:
		req.MaxTokens = *in.MaxTokens
	case needMaxTokens:
		return nil, nil, badRequest("max_tokens", "required")
	}
	if len(in.Messages) == 0 {
		return nil, nil, badRequest("messages", "must be a non-empty array")
	}
	if err := boundMessages(len(in.Messages), "messages"); err != nil {
		return nil, nil, err
	}
	system, err := anthropicText(in.System, "system", true)
	if err != nil {
		return nil, nil, err
	}
	if system != "" {
		req.Messages = append(req.Messages, textMessage("system", system))
	}
	for i, m := range in.Messages {
		msgs, err := translateAnthropicMessage(m, fmt.Sprintf("messages[%d]", i))
		if err != nil {
			return nil, nil, err
		}
		req.Messages = append(req.Messages, msgs...)
	}
	if err := boundToolsBytes(len(in.Tools)); err != nil {
		return nil, nil, err
	}
	tools, err := anthropicToolLists.get(in.Tools, func() (convertedTools, error) { return convertAnthropicTools(in.Tools) })
	if err != nil {
		return nil, nil, err
	}
	req.Tools, req.DroppedTools = tools.tools, slices.Clip(tools.dropped)
	if tc := in.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto", "":
			req.ToolChoice = json.RawMessage(`"auto"`)
		case "any":
			req.ToolChoice = json.RawMessage(`"required"`)
		case "none":
			req.ToolChoice = json.RawMessage(`"none"`)
		case "tool":
			if tc.Name == "" {
				return nil, nil, badRequest("tool_choice.name", "required when type is tool")
			}
			req.ToolChoice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
		default:
			return nil, nil, badRequestf("tool_choice.type", "unknown type %q", tc.Type)
		}
		if tc.DisableParallelToolUse {
			f := false
			req.ParallelToolCalls = &f
		}
		if len(tools.tools) == 0 {
			req.ToolChoice = nil
		}
	}
	if th := in.Thinking; th != nil {
		switch th.Type {
		case "enabled", "adaptive":
			req.Kwargs = map[string]any{"enable_thinking": true}
		case "disabled":
			req.Kwargs = map[string]any{"enable_thinking": false}
		default:
			return nil, nil, badRequestf("thinking.type", "unknown type %q", th.Type)
		}
	}
	return req, &in, nil
}

// convertedTools is a client's tool list as the engine takes it.
type convertedTools struct {
	tools   json.RawMessage // OpenAI function tools; nil when none
	dropped []string        // tool types an engine cannot run, left out
}

var anthropicToolLists = newMemo[convertedTools](64)

// convertAnthropicTools turns Anthropic tools into OpenAI function tools.
func convertAnthropicTools(raw json.RawMessage) (convertedTools, error) {
	var out convertedTools
	if isNullJSON(raw) {
		return out, nil
	}
	var list []json.RawMessage
	if err := decodeStrict(raw, &list, "tools"); err != nil {
		return out, err
	}
	var tools []chatTool
	for i, raw := range list {
		var t anthropicTool
		if err := decodeStrict(raw, &t, fmt.Sprintf("tools[%d]", i)); err != nil {
			return out, err
		}
		if t.Type != "" && t.Type != "custom" {
			// A server tool (web search, code execution, ...) that only
			// Anthropic can run: leave it out rather than fail.
			out.dropped = append(out.dropped, t.Type)
			continue
		}
		if t.Name == "" {
			return out, badRequest(fmt.Sprintf("tools[%d].name", i), "required")
		}
		schema := compactOrNil(t.InputSchema)
		if schema == nil {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		tools = append(tools, chatTool{Type: "function", Function: chatToolFunction{Name: t.Name, Description: t.Description, Parameters: schema}})
	}
	if len(tools) > 0 {
		out.tools, _ = json.Marshal(tools)
	}
	return out, nil
}

// anthropicText flattens a string-or-text-blocks value. In system text the
// billing header line is dropped.
func anthropicText(raw json.RawMessage, field string, system bool) (string, error) {
	if isNullJSON(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if system {
			s = stripVolatileSystemText(s)
		}
		return s, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", badRequest(field, "must be a string or an array of text blocks")
	}
	parts := make([]string, 0, len(blocks))
	for i, b := range blocks {
		switch b.Type {
		case "text":
		case "image", "document":
			parts = append(parts, "["+b.Type+"]")
			continue
		default:
			return "", badRequestf(fmt.Sprintf("%s[%d].type", field, i), "unexpected block type %q", b.Type)
		}
		t := b.Text
		if system {
			if t = stripVolatileSystemText(t); strings.TrimSpace(t) == "" {
				continue
			}
		}
		parts = append(parts, t)
	}
	return strings.Join(parts, "\n"), nil
}

// translateAnthropicMessage turns one Anthropic message into chat messages:
// tool results become tool messages, tool uses become tool calls, thinking
// becomes reasoning content. cache_control markers are not carried.
func translateAnthropicMessage(m anthropicMessage, field string) ([]chatMessage, error) {
	switch m.Role {
	case "user", "assistant", "system":
	case "":
		return nil, badRequest(field+".role", "required")
	default:
		return nil, badRequestf(field+".role", "unknown role %q", m.Role)
	}
	if m.Role == "system" {
		s, err := anthropicText(m.Content, field+".content", true)
		return []chatMessage{textMessage("system", s)}, err
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []chatMessage{textMessage(m.Role, s)}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return nil, badRequest(field+".content", "must be a string or an array of content blocks")
	}
	var out []chatMessage
	var texts []string
	var images []map[string]any
	asst := chatMessage{Role: "assistant"}
	var reasoning []string
	for i, b := range blocks {
		bf := fmt.Sprintf("%s.content[%d]", field, i)
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "image":
			if b.Source == nil {
				return nil, badRequest(bf+".source", "required")
			}
			if n := len(b.Source.URL) + len(b.Source.Data); n > maxImageBytes {
				return nil, imageTooLarge(bf, n)
			}
			url := b.Source.URL
			if b.Source.Type == "base64" {
				url = "data:" + b.Source.MediaType + ";base64," + b.Source.Data
			}
			images = append(images, map[string]any{"type": "image_url", "image_url": map[string]string{"url": url}})
		case "thinking":
			reasoning = append(reasoning, b.Thinking)
		case "redacted_thinking":
		case "tool_use":
			if m.Role != "assistant" {
				return nil, badRequest(bf+".type", "tool_use blocks belong in assistant messages")
			}
			if b.Name == "" {
				return nil, badRequest(bf+".name", "required")
			}
			args := "{}"
			if !isNullJSON(b.Input) {
				args = string(compactJSON(b.Input))
			}
			asst.ToolCalls = append(asst.ToolCalls, toolCall{ID: b.ID, Type: "function", Function: toolFunction{Name: b.Name, Arguments: args}})
		case "tool_result":
			if m.Role != "user" {
				return nil, badRequest(bf+".type", "tool_result blocks belong in user messages")
			}
			content, err := anthropicText(b.Content, bf+".content", false)
			if err != nil {
				return nil, err
			}
			out = append(out, chatMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: stringJSON(content)})
		default:
			return nil, badRequestf(bf+".type", "unsupported block type %q", b.Type)
		}
	}
	if m.Role == "assistant" {
		asst.Content = stringJSON(strings.Join(texts, ""))
		asst.ReasoningContent = strings.Join(reasoning, "\n")
		return append(out, asst), nil
	}
	switch {
	case len(images) > 0:
		parts := make([]map[string]any, 0, len(texts)+len(images))
		for _, t := range texts {
			parts = append(parts, map[string]any{"type": "text", "text": t})
		}
		parts = append(parts, images...)
		b, _ := json.Marshal(parts)
		out = append(out, chatMessage{Role: "user", Content: b})
	case len(texts) > 0:
		out = append(out, textMessage("user", strings.Join(texts, "\n")))
	}
	return out, nil
}

func (g *Gateway) handleMessages(c *fiber.Ctx) error {
	req, in, err := decodeMessages(c.Body(), g.models, true)
	if err != nil {
		return writeError(c, dialectAnthropic, err)
	}
	uid := ""
	if in.Metadata != nil {
		uid = sessionFromUserID(in.Metadata.UserID)
	}
	if err := g.commonFields(c, req, in.Nvext, uid); err != nil {
		return writeError(c, dialectAnthropic, err)
	}
	// Read before the answer: a stream that waits for its model makes its
	// responder once routed, after the handler has returned c.
	reveals := g.revealsCache(c)
	return g.forward(c, req, func(ex *exchange) responder {
		r := &anthropicResponder{id: newID("msg_"), model: req.ClientModel, promptTokens: ex.prompt, tool: -1}
		if reveals { // the router's count is the same oracle as x-hearth-cached-blocks
			r.predictedCached = min(ex.route.CachedBlocks*tokenizer.DefaultBlockSize, ex.prompt)
		}
		return r
	})
}

func (g *Gateway) handleCountTokens(c *fiber.Ctx) error {
	req, _, err := decodeMessages(c.Body(), g.models, false)
	if err != nil {
		return writeError(c, dialectAnthropic, err)
	}
	if err := g.prompts.fitsChat(req.Messages, req.Tools); err != nil {
		return writeError(c, dialectAnthropic, err)
	}
	creq, err := req.chatRequest()
	if err != nil {
		return writeError(c, dialectAnthropic, err)
	}
	ctx, watch := g.watcher.watch(c.Context().Conn())
	ids, _, err := g.prompts.encode(ctx, "", creq)
	watch.stop()
	if ctx.Err() != nil && err != nil && errors.Is(err, ctx.Err()) {
		return g.clientLeft(c, dialectAnthropic)
	}
	if overflow := (*apiError)(nil); errors.As(err, &overflow) {
		return writeError(c, dialectAnthropic, overflow)
	} else if err != nil {
		return writeError(c, dialectAnthropic, badRequestf("messages", "cannot render the chat template: %v", err))
	}
	return c.JSON(fiber.Map{"input_tokens": len(ids)})
}

// anthropicResponder writes Anthropic's message stream from chat chunks.
type anthropicResponder struct {
	id              string
	model           string
	promptTokens    int
	predictedCached int

	next     int    // index of the next content block
	open     string // type of the open block, "" when none
	tool     int    // tool call index of the open tool_use block
	thinking strings.Builder
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
}

type anthropicMessageOut struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []map[string]any `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

func (r *anthropicResponder) start(w *bytes.Buffer) {
	msg := anthropicMessageOut{ID: r.id, Type: "message", Role: "assistant", Model: r.model, Content: []map[string]any{},
		Usage: anthropicUsage{InputTokens: r.promptTokens - r.predictedCached, CacheReadInputTokens: r.predictedCached}}
	writeEvent(w, "message_start", map[string]any{"type": "message_start", "message": msg})
	writeEvent(w, "ping", map[string]string{"type": "ping"})
}

func (r *anthropicResponder) openBlock(w *bytes.Buffer, typ string, block map[string]any) {
	r.closeBlock(w)
	r.open = typ
	writeEvent(w, "content_block_start", map[string]any{"type": "content_block_start", "index": r.next, "content_block": block})
}

func (r *anthropicResponder) closeBlock(w *bytes.Buffer) {
	if r.open == "" {
		return
	}
	if r.open == "thinking" {
		r.delta(w, "signature_delta", "signature", thinkingSignature(r.thinking.String()))
		r.thinking.Reset()
	}
	writeEvent(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": r.next})
	r.open = ""
	r.next++
}

// delta writes a content_block_delta event whose delta has one string
// field. Deltas are the bulk of a stream, so they are written directly
// rather than marshalled.
func (r *anthropicResponder) delta(w *bytes.Buffer, typ, field, value string) {
	w.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":")
	w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(r.next), 10))
	w.WriteString(`,"delta":{"type":"`)
	w.WriteString(typ)
	w.WriteString(`","`)
	w.WriteString(field)
	w.WriteString(`":`)
	writeJSONString(w, value)
	w.WriteString("}}\n\n")
}

// thinkingSignature stands in for Anthropic's signature: clients keep it and
// send it back, and the gateway ignores it on the way in.
func thinkingSignature(thinking string) string {
	sum := sha256.Sum256([]byte(thinking))
	return base64.StdEncoding.EncodeToString(sum[:12])
}

func (r *anthropicResponder) chunk(w *bytes.Buffer, raw []byte, ch *chatChunk) {
	for i := range ch.Choices {
		c := &ch.Choices[i]
		if c.Index != 0 {
			continue
		}
		if t := c.Delta.reasoning(); t != "" {
			if r.open != "thinking" {
				r.openBlock(w, "thinking", map[string]any{"type": "thinking", "thinking": "", "signature": ""})
			}
			r.thinking.WriteString(t)
			r.delta(w, "thinking_delta", "thinking", t)
		}
		if t := c.Delta.Content; t != "" {
			if r.open != "text" {
				r.openBlock(w, "text", map[string]any{"type": "text", "text": ""})
			}
			r.delta(w, "text_delta", "text", t)
		}
		for _, tc := range c.Delta.ToolCalls {
			if r.open != "tool_use" || tc.Index != r.tool {
				id := tc.ID
				if id == "" {
					id = newID("toolu_")
				}
				r.openBlock(w, "tool_use", map[string]any{"type": "tool_use", "id": id, "name": tc.Function.Name, "input": map[string]any{}})
				r.tool = tc.Index
			}
			if tc.Function.Arguments != "" {
				r.delta(w, "input_json_delta", "partial_json", tc.Function.Arguments)
			}
		}
	}
}

func anthropicStopReason(acc *accumulator) string {
	switch {
	case len(acc.ToolCalls) > 0 || acc.FinishReason == "tool_calls":
		return "tool_use"
	case acc.FinishReason == "length":
		return "max_tokens"
	default:
		return "end_turn"
	}
}

func (r *anthropicResponder) usage(acc *accumulator) anthropicUsage {
	prompt := r.promptTokens
	if acc.HaveUsage {
		prompt = acc.Usage.PromptTokens
	}
	cached := acc.Usage.cached()
	return anthropicUsage{InputTokens: prompt - cached, OutputTokens: acc.Usage.CompletionTokens, CacheReadInputTokens: cached}
}

func (r *anthropicResponder) finish(w *bytes.Buffer, acc *accumulator) {
	r.closeBlock(w)
	writeEvent(w, "message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": anthropicStopReason(acc), "stop_sequence": nil},
		"usage": r.usage(acc),
	})
	writeEvent(w, "message_stop", map[string]string{"type": "message_stop"})
}

func (r *anthropicResponder) fail(w *bytes.Buffer, ae *apiError) {
	w.WriteString("event: error\ndata: ")
	w.Write(errorBody(dialectAnthropic, ae))
	w.WriteString("\n\n")
}

func (r *anthropicResponder) final(acc *accumulator) ([]byte, error) {
	stop := anthropicStopReason(acc)
	out := anthropicMessageOut{ID: r.id, Type: "message", Role: "assistant", Model: r.model, StopReason: &stop, Usage: r.usage(acc), Content: []map[string]any{}}
	if t := acc.Reasoning.String(); t != "" {
		out.Content = append(out.Content, map[string]any{"type": "thinking", "thinking": t, "signature": thinkingSignature(t)})
	}
	if t := acc.Content.String(); t != "" {
		out.Content = append(out.Content, map[string]any{"type": "text", "text": t})
	}
	for _, tc := range acc.ToolCalls {
		input := json.RawMessage(tc.Function.Arguments)
		if !json.Valid(input) {
			input = json.RawMessage(`{}`)
		}
		id := tc.ID
		if id == "" {
			id = newID("toolu_")
		}
		out.Content = append(out.Content, map[string]any{"type": "tool_use", "id": id, "name": tc.Function.Name, "input": input})
	}
	return json.Marshal(out)
}
