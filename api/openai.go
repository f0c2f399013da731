package api

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	json "github.com/goccy/go-json"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fastjson"

	"github.com/hearth-llm/hearth/tokenizer"
)

// chatCompletionRequest is the part of an OpenAI chat request the gateway
// reads; every other field is passed to the engine untouched.
type chatCompletionRequest struct {
	Model               string            `json:"model"`
	Messages            []json.RawMessage `json:"messages"`
	Tools               json.RawMessage   `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls"`
	MaxTokens           *int              `json:"max_tokens"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	Temperature         *float64          `json:"temperature"`
	TopP                *float64          `json:"top_p"`
	TopK                *int              `json:"top_k"`
	Stop                json.RawMessage   `json:"stop"`
	Stream              bool              `json:"stream"`
	StreamOptions       *streamOptions    `json:"stream_options"`
	ChatTemplateKwargs  map[string]any    `json:"chat_template_kwargs"`
	PromptCacheKey      string            `json:"prompt_cache_key"`
	// CacheSalt isolates the request's prefix cache (vLLM and SGLang both
	// read it); it goes to the engine as sent, and the router hashes the
	// prompt with it.
	CacheSalt *string         `json:"cache_salt"`
	Nvext     json.RawMessage `json:"nvext"`
}

// chatKnownFields are read by the gateway; the rest go to the engine as sent.
var chatKnownFields = map[string]bool{
	"model": true, "messages": true, "tools": true, "tool_choice": true, "parallel_tool_calls": true,
	"max_tokens": true, "max_completion_tokens": true, "temperature": true, "top_p": true, "top_k": true,
	"stop": true, "stream": true, "stream_options": true, "chat_template_kwargs": true,
	"prompt_cache_key": true, "nvext": true,
	// Client-side bookkeeping that must not reach the engine or the prompt.
	"user": true, "metadata": true, "store": true, "service_tier": true, "safety_identifier": true,
	"prompt_cache_retention": true, "reasoning_effort": true,
}

// decodeChatCompletion turns an OpenAI chat request body into an
// engineRequest (without the parts that need the HTTP context).
func decodeChatCompletion(body []byte, models modelResolver) (*engineRequest, *chatCompletionRequest, error) {
	var in chatCompletionRequest
	if err := decodeStrict(body, &in, ""); err != nil {
		return nil, nil, err
	}
	model, err := models.resolve(in.Model)
	if err != nil {
		return nil, nil, err
	}
	if len(in.Messages) == 0 {
		return nil, nil, badRequest("messages", "must be a non-empty array")
	}
	req := &engineRequest{
		Dialect: dialectOpenAI, ClientModel: in.Model, Model: model,
		ToolChoice: compactOrNil(in.ToolChoice), ParallelToolCalls: in.ParallelToolCalls,
		Temperature: in.Temperature, TopP: in.TopP, TopK: in.TopK, Kwargs: in.ChatTemplateKwargs,
		ClientStream: in.Stream, IncludeUsage: in.StreamOptions != nil && in.StreamOptions.IncludeUsage,
	}
	switch {
	case in.MaxCompletionTokens != nil:
		req.MaxTokens = *in.MaxCompletionTokens
	case in.MaxTokens != nil:
		req.MaxTokens = *in.MaxTokens
	}
	if req.MaxTokens < 0 {
		return nil, nil, badRequest("max_tokens", "must not be negative")
	}
	if req.Stop, err = decodeStop(in.Stop, "stop"); err != nil {
		return nil, nil, err
	}
	if err := boundMessages(len(in.Messages), "messages"); err != nil {
		return nil, nil, err
	}
	for i, raw := range in.Messages {
		m, err := normaliseChatMessage(raw, fmt.Sprintf("messages[%d]", i))
		if err != nil {
			return nil, nil, err
		}
		req.Messages = append(req.Messages, m)
	}
	if err := boundToolsBytes(len(in.Tools)); err != nil {
		return nil, nil, err
	}
	if req.Tools, err = chatToolLists.get(in.Tools, func() (json.RawMessage, error) { return normaliseChatTools(in.Tools) }); err != nil {
		return nil, nil, err
	}
	if req.CacheSalt, err = cacheSalt(in.CacheSalt); err != nil {
		return nil, nil, err
	}
	req.Extra = unknownFields(body, chatKnownFields)
	return req, &in, nil
}

// cacheSalt checks a request's cache_salt as the engines do: absent, or a
// non-empty string (vLLM refuses an empty one).
func cacheSalt(salt *string) (string, error) {
	if salt == nil {
		return "", nil
	}
	if *salt == "" {
		return "", badRequest("cache_salt", "must be a non-empty string if provided")
	}
	return *salt, nil
}

// requestParsers find the fields of a request body that the gateway does
// not read.
var requestParsers fastjson.ParserPool

// unknownFields returns the top-level fields of the JSON object body whose
// names known lacks, as compact JSON; nil when there are none. The body
// was decoded once already: this pass only walks it, without copying the
// long messages and tools it skips.
func unknownFields(body []byte, known map[string]bool) map[string]json.RawMessage {
	p := requestParsers.Get()
	defer requestParsers.Put(p)
	var extra map[string]json.RawMessage
	v, err := p.ParseBytes(body)
	if err != nil {
		// Deeper than fastjson goes, say: the slow way, which agrees with
		// the decoding already done.
		var all map[string]json.RawMessage
		_ = json.Unmarshal(body, &all)
		for k, v := range all {
			if !known[k] {
				if extra == nil {
					extra = make(map[string]json.RawMessage)
				}
				extra[k] = v
			}
		}
		return extra
	}
	o, err := v.Object()
	if err != nil {
		return nil
	}
	o.Visit(func(key []byte, v *fastjson.Value) {
		name := jsonKey(key)
		if known[name] {
			return
		}
		if extra == nil {
			extra = make(map[string]json.RawMessage)
		}
		extra[name] = v.MarshalTo(nil)
	})
	return extra
}

// jsonKey is an object key as encoding/json reads it: each byte that is not
// part of valid UTF-8 becomes U+FFFD.
func jsonKey(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		sb.WriteRune(r)
		b = b[size:]
	}
	return sb.String()
}

func compactOrNil(raw json.RawMessage) json.RawMessage {
	if isNullJSON(raw) {
		return nil
	}
	return compactJSON(raw)
}

func decodeStop(raw json.RawMessage, field string) ([]string, error) {
	if isNullJSON(raw) {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest(field, "must be a string or an array of strings")
	}
	return many, nil
}

// inChatMessage is a client's chat message before normalisation.
type inChatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        *string         `json:"reasoning"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
}

// normaliseChatMessage makes a client's message stable: developer becomes
// system (the templates know no developer role), text-only part lists become
// one string (as the engine would join them), cache_control markers go.
func normaliseChatMessage(raw json.RawMessage, field string) (chatMessage, error) {
	var in inChatMessage
	if err := decodeStrict(raw, &in, field); err != nil {
		return chatMessage{}, err
	}
	m := chatMessage{Role: in.Role, ToolCallID: in.ToolCallID, Name: in.Name}
	switch in.Role {
	case "system", "user", "assistant", "tool":
	case "developer":
		m.Role = "system"
	case "":
		return m, badRequest(field+".role", "required")
	default:
		return m, badRequestf(field+".role", "unknown role %q", in.Role)
	}
	content, err := normaliseContent(in.Content, field+".content")
	if err != nil {
		return m, err
	}
	m.Content = content
	switch {
	case in.ReasoningContent != nil:
		m.ReasoningContent = *in.ReasoningContent
	case in.Reasoning != nil:
		m.ReasoningContent = *in.Reasoning
	}
	for i, tc := range in.ToolCalls {
		if tc.Function.Name == "" {
			return m, badRequest(fmt.Sprintf("%s.tool_calls[%d].function.name", field, i), "required")
		}
		args := string(compactJSON(tc.Function.Arguments))
		var s string
		if json.Unmarshal(tc.Function.Arguments, &s) == nil {
			args = s // the usual case: arguments is a JSON string
		}
		m.ToolCalls = append(m.ToolCalls, toolCall{ID: tc.ID, Type: "function", Function: toolFunction{Name: tc.Function.Name, Arguments: args}})
	}
	return m, nil
}

// normaliseContent returns content as a JSON string when it is text only,
// else as a list of parts without cache_control.
func normaliseContent(raw json.RawMessage, field string) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if isNullJSON(raw) {
		return stringJSON(""), nil
	}
	switch raw[0] {
	case '"':
		return raw, nil
	case '[':
	default:
		return nil, badRequest(field, "must be a string or an array of content parts")
	}
	var parts []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, badRequest(field, "must be a string or an array of content parts")
	}
	texts := make([]string, 0, len(parts))
	textOnly := true
	for i, p := range parts {
		delete(p, "cache_control")
		var typ string
		_ = json.Unmarshal(p["type"], &typ)
		if typ != "text" && typ != "input_text" && typ != "output_text" {
			textOnly = false
			continue
		}
		var t string
		if err := json.Unmarshal(p["text"], &t); err != nil {
			return nil, badRequest(fmt.Sprintf("%s[%d].text", field, i), "must be a string")
		}
		texts = append(texts, t)
	}
	if textOnly {
		return stringJSON(strings.Join(texts, "\n")), nil
	}
	b, err := json.Marshal(parts)
	if err != nil {
		return nil, badRequest(field, err.Error())
	}
	return b, nil
}

// normaliseChatTools checks an OpenAI tools array and returns it compacted,
// in the given order.
var chatToolLists = newMemo[json.RawMessage](64)

func normaliseChatTools(raw json.RawMessage) (json.RawMessage, error) {
	if isNullJSON(raw) {
		return nil, nil
	}
	var tools []struct {
		Type     string `json:"type"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := decodeStrict(raw, &tools, "tools"); err != nil {
		return nil, err
	}
	if len(tools) == 0 {
		return nil, nil
	}
	for i, t := range tools {
		if t.Function == nil || t.Function.Name == "" {
			return nil, badRequest(fmt.Sprintf("tools[%d].function.name", i), "required")
		}
	}
	return compactJSON(raw), nil
}

func (g *Gateway) handleChatCompletions(c *fiber.Ctx) error {
	req, in, err := decodeChatCompletion(c.Body(), g.models)
	if err != nil {
		return writeError(c, dialectOpenAI, err)
	}
	if err := g.commonFields(c, req, in.Nvext, in.PromptCacheKey); err != nil {
		return writeError(c, dialectOpenAI, err)
	}
	return g.forward(c, req, func(ex *exchange) responder {
		return &openAIChatResponder{includeUsage: req.IncludeUsage, model: req.ClientModel}
	})
}

// openAIChatResponder passes the engine's chunks through, unchanged but
// for the model's name.
type openAIChatResponder struct {
	includeUsage bool
	completions  bool // text_completion objects instead of chat ones
	// model is the name the client asked for, which the answer carries in
	// place of the served one; "" keeps the engine's.
	model string
	// served and named are the engine's "model" member and the client's,
	// as JSON, once a chunk named a model (servedName) other than the
	// client's.
	servedName    string
	served, named []byte
	parser        *fastjson.Parser // for a chunk written other than vLLM writes it
}

var (
	sseDataPrefix = []byte("data: ")
	sseEventEnd   = []byte("\n\n")
)

func (r *openAIChatResponder) start(w *bytes.Buffer) {}

func (r *openAIChatResponder) chunk(w *bytes.Buffer, raw []byte, ch *chatChunk) {
	if len(ch.Choices) == 0 && ch.Usage != nil && !r.includeUsage {
		return // the engine always reports usage; this client did not ask
	}
	w.Write(sseDataPrefix)
	r.writeRenamed(w, raw, ch.Model)
	w.Write(sseEventEnd)
}

// writeRenamed writes the chunk raw, whose model is model, with the
// client's model name in place of the served one. A chunk is JSON as vLLM
// writes it, compact and with "model" before "choices", so the member is
// found and replaced in place; any other form is decoded and written anew.
func (r *openAIChatResponder) writeRenamed(w *bytes.Buffer, raw []byte, model string) {
	if r.model == "" || model == r.model {
		w.Write(raw)
		return
	}
	if r.served == nil || model != r.servedName {
		r.servedName = model
		r.served = append([]byte(`"model":`), stringJSON(model)...)
		r.named = append([]byte(`"model":`), stringJSON(r.model)...)
	}
	if i := bytes.Index(raw, r.served); i >= 0 {
		w.Write(raw[:i])
		w.Write(r.named)
		w.Write(raw[i+len(r.served):])
		return
	}
	if r.parser == nil {
		r.parser = new(fastjson.Parser)
	}
	v, err := r.parser.ParseBytes(raw)
	if err != nil || v.Type() != fastjson.TypeObject {
		w.Write(raw) // decoded once already, so this does not happen
		return
	}
	var a fastjson.Arena
	v.Set("model", a.NewString(r.model))
	w.Write(v.MarshalTo(nil))
}

func (r *openAIChatResponder) finish(w *bytes.Buffer, acc *accumulator) {
	w.WriteString("data: [DONE]\n\n")
}

func (r *openAIChatResponder) fail(w *bytes.Buffer, ae *apiError) {
	w.Write(sseDataPrefix)
	w.Write(errorBody(dialectOpenAI, ae))
	w.Write(sseEventEnd)
}

type openAIUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func usageOf(acc *accumulator) openAIUsage {
	u := openAIUsage{PromptTokens: acc.Usage.PromptTokens, CompletionTokens: acc.Usage.CompletionTokens, TotalTokens: acc.Usage.TotalTokens}
	u.PromptTokensDetails.CachedTokens = acc.Usage.cached()
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u
}

func (r *openAIChatResponder) final(acc *accumulator) ([]byte, error) {
	model := acc.Model
	if r.model != "" {
		model = r.model
	}
	finish := acc.FinishReason
	if finish == "" {
		finish = "stop"
	}
	if r.completions {
		type choice struct {
			Index        int     `json:"index"`
			Text         string  `json:"text"`
			Logprobs     *string `json:"logprobs"`
			FinishReason string  `json:"finish_reason"`
		}
		return json.Marshal(struct {
			ID      string      `json:"id"`
			Object  string      `json:"object"`
			Created int64       `json:"created"`
			Model   string      `json:"model"`
			Choices []choice    `json:"choices"`
			Usage   openAIUsage `json:"usage"`
		}{acc.ID, "text_completion", acc.Created, model, []choice{{Text: acc.Content.String(), FinishReason: finish}}, usageOf(acc)})
	}
	type message struct {
		Role             string     `json:"role"`
		Content          *string    `json:"content"`
		ReasoningContent string     `json:"reasoning_content,omitempty"`
		ToolCalls        []toolCall `json:"tool_calls,omitempty"`
	}
	type choice struct {
		Index        int     `json:"index"`
		Message      message `json:"message"`
		Logprobs     *string `json:"logprobs"`
		FinishReason string  `json:"finish_reason"`
	}
	content := acc.Content.String()
	msg := message{Role: "assistant", Content: &content, ReasoningContent: acc.Reasoning.String(), ToolCalls: acc.ToolCalls}
	if content == "" && len(acc.ToolCalls) > 0 {
		msg.Content = nil
	}
	return json.Marshal(struct {
		ID      string      `json:"id"`
		Object  string      `json:"object"`
		Created int64       `json:"created"`
		Model   string      `json:"model"`
		Choices []choice    `json:"choices"`
		Usage   openAIUsage `json:"usage"`
	}{acc.ID, "chat.completion", acc.Created, model, []choice{{Message: msg, FinishReason: finish}}, usageOf(acc)})
}

// completionRequest is the part of a legacy completions request the gateway
// reads; the body goes to the engine otherwise unchanged.
type completionRequest struct {
	Model          string          `json:"model"`
	Prompt         json.RawMessage `json:"prompt"`
	MaxTokens      *int            `json:"max_tokens"`
	Stream         bool            `json:"stream"`
	StreamOptions  *streamOptions  `json:"stream_options"`
	PromptCacheKey string          `json:"prompt_cache_key"`
	CacheSalt      *string         `json:"cache_salt"`
	Nvext          json.RawMessage `json:"nvext"`
}

// decodeCompletion reads a completions body and the prompt's token ids.
func decodeCompletion(body []byte, models modelResolver, encode func(string) ([]uint32, error)) (*engineRequest, *completionRequest, map[string]json.RawMessage, []uint32, error) {
	var in completionRequest
	if err := decodeStrict(body, &in, ""); err != nil {
		return nil, nil, nil, nil, err
	}
	model, err := models.resolve(in.Model)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(body, &all); err != nil {
		return nil, nil, nil, nil, badRequest("body", "must be a JSON object")
	}
	var ids []uint32
	var text string
	var texts []string
	switch {
	case isNullJSON(in.Prompt):
		return nil, nil, nil, nil, badRequest("prompt", "required")
	case json.Unmarshal(in.Prompt, &text) == nil:
		ids, err = encode(text)
	case json.Unmarshal(in.Prompt, &ids) == nil:
	case json.Unmarshal(in.Prompt, &texts) == nil && len(texts) == 1:
		ids, err = encode(texts[0])
	default:
		return nil, nil, nil, nil, badRequest("prompt", "must be a string or an array of token ids (batches are not supported)")
	}
	if overflow := (*apiError)(nil); errors.As(err, &overflow) {
		overflow.Param = "prompt" // refused before it was tokenized: it cannot fit
		return nil, nil, nil, nil, overflow
	}
	req := &engineRequest{
		Dialect: dialectOpenAI, ClientModel: in.Model, Model: model, ClientStream: in.Stream,
		IncludeUsage: in.StreamOptions != nil && in.StreamOptions.IncludeUsage,
	}
	if in.MaxTokens != nil {
		if *in.MaxTokens < 0 {
			return nil, nil, nil, nil, badRequest("max_tokens", "must not be negative")
		}
		req.MaxTokens = *in.MaxTokens
	}
	if req.CacheSalt, err = cacheSalt(in.CacheSalt); err != nil {
		return nil, nil, nil, nil, err
	}
	return req, &in, all, ids, nil
}

func (g *Gateway) handleCompletions(c *fiber.Ctx) error {
	ctx, watch := g.watcher.watch(c.Context().Conn())
	req, in, all, ids, err := decodeCompletion(c.Body(), g.models, func(text string) ([]uint32, error) {
		return g.prompts.encodeText(ctx, text)
	})
	watch.stop()
	if ctx.Err() != nil && err != nil && errors.Is(err, ctx.Err()) {
		return g.clientLeft(c, dialectOpenAI) // while its prompt was tokenized
	}
	if err != nil {
		return writeError(c, dialectOpenAI, err)
	}
	if err := g.commonFields(c, req, in.Nvext, in.PromptCacheKey); err != nil {
		return writeError(c, dialectOpenAI, err)
	}
	rs := func(ex *exchange) responder {
		return &openAIChatResponder{includeUsage: req.IncludeUsage, completions: true, model: req.ClientModel}
	}
	if g.cfg.ContextTokens > 0 && len(ids) >= g.cfg.ContextTokens {
		overflow := errContextOverflow(len(ids), g.cfg.ContextTokens)
		overflow.Param = "prompt"
		return g.writeFailure(c, req, rs, overflow)
	}
	delete(all, "nvext")
	all["model"] = stringJSON(req.Model)
	all["stream"] = json.RawMessage("true")
	all["stream_options"] = json.RawMessage(`{"include_usage":true}`)
	if n := g.capMaxTokens(c, req.MaxTokens, len(ids)); n > 0 {
		all["max_tokens"] = json.RawMessage(fmt.Sprint(n))
	}
	if p := req.EnginePriority; p != nil {
		all["priority"] = json.RawMessage(strconv.Itoa(*p))
	}
	body, err := json.Marshal(all)
	if err != nil {
		return writeError(c, dialectOpenAI, err)
	}
	return g.forwardBody(c, req, "/v1/completions", body, ids, tokenizer.SaltedBlockHashes(ids, tokenizer.DefaultBlockSize, req.CacheSalt), rs)
}
