package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	json "github.com/goccy/go-json"
	"github.com/gofiber/fiber/v2"

	"github.com/hearth-llm/hearth/api/store"
)

// responsesRequest is an OpenAI Responses request. Translation is stateless
// unless previous_response_id names a stored response.
type responsesRequest struct {
	Model             string            `json:"model"`
	Input             json.RawMessage   `json:"input"`
	Instructions      string            `json:"instructions"`
	Tools             []json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	MaxOutputTokens   *int              `json:"max_output_tokens"`
	Temperature       *float64          `json:"temperature"`
	TopP              *float64          `json:"top_p"`
	Reasoning         *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Store              *bool           `json:"store"`
	Stream             bool            `json:"stream"`
	PreviousResponseID string          `json:"previous_response_id"`
	PromptCacheKey     string          `json:"prompt_cache_key"`
	Nvext              json.RawMessage `json:"nvext"`
}

// responsesItem is any input item; Type says which fields apply. Item ids
// are ignored: Codex sends fresh ones every turn.
type responsesItem struct {
	Type             string          `json:"type"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Namespace        string          `json:"namespace"`
	Arguments        string          `json:"arguments"`
	Output           json.RawMessage `json:"output"`
	Summary          []responsesPart `json:"summary"`
	EncryptedContent string          `json:"encrypted_content"`
}

type responsesPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	ImageURL json.RawMessage `json:"image_url"`
}

// responsesTool is a function tool or a namespace of them.
type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Tools       []responsesTool `json:"tools"`
}

// namespaceSeparator joins a namespace and a tool name into the flat name
// the engine sees.
const namespaceSeparator = "__"

// toolName is a tool's name as the client knows it.
type toolName struct{ Namespace, Name string }

// reasoningPrefix marks encrypted_content the gateway produced: the
// reasoning text itself, so that a stateless client hands it back.
const reasoningPrefix = "hearth1:"

// responsesTranslation is a decoded Responses request.
type responsesTranslation struct {
	req          *engineRequest
	in           *responsesRequest
	names        map[string]toolName // flat name -> client name
	instructions int                 // leading messages that come from instructions
}

// decodeResponses translates a Responses body; history holds the stored
// conversation of previous_response_id, if any.
func decodeResponses(body []byte, models modelResolver) (*responsesTranslation, error) {
	var in responsesRequest
	if err := decodeStrict(body, &in, ""); err != nil {
		return nil, err
	}
	model, err := models.resolve(in.Model)
	if err != nil {
		return nil, err
	}
	req := &engineRequest{
		Dialect: dialectResponses, ClientModel: in.Model, Model: model, ClientStream: in.Stream,
		ParallelToolCalls: in.ParallelToolCalls, Temperature: in.Temperature, TopP: in.TopP,
	}
	if in.MaxOutputTokens != nil {
		if *in.MaxOutputTokens < 1 {
			return nil, badRequest("max_output_tokens", "must be at least 1")
		}
		req.MaxTokens = *in.MaxOutputTokens
	}
	if r := in.Reasoning; r != nil {
		req.Kwargs = map[string]any{"enable_thinking": r.Effort != "none" && r.Effort != "minimal"}
	}
	t := &responsesTranslation{req: req, in: &in, names: map[string]toolName{}}
	var tools []chatTool
	for i, raw := range in.Tools {
		var rt responsesTool
		if err := decodeStrict(raw, &rt, fmt.Sprintf("tools[%d]", i)); err != nil {
			return nil, err
		}
		switch rt.Type {
		case "function":
			if rt.Name == "" {
				return nil, badRequest(fmt.Sprintf("tools[%d].name", i), "required")
			}
			tools = append(tools, responsesFunction(rt, rt.Name))
		case "namespace":
			for j, nt := range rt.Tools {
				if nt.Type != "function" || nt.Name == "" {
					req.DroppedTools = append(req.DroppedTools, rt.Name+"."+nt.Type)
					continue
				}
				_ = j
				flat := rt.Name + namespaceSeparator + nt.Name
				t.names[flat] = toolName{Namespace: rt.Name, Name: nt.Name}
				tools = append(tools, responsesFunction(nt, flat))
			}
		default:
			// web_search, file_search, image_generation, custom tools...:
			// the engine cannot run them; leave them out, never fail.
			req.DroppedTools = append(req.DroppedTools, rt.Type)
		}
	}
	if len(tools) > 0 {
		req.Tools, _ = json.Marshal(tools)
	}
	if !isNullJSON(in.ToolChoice) && len(tools) > 0 {
		var s string
		var obj struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		switch {
		case json.Unmarshal(in.ToolChoice, &s) == nil:
			switch s {
			case "auto", "none", "required":
				req.ToolChoice = stringJSON(s)
			default:
				return nil, badRequestf("tool_choice", "unknown value %q", s)
			}
		case json.Unmarshal(in.ToolChoice, &obj) == nil && obj.Type == "function" && obj.Name != "":
			req.ToolChoice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": obj.Name}})
		default:
			req.ToolChoice = stringJSON("auto")
		}
	}
	if in.Instructions != "" {
		req.Messages = append(req.Messages, textMessage("system", in.Instructions))
		t.instructions = 1
	}
	return t, nil
}

func responsesFunction(rt responsesTool, name string) chatTool {
	params := compactOrNil(rt.Parameters)
	if params == nil {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return chatTool{Type: "function", Function: chatToolFunction{Name: name, Description: rt.Description, Parameters: params}}
}

// appendInput translates the input items after the history.
func (t *responsesTranslation) appendInput(history []chatMessage) error {
	req := t.req
	req.Messages = append(req.Messages, history...)
	raw := t.in.Input
	if isNullJSON(raw) {
		if len(history) == 0 {
			return badRequest("input", "required")
		}
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		req.Messages = append(req.Messages, textMessage("user", s))
		return nil
	}
	var items []responsesItem
	if err := decodeStrict(raw, &items, "input"); err != nil {
		return err
	}
	if err := boundMessages(len(items), "input"); err != nil {
		return err
	}
	var pending *chatMessage // the assistant turn being assembled
	flush := func() {
		if pending != nil {
			req.Messages = append(req.Messages, *pending)
			pending = nil
		}
	}
	assistant := func() *chatMessage {
		if pending == nil {
			pending = &chatMessage{Role: "assistant", Content: stringJSON("")}
		}
		return pending
	}
	for i, it := range items {
		field := fmt.Sprintf("input[%d]", i)
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			content, err := responsesContent(it.Content, field+".content")
			if err != nil {
				return err
			}
			switch it.Role {
			case "assistant":
				if pending != nil && (len(pending.ToolCalls) > 0 || string(pending.Content) != `""`) {
					flush()
				}
				assistant().Content = content
			case "user", "system", "developer":
				flush()
				role := it.Role
				if role == "developer" {
					role = "system"
				}
				req.Messages = append(req.Messages, chatMessage{Role: role, Content: content})
			default:
				return badRequestf(field+".role", "unknown role %q", it.Role)
			}
		case "reasoning":
			if pending != nil && (len(pending.ToolCalls) > 0 || string(pending.Content) != `""`) {
				flush()
			}
			assistant().ReasoningContent = reasoningText(it)
		case "function_call":
			if it.Name == "" {
				return badRequest(field+".name", "required")
			}
			name := it.Name
			if it.Namespace != "" {
				name = it.Namespace + namespaceSeparator + it.Name
			}
			a := assistant()
			a.ToolCalls = append(a.ToolCalls, toolCall{ID: it.CallID, Type: "function", Function: toolFunction{Name: name, Arguments: it.Arguments}})
		case "function_call_output":
			flush()
			out, err := responsesContent(it.Output, field+".output")
			if err != nil {
				return err
			}
			var text string
			if json.Unmarshal(out, &text) != nil {
				text = string(out)
			}
			req.Messages = append(req.Messages, chatMessage{Role: "tool", ToolCallID: it.CallID, Content: stringJSON(text)})
		default:
			// Items of built-in tools (web_search_call, ...) and references:
			// nothing the engine can use.
		}
	}
	flush()
	if len(req.Messages) == 0 {
		return badRequest("input", "no messages")
	}
	return nil
}

// reasoningText recovers the text of a reasoning item: our own
// encrypted_content, else its content, else its summary.
func reasoningText(it responsesItem) string {
	if rest, ok := strings.CutPrefix(it.EncryptedContent, reasoningPrefix); ok {
		if b, err := base64.StdEncoding.DecodeString(rest); err == nil {
			return string(b)
		}
	}
	var parts []responsesPart
	if json.Unmarshal(it.Content, &parts) == nil && len(parts) > 0 {
		var sb strings.Builder
		for _, p := range parts {
			sb.WriteString(p.Text)
		}
		return sb.String()
	}
	var sb strings.Builder
	for i, p := range it.Summary {
		if i > 0 {
			sb.WriteString("\n")
		}
		sb.WriteString(p.Text)
	}
	return sb.String()
}

// responsesContent turns a string-or-parts value into chat content.
func responsesContent(raw json.RawMessage, field string) (json.RawMessage, error) {
	if isNullJSON(raw) {
		return stringJSON(""), nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return stringJSON(s), nil
	}
	var parts []responsesPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, badRequest(field, "must be a string or an array of content parts")
	}
	var texts []string
	var out []map[string]any
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text", "refusal":
			texts = append(texts, p.Text)
			out = append(out, map[string]any{"type": "text", "text": p.Text})
		case "input_image":
			if len(p.ImageURL) > maxImageBytes {
				return nil, imageTooLarge(field, len(p.ImageURL))
			}
			var url string
			if json.Unmarshal(p.ImageURL, &url) != nil {
				continue
			}
			out = append(out, map[string]any{"type": "image_url", "image_url": map[string]string{"url": url}})
		}
	}
	if len(out) == len(texts) {
		return stringJSON(strings.Join(texts, "\n")), nil
	}
	b, _ := json.Marshal(out)
	return b, nil
}

func (g *Gateway) handleResponses(c *fiber.Ctx) error {
	t, err := decodeResponses(c.Body(), g.models)
	if err != nil {
		return writeError(c, dialectResponses, err)
	}
	var history []chatMessage
	if id := t.in.PreviousResponseID; id != "" {
		if history, err = g.loadHistory(c.UserContext(), id); err != nil {
			return writeError(c, dialectResponses, err)
		}
	}
	if err := t.appendInput(history); err != nil {
		return writeError(c, dialectResponses, err)
	}
	req := t.req
	if err := g.commonFields(c, req, t.in.Nvext, t.in.PromptCacheKey); err != nil {
		return writeError(c, dialectResponses, err)
	}
	respID := newID("resp_")
	keep := t.in.Store == nil || *t.in.Store // the API's default is true
	if keep && g.store != nil {
		req.onAnswer = func(acc *accumulator) {
			conv := append(append([]chatMessage(nil), req.Messages[t.instructions:]...), acc.assistantMessage())
			b, err := json.Marshal(conv)
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err = g.store.PutResponse(ctx, store.Response{ID: respID, Model: req.Model, CreatedAt: time.Now(), Conversation: b})
				cancel()
			}
			if err != nil {
				g.log.Warn("cannot store response", "response", respID, "error", err)
			}
		}
	}
	return g.forward(c, req, func(ex *exchange) responder {
		return &responsesResponder{
			names: t.names,
			base: responseObject{
				ID: respID, Object: "response", CreatedAt: time.Now().Unix(), Model: req.ClientModel,
				Output: []map[string]any{}, ParallelToolCalls: req.ParallelToolCalls == nil || *req.ParallelToolCalls,
				ToolChoice: t.in.ToolChoice, Tools: []any{}, Store: keep, PreviousResponseID: nilIfEmpty(t.in.PreviousResponseID),
			},
		}
	})
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (g *Gateway) loadHistory(ctx context.Context, id string) ([]chatMessage, error) {
	if g.store == nil {
		return nil, badRequest("previous_response_id", "this server does not store responses")
	}
	r, err := g.store.GetResponse(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &apiError{Status: http.StatusNotFound, Param: "previous_response_id", Message: fmt.Sprintf("response %q not found", id)}
	}
	if err != nil {
		return nil, err
	}
	var msgs []chatMessage
	if err := json.Unmarshal(r.Conversation, &msgs); err != nil {
		return nil, fmt.Errorf("stored response %s: %w", id, err)
	}
	return msgs, nil
}

// responseObject is the Responses API's response.
type responseObject struct {
	ID                string           `json:"id"`
	Object            string           `json:"object"`
	CreatedAt         int64            `json:"created_at"`
	Status            string           `json:"status"`
	Model             string           `json:"model"`
	Output            []map[string]any `json:"output"`
	Usage             *responsesUsage  `json:"usage"`
	Error             *responsesError  `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	ToolChoice         json.RawMessage `json:"tool_choice,omitempty"`
	Tools              []any           `json:"tools"`
	Store              bool            `json:"store"`
	PreviousResponseID *string         `json:"previous_response_id"`
}

type responsesError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type responsesUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// responsesResponder writes the Responses event stream from chat chunks.
type responsesResponder struct {
	names map[string]toolName
	base  responseObject
	seq   int

	open    string // "", "reasoning", "message", "function_call"
	item    map[string]any
	itemID  string // of item
	text    strings.Builder
	tool    int
	outputs []map[string]any
}

func (r *responsesResponder) event(w *bytes.Buffer, typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = r.seq
	r.seq++
	writeEvent(w, typ, fields)
}

// delta writes one of the delta events, the bulk of a stream, directly
// rather than marshalled: {"type", "sequence_number", "item_id",
// "output_index", ["content_index": 0,] "delta", ["logprobs": [],]}.
func (r *responsesResponder) delta(w *bytes.Buffer, typ, text string) {
	w.WriteString("event: ")
	w.WriteString(typ)
	w.WriteString("\ndata: {\"type\":\"")
	w.WriteString(typ)
	w.WriteString(`","sequence_number":`)
	w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(r.seq), 10))
	r.seq++
	w.WriteString(`,"item_id":`)
	writeJSONString(w, r.itemID)
	w.WriteString(`,"output_index":`)
	w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(len(r.outputs)), 10))
	if typ != "response.function_call_arguments.delta" {
		w.WriteString(`,"content_index":0`)
	}
	w.WriteString(`,"delta":`)
	writeJSONString(w, text)
	if typ == "response.output_text.delta" {
		w.WriteString(`,"logprobs":[]`)
	}
	w.WriteString("}\n\n")
}

func (r *responsesResponder) snapshot(status string) responseObject {
	o := r.base
	o.Status = status
	return o
}

func (r *responsesResponder) start(w *bytes.Buffer) {
	r.event(w, "response.created", map[string]any{"response": r.snapshot("in_progress")})
	r.event(w, "response.in_progress", map[string]any{"response": r.snapshot("in_progress")})
}

func (r *responsesResponder) clientName(flat string) (name, namespace string) {
	if n, ok := r.names[flat]; ok {
		return n.Name, n.Namespace
	}
	return flat, ""
}

func (r *responsesResponder) openItem(w *bytes.Buffer, kind string, item map[string]any) {
	r.closeItem(w)
	r.open, r.item = kind, item
	r.itemID, _ = item["id"].(string)
	r.text.Reset()
	r.event(w, "response.output_item.added", map[string]any{"output_index": len(r.outputs), "item": item})
	if kind == "message" {
		r.event(w, "response.content_part.added", map[string]any{"item_id": item["id"], "output_index": len(r.outputs), "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	}
}

func (r *responsesResponder) closeItem(w *bytes.Buffer) {
	if r.open == "" {
		return
	}
	idx, id, text := len(r.outputs), r.item["id"], r.text.String()
	done := map[string]any{}
	for k, v := range r.item {
		done[k] = v
	}
	switch r.open {
	case "reasoning":
		r.event(w, "response.reasoning_text.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "text": text})
		done["content"] = []any{map[string]any{"type": "reasoning_text", "text": text}}
		done["encrypted_content"] = reasoningPrefix + base64.StdEncoding.EncodeToString([]byte(text))
	case "message":
		part := map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
		r.event(w, "response.output_text.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "text": text})
		r.event(w, "response.content_part.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "part": part})
		done["content"] = []any{part}
		done["status"] = "completed"
	case "function_call":
		r.event(w, "response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": idx, "arguments": text, "name": done["name"]})
		done["arguments"] = text
		done["status"] = "completed"
	}
	r.event(w, "response.output_item.done", map[string]any{"output_index": idx, "item": done})
	r.outputs = append(r.outputs, done)
	r.open, r.item = "", nil
}

func (r *responsesResponder) chunk(w *bytes.Buffer, raw []byte, ch *chatChunk) {
	for i := range ch.Choices {
		c := &ch.Choices[i]
		if c.Index != 0 {
			continue
		}
		if t := c.Delta.reasoning(); t != "" {
			if r.open != "reasoning" {
				r.openItem(w, "reasoning", map[string]any{"type": "reasoning", "id": newID("rs_"), "summary": []any{}})
			}
			r.text.WriteString(t)
			r.delta(w, "response.reasoning_text.delta", t)
		}
		if t := c.Delta.Content; t != "" {
			if r.open != "message" {
				r.openItem(w, "message", map[string]any{"type": "message", "id": newID("msg_"), "status": "in_progress", "role": "assistant", "content": []any{}})
			}
			r.text.WriteString(t)
			r.delta(w, "response.output_text.delta", t)
		}
		for _, tc := range c.Delta.ToolCalls {
			if r.open != "function_call" || tc.Index != r.tool {
				callID := tc.ID
				if callID == "" {
					callID = newID("call_")
				}
				name, ns := r.clientName(tc.Function.Name)
				item := map[string]any{"type": "function_call", "id": newID("fc_"), "call_id": callID, "name": name, "arguments": "", "status": "in_progress"}
				if ns != "" {
					item["namespace"] = ns
				}
				r.openItem(w, "function_call", item)
				r.tool = tc.Index
			}
			if d := tc.Function.Arguments; d != "" {
				r.text.WriteString(d)
				r.delta(w, "response.function_call_arguments.delta", d)
			}
		}
	}
}

func (r *responsesResponder) completed(acc *accumulator) responseObject {
	o := r.snapshot("completed")
	o.Output = r.outputs
	if acc.FinishReason == "length" {
		o.Status = "incomplete"
		o.IncompleteDetails = &struct {
			Reason string `json:"reason"`
		}{"max_output_tokens"}
	}
	u := &responsesUsage{InputTokens: acc.Usage.PromptTokens, OutputTokens: acc.Usage.CompletionTokens}
	u.InputTokensDetails.CachedTokens = acc.Usage.cached()
	u.TotalTokens = u.InputTokens + u.OutputTokens
	o.Usage = u
	return o
}

func (r *responsesResponder) finish(w *bytes.Buffer, acc *accumulator) {
	r.closeItem(w)
	o := r.completed(acc)
	name := "response.completed"
	if o.Status == "incomplete" {
		name = "response.incomplete"
	}
	r.event(w, name, map[string]any{"response": o})
}

func (r *responsesResponder) fail(w *bytes.Buffer, ae *apiError) {
	r.closeItem(w)
	o := r.snapshot("failed")
	o.Output = r.outputs
	o.Error = &responsesError{Code: "server_error", Message: ae.Error()}
	if ae.Overflow != nil {
		o.Error = &responsesError{Code: "context_length_exceeded", Message: openAIErrorMessage(ae)}
	}
	r.event(w, "response.failed", map[string]any{"response": o})
}

// final builds the whole response by replaying the answer as one chunk
// through the streaming state machine into a discarded writer, so both
// paths produce the same items.
func (r *responsesResponder) final(acc *accumulator) ([]byte, error) {
	ch := chatChunk{Choices: []chunkChoice{{Delta: chunkDelta{ReasoningContent: acc.Reasoning.String(), Content: acc.Content.String()}}}}
	for i, tc := range acc.ToolCalls {
		d := toolCallDelta{Index: i, ID: tc.ID}
		d.Function.Name, d.Function.Arguments = tc.Function.Name, tc.Function.Arguments
		ch.Choices[0].Delta.ToolCalls = append(ch.Choices[0].Delta.ToolCalls, d)
	}
	var discard bytes.Buffer
	r.chunk(&discard, nil, &ch)
	r.closeItem(&discard)
	return json.Marshal(r.completed(acc))
}
