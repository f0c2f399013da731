package api

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"

	json "github.com/goccy/go-json"

	"github.com/hearth-llm/hearth/tokenizer"
)

// Prefill in the tool pause.
//
// An agent's turn that ends in a tool call is followed, after the tool has
// run, by a request that holds the whole conversation again: the history,
// the answer as the client sends it back, the tool's result. The worker
// that wrote the answer has the history cached, and the answer's tokens as
// it generated them, but the template renders the answer back differently
// (Qwen3 puts reasoning and tool calls into its own layout, and a client
// that drops reasoning or re-serialises arguments changes the text), so the
// blocks from the answer on are computed again when the next turn comes.
//
// The gateway computes them in the pause instead: it renders, with the
// model's own template, the conversation the client will send, up to where
// the tool result goes, and sends those token ids to the session's worker as
// a one-token completion. The prompt is the rendered text cut where two
// different tool results first differ, so there is no generation prompt and
// no closing of the last message that the real prompt would not have.
//
// How each client sends an answer back (echoStyle) comes from the
// recordings of the clients and from Hearth's own translation of their
// dialect: Claude Code returns thinking blocks and tool_use input objects
// (Hearth compacts them), Codex returns reasoning items (with Hearth's
// encrypted_content) and function_call arguments verbatim, OpenCode's
// AI SDK re-serialises arguments compactly. What a session's client did
// with the previous answer is learnt when its next turn arrives and used
// from then on.

// echoStyle is how a client sends an answer back in its next request, after
// Hearth's translation of the client's dialect.
type echoStyle struct {
	keepsReasoning bool // the reasoning text comes back
	compactsArgs   bool // tool arguments come back as compact JSON
}

// defaultEchoStyle is what a session's first tool pause assumes.
func defaultEchoStyle(d dialect, client string) echoStyle {
	switch d {
	case dialectAnthropic: // thinking blocks and tool_use input objects come back
		return echoStyle{keepsReasoning: true, compactsArgs: true}
	case dialectResponses: // reasoning items and arguments strings come back
		return echoStyle{keepsReasoning: true}
	}
	// OpenAI chat: clients built on the AI SDK (OpenCode) parse arguments and
	// send them back compact; a reasoning_content field is not part of the
	// OpenAI message shape, and the SDKs drop it.
	return echoStyle{compactsArgs: client == "opencode"}
}

// echo is answer as a client with style s sends it back.
func (s echoStyle) echo(answer chatMessage) chatMessage {
	m := answer
	if !s.keepsReasoning {
		m.ReasoningContent = ""
	}
	m.ToolCalls = make([]toolCall, len(answer.ToolCalls))
	for i, tc := range answer.ToolCalls {
		if s.compactsArgs && json.Valid([]byte(tc.Function.Arguments)) {
			tc.Function.Arguments = string(compactJSON([]byte(tc.Function.Arguments)))
		}
		m.ToolCalls[i] = tc
	}
	return m
}

// learnEcho reads how a client sent answer back (sent) into a style; ok is
// false when sent is not that answer.
func learnEcho(answer, sent chatMessage) (s echoStyle, ok bool) {
	if sent.Role != "assistant" || len(sent.ToolCalls) != len(answer.ToolCalls) || len(sent.ToolCalls) == 0 {
		return s, false
	}
	for i, tc := range sent.ToolCalls {
		if tc.Function.Name != answer.ToolCalls[i].Function.Name {
			return s, false
		}
	}
	s.keepsReasoning = answer.ReasoningContent == "" || sent.ReasoningContent != ""
	args := answer.ToolCalls[0].Function.Arguments
	s.compactsArgs = sent.ToolCalls[0].Function.Arguments != args &&
		sent.ToolCalls[0].Function.Arguments == string(compactJSON([]byte(args)))
	return s, true
}

// toolResultMarks are two tool results that differ in their first byte:
// where the rendered prompts part is where the real result will go.
var toolResultMarks = [2]string{"A", "Z"}

// toolPausePrompt returns the token ids of the next turn's prompt up to
// where the tool results go: history, then the answer as sent back.
func (g *Gateway) toolPausePrompt(req *engineRequest, sent chatMessage) ([]uint32, error) {
	render := g.prompts.render
	if render == nil {
		return nil, errors.New("the tokenizer cannot render a chat without encoding it")
	}
	var texts [2]string
	for i, mark := range toolResultMarks {
		msgs := make([]chatMessage, 0, len(req.Messages)+1+len(sent.ToolCalls))
		msgs = append(append(msgs, req.Messages...), sent)
		for _, tc := range sent.ToolCalls {
			msgs = append(msgs, chatMessage{Role: "tool", ToolCallID: tc.ID, Content: stringJSON(mark)})
		}
		raw, err := json.Marshal(msgs)
		if err != nil {
			return nil, err
		}
		texts[i], err = render.ApplyChatTemplate(tokenizer.ChatRequest{Messages: raw, Tools: req.Tools, Kwargs: req.Kwargs})
		if err != nil {
			return nil, err
		}
	}
	n := 0
	for n < len(texts[0]) && n < len(texts[1]) && texts[0][n] == texts[1][n] {
		n++
	}
	ids := g.tok.Encode(texts[0][:n])
	// The last token may join the result's first characters in the real
	// prompt (a newline before indented output): leave it out.
	if len(ids) > 0 {
		ids = ids[:len(ids)-1]
	}
	return ids, nil
}

// toolPause is a session's latest answer that ended in tool calls, kept
// until the session's next turn arrives.
type toolPause struct {
	answer chatMessage // as the engine wrote it
	at     int         // its index in the next turn's messages
	cancel context.CancelFunc
}

// toolPauses are the sessions waiting for their tools, and how each
// session's client sends answers back.
type toolPauses struct {
	mu      sync.Mutex
	pauses  map[string]*toolPause
	styles  map[string]echoStyle
	maxKept int
}

func newToolPauses(max int) *toolPauses {
	return &toolPauses{pauses: map[string]*toolPause{}, styles: map[string]echoStyle{}, maxKept: max}
}

// begin records session's pause and returns the style its answer comes
// back in; a pause already there (one not followed by a turn) is cancelled.
func (t *toolPauses) begin(session string, p *toolPause, def echoStyle) echoStyle {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.pauses[session]; old != nil {
		old.cancel()
	}
	if len(t.pauses) >= t.maxKept {
		for k, old := range t.pauses { // any one: sessions that left
			old.cancel()
			delete(t.pauses, k)
			break
		}
	}
	t.pauses[session] = p
	if s, ok := t.styles[session]; ok {
		return s
	}
	return def
}

// end is told that session's next turn arrived with messages: the pause's
// prefill, if still running, is cancelled (the turn needs the worker and
// will compute what is left itself) and the client's way of sending the
// answer back is learnt.
func (t *toolPauses) end(session string, messages []chatMessage) {
	if session == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pauses[session]
	if p == nil {
		return
	}
	delete(t.pauses, session)
	p.cancel()
	if p.at < len(messages) {
		if s, ok := learnEcho(p.answer, messages[p.at]); ok {
			if _, known := t.styles[session]; !known && len(t.styles) >= t.maxKept {
				clear(t.styles)
			}
			t.styles[session] = s
		}
	}
}

// inferSpeculativePrefill reports whether a turn's answer warrants a
// prefill in the tool pause that follows it, though the client asked for
// none: a turn of a session whose answer ended in tool calls.
func inferSpeculativePrefill(ex *exchange) bool {
	return !ex.g.cfg.NoInferredHints && ex.req.SessionID != "" && ex.kind == KindTurn &&
		len(ex.acc.ToolCalls) > 0 && len(ex.req.Messages) > 0
}

// prefillToolPause starts the prefill of the next turn's prompt on the
// worker that wrote the answer, at background priority; the session's next
// turn cancels it.
func (g *Gateway) prefillToolPause(ex *exchange) {
	answer := ex.acc.assistantMessage()
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.SpeculativeTimeout)
	p := &toolPause{answer: answer, at: len(ex.req.Messages), cancel: cancel}
	style := g.pauses.begin(ex.req.SessionID, p, defaultEchoStyle(ex.req.Dialect, ex.client))
	req, route := ex.req, ex.route
	g.background.Add(1)
	go func() {
		defer g.background.Done()
		defer cancel() // the pause stays: the next turn learns from it
		go func() {
			select {
			case <-g.closing:
				cancel()
			case <-ctx.Done():
			}
		}()
		ids, err := g.toolPausePrompt(req, style.echo(answer))
		if err != nil || len(ids) == 0 {
			g.log.Debug("tool pause prefill not rendered", "session", req.SessionID, "error", err)
			return
		}
		body, err := json.Marshal(completionPrefill{Model: req.Model, Prompt: ids, MaxTokens: 1,
			Priority: g.enginePriority(PriorityBackground)})
		if err != nil {
			return
		}
		g.sendPrefill(ctx, route, "/v1/completions", body)
	}()
}

// completionPrefill is the engine request of a tool pause prefill: the
// prompt as token ids, so that nothing is rendered on the engine's side.
type completionPrefill struct {
	Model     string   `json:"model"`
	Prompt    []uint32 `json:"prompt"`
	MaxTokens int      `json:"max_tokens"`
	// Priority is PriorityBackground in the engines' convention; nil
	// where they do not schedule by priority.
	Priority *int `json:"priority,omitempty"`
}

// sendPrefill posts a prefill to route's worker and counts its outcome.
func (g *Gateway) sendPrefill(ctx context.Context, route Route, path string, body []byte) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(route.BaseURL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := g.client.do(ctx, hreq)
	outcome := "ok"
	switch {
	case err != nil && ctx.Err() == context.Canceled:
		outcome = "cancelled"
	case err != nil:
		outcome = "error"
	default:
		if resp.StatusCode != http.StatusOK {
			outcome = "error"
		}
		_, _ = bytes.NewBuffer(nil).ReadFrom(http.MaxBytesReader(nil, resp.Body, 1<<20))
		resp.Body.Close()
		if ctx.Err() == context.Canceled {
			outcome = "cancelled"
		}
	}
	g.metrics.speculative.WithLabelValues(outcome).Inc()
	if outcome == "error" {
		g.log.Debug("speculative prefill failed", "worker", route.Worker, "error", err)
	}
}
