package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strings"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/hearth-llm/hearth/tokenizer"
)

// --- request bodies (the fields the simulated engine reads; others are
// accepted and ignored) ---

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatCompletionRequest struct {
	Model               string          `json:"model"`
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Priority            int             `json:"priority"`
	CacheSalt           *string         `json:"cache_salt"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
	ChatTemplateKwargs  map[string]any  `json:"chat_template_kwargs"`
}

type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
	MaxTokens     *int64          `json:"max_tokens"`
	Priority      int             `json:"priority"`
	CacheSalt     *string         `json:"cache_salt"`
}

type detokenizeRequest struct {
	Model  string   `json:"model"`
	Tokens []uint32 `json:"tokens"`
}

// completionDefaultMaxTokens is the OpenAI (and vLLM) default of
// /v1/completions.
const completionDefaultMaxTokens = 16

// --- response bodies ---

type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type usage struct {
	PromptTokens        int                 `json:"prompt_tokens"`
	TotalTokens         int                 `json:"total_tokens"`
	CompletionTokens    int                 `json:"completion_tokens"`
	PromptTokensDetails promptTokensDetails `json:"prompt_tokens_details"`
}

type functionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type toolCallJSON struct {
	Index    *int         `json:"index,omitempty"` // streaming only
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function functionCall `json:"function"`
}

type chatMessage struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallJSON `json:"tool_calls"`
}

type chatDelta struct {
	Role             string         `json:"role,omitempty"`
	Content          *string        `json:"content,omitempty"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallJSON `json:"tool_calls,omitempty"`
}

type chatChoice struct {
	Index        int          `json:"index"`
	Message      *chatMessage `json:"message,omitempty"`
	Delta        *chatDelta   `json:"delta,omitempty"`
	Logprobs     any          `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
	StopReason   any          `json:"stop_reason"`
}

type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *usage       `json:"usage,omitempty"`
}

type completionChoice struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
	StopReason   any     `json:"stop_reason"`
}

type completionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage,omitempty"`
}

// --- one generation ---

// generation is a request on its way through the engine.
type generation struct {
	id       string
	prompt   []uint32
	output   []uint32
	limited  bool // the answer was cut at the token limit
	tools    bool // parse tool calls out of the text
	priority int
	salt     string // cache_salt
}

// requestSalt reads a request's cache_salt, which both engines accept:
// absent, or a non-empty string (vLLM's protocol refuses an empty one).
func requestSalt(salt *string) (string, error) {
	if salt == nil {
		return "", nil
	}
	if *salt == "" {
		return "", badRequest("Parameter 'cache_salt' must be a non-empty string if provided.")
	}
	return *salt, nil
}

// checkModel rejects a model name the server does not serve, as vLLM does.
// An empty name means the served model.
func (s *Server) checkModel(name string) error {
	if name == "" || name == s.opts.ServedModelName {
		return nil
	}
	return &apiError{status: http.StatusNotFound, param: "model",
		message: fmt.Sprintf("The model `%s` does not exist.", name)}
}

// plan checks the prompt and token limit against max_model_len and fixes
// the answer's tokens: the composed text, tokenized and cut at the limit.
func (s *Server) plan(g *generation, maxTokens *int64, answer func() string) error {
	room := s.opts.MaxModelLen - len(g.prompt)
	if err := CheckContextLength(s.opts.MaxModelLen, len(g.prompt), 0); err != nil {
		return badRequest("%s", err)
	}
	limit := room
	if maxTokens != nil {
		if *maxTokens < 1 {
			return &apiError{status: http.StatusBadRequest, param: "max_tokens",
				message: fmt.Sprintf("max_tokens must be at least 1, got %d.", *maxTokens)}
		}
		if err := CheckContextLength(s.opts.MaxModelLen, len(g.prompt), *maxTokens); err != nil {
			return &apiError{status: http.StatusBadRequest, param: "max_tokens", message: err.Error()}
		}
		limit = int(*maxTokens)
	}
	out := s.opts.Tokenizer.Encode(answer())
	if len(out) == 0 {
		out = s.opts.Tokenizer.Encode(".")
	}
	if len(out) > limit {
		out, g.limited = out[:limit], true
	}
	g.output = out
	return nil
}

// tokenStream follows one request's tokens: it turns them into text safely
// (a token that ends inside a UTF-8 character waits for the next one) and
// records their times for the latency histograms.
type tokenStream struct {
	s           *Server
	ch          <-chan TokenOutput
	arrival     time.Time
	last        time.Time
	first       time.Duration
	gaps        []time.Duration
	pending     []uint32
	text        strings.Builder
	count       int
	cached      int
	hostCached  int
	storeCached int
	prompt      int
	finished    bool
}

func (s *Server) start(ctx context.Context, g *generation) (*tokenStream, error) {
	arrival := s.opts.Clock.Now()
	ch, err := s.opts.Engine.Submit(ctx, &Request{ID: g.id, Prompt: g.prompt, Output: g.output, Priority: g.priority, CacheSalt: g.salt})
	if err != nil {
		return nil, err
	}
	return &tokenStream{s: s, ch: ch, arrival: arrival, prompt: len(g.prompt)}, nil
}

// modelled converts a wall-clock interval to the modelled GPU's time.
func (s *Server) modelled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * s.opts.Speedup)
}

// next waits for the next token and returns the text it completes. ok is
// false once the request has finished or was aborted (check finished).
func (ts *tokenStream) next() (delta string, ok bool) {
	out, ok := <-ts.ch
	if !ok {
		return ts.flush(), false
	}
	now := ts.s.opts.Clock.Now()
	if ts.count == 0 {
		ts.first = ts.s.modelled(now.Sub(ts.arrival))
	} else {
		ts.gaps = append(ts.gaps, ts.s.modelled(now.Sub(ts.last)))
	}
	ts.last = now
	ts.count++
	ts.cached, ts.hostCached, ts.storeCached = out.CachedTokens, out.HostCachedTokens, out.StoreCachedTokens
	if out.PromptTokens > 0 {
		ts.prompt = out.PromptTokens
	}
	ts.pending = append(ts.pending, out.Token)
	if out.Finished {
		ts.finished = true
		ts.s.metrics.observeRequest(finishedRequest{
			queued: out.QueueTime, firstToken: ts.first, total: ts.s.modelled(now.Sub(ts.arrival)), gaps: ts.gaps,
			prompt: ts.prompt, generated: ts.count, cached: ts.cached, hostCached: ts.hostCached, storeCached: ts.storeCached,
		})
		return ts.flush(), true
	}
	piece := ts.s.opts.Tokenizer.Decode(ts.pending)
	if strings.HasSuffix(piece, "\uFFFD") {
		return "", true // wait for the rest of the character
	}
	ts.pending = ts.pending[:0]
	ts.text.WriteString(piece)
	return piece, true
}

func (ts *tokenStream) flush() string {
	if len(ts.pending) == 0 {
		return ""
	}
	piece := ts.s.opts.Tokenizer.Decode(ts.pending)
	ts.pending = ts.pending[:0]
	ts.text.WriteString(piece)
	return piece
}

// drain reads the stream to its end.
func (ts *tokenStream) drain() {
	for {
		if _, ok := ts.next(); !ok {
			return
		}
	}
}

func (ts *tokenStream) usage() *usage {
	return &usage{PromptTokens: ts.prompt, CompletionTokens: ts.count, TotalTokens: ts.prompt + ts.count,
		PromptTokensDetails: promptTokensDetails{CachedTokens: ts.cached}}
}

// errEngineGone answers a request whose token channel closed early while
// the client was still there: the engine stopped.
var errEngineGone = &apiError{status: http.StatusServiceUnavailable, message: "the engine stopped before the request finished"}

// --- /v1/chat/completions ---

func (s *Server) handleChatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatCompletionRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	g, err := s.prepareChat(&req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	ts, err := s.start(r.Context(), g)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if req.Stream {
		s.streamChat(w, r, g, ts, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	ts.drain()
	if !ts.finished {
		if r.Context().Err() == nil {
			s.writeError(w, errEngineGone)
		}
		return
	}
	parsed := splitAnswer(ts.text.String(), g.tools, true)
	msg := &chatMessage{Role: "assistant", ToolCalls: []toolCallJSON{}}
	if parsed.Content != "" || len(parsed.Calls) == 0 {
		msg.Content = &parsed.Content
	}
	if parsed.Reasoning != "" {
		msg.ReasoningContent = &parsed.Reasoning
	}
	for i, c := range parsed.Calls {
		msg.ToolCalls = append(msg.ToolCalls, toolCallJSON{ID: toolCallID(g.id, i), Type: "function",
			Function: functionCall{Name: c.Name, Arguments: c.Arguments}})
	}
	finish := finishReason(g, parsed)
	writeJSON(w, http.StatusOK, chatResponse{
		ID: g.id, Object: "chat.completion", Created: ts.arrival.Unix(), Model: s.opts.ServedModelName,
		Choices: []chatChoice{{Message: msg, FinishReason: &finish}},
		Usage:   ts.usage(),
	})
}

func finishReason(g *generation, parsed parsedAnswer) string {
	switch {
	case len(parsed.Calls) > 0:
		return "tool_calls"
	case g.limited:
		return "length"
	}
	return "stop"
}

func toolCallID(requestID string, i int) string {
	return fmt.Sprintf("chatcmpl-tool-%s-%d", strings.TrimPrefix(requestID, "chatcmpl-"), i)
}

// chatMessageHead is what the answer needs to know of each message.
type chatMessageHead struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []struct {
		Function functionCall `json:"function"`
	} `json:"tool_calls"`
}

// agentMessages turns the request's messages into what the simulated agent
// reads.
func agentMessages(msgs []chatMessageHead) []agentMessage {
	out := make([]agentMessage, len(msgs))
	for i, m := range msgs {
		out[i] = agentMessage{Role: m.Role, Text: m.text()}
		for _, c := range m.ToolCalls {
			out[i].ToolCalls = append(out[i].ToolCalls, toolCall{Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
	}
	return out
}

// text returns the message's text: its content string, or its text parts.
func (m chatMessageHead) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// textOnly matches a turn that tells the model to answer without tools, as
// Claude Code's compaction request does ("Respond with TEXT ONLY. Do NOT
// call any tools."). A model follows that; an agent whose summary comes
// back as a tool call fails its compaction.
var textOnly = regexp.MustCompile(`(?i)\btext only\b|\bdo not (call|use) (any )?tools?\b`)

type chatToolJSON struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// prepareChat validates a chat request, renders and tokenizes its prompt and
// decides the answer.
func (s *Server) prepareChat(req *chatCompletionRequest) (*generation, error) {
	if err := s.checkModel(req.Model); err != nil {
		return nil, err
	}
	var msgs []chatMessageHead
	if err := json.Unmarshal(req.Messages, &msgs); err != nil || len(msgs) == 0 {
		return nil, &apiError{status: http.StatusBadRequest, param: "messages",
			message: "messages must be a non-empty array of message objects"}
	}
	tools, err := parseTools(req.Tools)
	if err != nil {
		return nil, err
	}
	choice, forced, err := parseToolChoice(req.ToolChoice, tools)
	if err != nil {
		return nil, err
	}
	prompt, err := s.renderChat(req.Messages, req.Tools, req.AddGenerationPrompt, req.ChatTemplateKwargs)
	if err != nil {
		return nil, err
	}
	salt, err := requestSalt(req.CacheSalt)
	if err != nil {
		return nil, err
	}
	g := &generation{id: s.requestID("chatcmpl"), prompt: prompt, priority: req.Priority, salt: salt, tools: len(tools) > 0 && choice != "none"}
	conv := readConversation(agentMessages(msgs))
	spec := answerSpec{
		Seed:         seedFor(s.opts.Seed, prompt),
		Tools:        tools,
		ForcedTool:   forced,
		Thinking:     req.ChatTemplateKwargs["enable_thinking"] == true,
		Conversation: &conv,
		Agent:        s.opts.Agent,
	}
	// An agent's task: a few tool calls, each answered by its result, then
	// a final answer. The number of calls is fixed per task (seeded by its
	// user message), so every turn of the task agrees on it. A turn that
	// asks for text only gets text.
	switch choice {
	case "required":
		spec.ToolCall = true
	case "auto":
		last := msgs[len(msgs)-1]
		budget := s.opts.Agent.toolCallBudget(conv.TaskSeed ^ uint64(s.opts.Seed)*0x9e3779b97f4a7c15)
		spec.ToolCall = conv.ToolTurns < budget && !textOnly.MatchString(last.text())
	}
	spec.ToolCall = spec.ToolCall && len(tools) > 0
	maxTokens := req.MaxCompletionTokens
	if maxTokens == nil {
		maxTokens = req.MaxTokens
	}
	if err := s.plan(g, maxTokens, func() string { return composeAnswer(spec) }); err != nil {
		return nil, err
	}
	return g, nil
}

// renderChat applies the chat template and tokenizes the result.
func (s *Server) renderChat(messages, tools json.RawMessage, addGenerationPrompt *bool, kwargs map[string]any) ([]uint32, error) {
	cr := tokenizer.ChatRequest{Messages: messages, AddGenerationPrompt: true, Kwargs: kwargs}
	if addGenerationPrompt != nil {
		cr.AddGenerationPrompt = *addGenerationPrompt
	}
	if t := bytes.TrimSpace(tools); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		cr.Tools = tools
	}
	text, err := s.opts.Tokenizer.ApplyChatTemplate(cr)
	if err != nil {
		return nil, badRequest("chat template: %v", err)
	}
	return s.opts.Tokenizer.Encode(text), nil
}

func parseTools(raw json.RawMessage) ([]toolSpec, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil, nil
	}
	var tools []chatToolJSON
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, &apiError{status: http.StatusBadRequest, param: "tools", message: fmt.Sprintf("invalid tools: %v", err)}
	}
	out := make([]toolSpec, 0, len(tools))
	for i, t := range tools {
		if t.Function.Name == "" {
			return nil, &apiError{status: http.StatusBadRequest, param: "tools",
				message: fmt.Sprintf("tools[%d] has no function name", i)}
		}
		out = append(out, toolSpec{Name: t.Function.Name, Parameters: t.Function.Parameters})
	}
	return out, nil
}

// parseToolChoice returns "none", "auto" or "required", and the index of
// the named tool when tool_choice names one (-1 otherwise).
func parseToolChoice(raw json.RawMessage, tools []toolSpec) (string, int, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return "auto", -1, nil
	}
	var word string
	if json.Unmarshal(raw, &word) == nil {
		switch word {
		case "none", "auto", "required":
			return word, -1, nil
		}
		return "", -1, &apiError{status: http.StatusBadRequest, param: "tool_choice",
			message: fmt.Sprintf("tool_choice %q is not one of none, auto, required", word)}
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Function.Name == "" {
		return "", -1, &apiError{status: http.StatusBadRequest, param: "tool_choice", message: "invalid tool_choice"}
	}
	for i, t := range tools {
		if t.Name == named.Function.Name {
			return "required", i, nil
		}
	}
	return "", -1, &apiError{status: http.StatusBadRequest, param: "tool_choice",
		message: fmt.Sprintf("tool_choice names %q, which is not in tools", named.Function.Name)}
}

// sse writes server-sent events and flushes each one.
type sse struct {
	w       http.ResponseWriter
	flusher http.Flusher
	err     error
	buf     []byte // the event being written
}

// newSSE starts a stream. The headers go out at once, before the first
// token, as vLLM's server sends them.
func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	if f != nil {
		f.Flush()
	}
	return &sse{w: w, flusher: f}
}

// send writes v as one event. It is marshalled with goccy/go-json, which
// writes what encoding/json writes at a fraction of its cost: a chunk per
// token is most of what a fast simulated engine does.
func (e *sse) send(v any) {
	if e.err != nil {
		return
	}
	b, err := gojson.Marshal(v)
	if err != nil {
		e.err = err
		return
	}
	e.raw(b)
}

func (e *sse) raw(data []byte) {
	if e.err != nil {
		return
	}
	e.buf = append(append(append(e.buf[:0], "data: "...), data...), "\n\n"...)
	if _, err := e.w.Write(e.buf); err != nil {
		e.err = err // the client is gone; its context aborts the request
		return
	}
	if e.flusher != nil {
		e.flusher.Flush()
	}
}

// grow returns what cur adds to prev, or "" when cur does not extend it.
func grow(prev, cur string) string {
	if len(cur) > len(prev) && strings.HasPrefix(cur, prev) {
		return cur[len(prev):]
	}
	return ""
}

func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, g *generation, ts *tokenStream, includeUsage bool) {
	out := newSSE(w)
	chunk := func(delta chatDelta, finish *string) chatResponse {
		return chatResponse{ID: g.id, Object: "chat.completion.chunk", Created: ts.arrival.Unix(),
			Model: s.opts.ServedModelName, Choices: []chatChoice{{Delta: &delta, FinishReason: finish}}}
	}
	// vLLM names the role in a chunk of its own when the engine's first
	// output arrives, right before that output's text.
	roleSent := false
	sendRole := func() {
		if !roleSent {
			roleSent = true
			empty := ""
			out.send(chunk(chatDelta{Role: "assistant", Content: &empty}, nil))
		}
	}

	var sent parsedAnswer // what the client has been sent so far
	emit := func(cur parsedAnswer) {
		sendRole()
		if d := grow(sent.Reasoning, cur.Reasoning); d != "" {
			out.send(chunk(chatDelta{ReasoningContent: &d}, nil))
			sent.Reasoning = cur.Reasoning
		}
		if d := grow(sent.Content, cur.Content); d != "" {
			out.send(chunk(chatDelta{Content: &d}, nil))
			sent.Content = cur.Content
		}
	}
	for {
		_, ok := ts.next()
		if !ok {
			break
		}
		if !ts.finished {
			emit(splitAnswer(ts.text.String(), g.tools, false))
		}
	}
	if !ts.finished {
		// Aborted: the client left (nothing to tell) or the engine stopped.
		if r.Context().Err() == nil {
			b, _ := json.Marshal(map[string]any{"error": map[string]any{
				"message": errEngineGone.message, "type": errorType(errEngineGone.status), "param": nil, "code": errEngineGone.status}})
			out.raw(b)
		}
		return
	}
	final := splitAnswer(ts.text.String(), g.tools, true)
	emit(final)
	for i, c := range final.Calls {
		index := i
		out.send(chunk(chatDelta{ToolCalls: []toolCallJSON{{Index: &index, ID: toolCallID(g.id, i), Type: "function",
			Function: functionCall{Name: c.Name}}}}, nil))
		out.send(chunk(chatDelta{ToolCalls: []toolCallJSON{{Index: &index, Function: functionCall{Arguments: c.Arguments}}}}, nil))
	}
	finish := finishReason(g, final)
	out.send(chunk(chatDelta{}, &finish))
	if includeUsage {
		out.send(chatResponse{ID: g.id, Object: "chat.completion.chunk", Created: ts.arrival.Unix(),
			Model: s.opts.ServedModelName, Choices: []chatChoice{}, Usage: ts.usage()})
	}
	out.raw([]byte("[DONE]"))
}

// --- /v1/completions ---

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if err := s.checkModel(req.Model); err != nil {
		s.writeError(w, err)
		return
	}
	prompt, err := s.completionPrompt(req.Prompt)
	if err != nil {
		s.writeError(w, err)
		return
	}
	salt, err := requestSalt(req.CacheSalt)
	if err != nil {
		s.writeError(w, err)
		return
	}
	g := &generation{id: s.requestID("cmpl"), prompt: prompt, priority: req.Priority, salt: salt}
	maxTokens := req.MaxTokens
	if maxTokens == nil {
		def := int64(min(completionDefaultMaxTokens, max(1, s.opts.MaxModelLen-len(prompt))))
		maxTokens = &def
	}
	spec := answerSpec{Seed: seedFor(s.opts.Seed, prompt), ForcedTool: -1}
	if err := s.plan(g, maxTokens, func() string { return " " + composeAnswer(spec) }); err != nil {
		s.writeError(w, err)
		return
	}
	ts, err := s.start(r.Context(), g)
	if err != nil {
		s.writeError(w, err)
		return
	}
	finish := "stop"
	if g.limited {
		finish = "length"
	}
	if !req.Stream {
		ts.drain()
		if !ts.finished {
			if r.Context().Err() == nil {
				s.writeError(w, errEngineGone)
			}
			return
		}
		writeJSON(w, http.StatusOK, completionResponse{
			ID: g.id, Object: "text_completion", Created: ts.arrival.Unix(), Model: s.opts.ServedModelName,
			Choices: []completionChoice{{Text: ts.text.String(), FinishReason: &finish}},
			Usage:   ts.usage(),
		})
		return
	}
	out := newSSE(w)
	chunk := func(text string, finish *string) completionResponse {
		return completionResponse{ID: g.id, Object: "text_completion", Created: ts.arrival.Unix(),
			Model: s.opts.ServedModelName, Choices: []completionChoice{{Text: text, FinishReason: finish}}}
	}
	for {
		delta, ok := ts.next()
		if !ok {
			break
		}
		if ts.finished {
			out.send(chunk(delta, &finish))
		} else if delta != "" {
			out.send(chunk(delta, nil))
		}
	}
	if !ts.finished {
		return
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		out.send(completionResponse{ID: g.id, Object: "text_completion", Created: ts.arrival.Unix(),
			Model: s.opts.ServedModelName, Choices: []completionChoice{}, Usage: ts.usage()})
	}
	out.raw([]byte("[DONE]"))
}

// completionPrompt reads a completions prompt: a string, an array of token
// ids, or a one-element array of either. Batches of prompts are refused.
func (s *Server) completionPrompt(raw json.RawMessage) ([]uint32, error) {
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return s.nonEmpty(s.opts.Tokenizer.Encode(text))
	}
	var ids []int64
	if err := json.Unmarshal(raw, &ids); err == nil {
		return s.tokenIDs(ids)
	}
	var texts []string
	if err := json.Unmarshal(raw, &texts); err == nil && len(texts) == 1 {
		return s.nonEmpty(s.opts.Tokenizer.Encode(texts[0]))
	}
	var batch [][]int64
	if err := json.Unmarshal(raw, &batch); err == nil && len(batch) == 1 {
		return s.tokenIDs(batch[0])
	}
	if len(texts) > 1 || len(batch) > 1 {
		return nil, &apiError{status: http.StatusBadRequest, param: "prompt",
			message: "the simulated engine takes one prompt per request, not a batch"}
	}
	return nil, &apiError{status: http.StatusBadRequest, param: "prompt",
		message: "prompt must be a string or an array of token ids"}
}

func (s *Server) tokenIDs(ids []int64) ([]uint32, error) {
	out := make([]uint32, len(ids))
	for i, id := range ids {
		if id < 0 || id > math.MaxUint32 {
			return nil, &apiError{status: http.StatusBadRequest, param: "prompt",
				message: fmt.Sprintf("token id %d is out of vocabulary", id)}
		}
		out[i] = uint32(id)
	}
	return s.nonEmpty(out)
}

func (s *Server) nonEmpty(ids []uint32) ([]uint32, error) {
	if len(ids) == 0 {
		return nil, &apiError{status: http.StatusBadRequest, param: "prompt", message: "prompt cannot be empty"}
	}
	return ids, nil
}

// --- /tokenize, /detokenize ---

func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	var req detokenizeRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if err := s.checkModel(req.Model); err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Prompt string `json:"prompt"`
	}{s.opts.Tokenizer.Decode(req.Tokens)})
}
