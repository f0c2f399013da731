package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hearth-llm/hearth/tokenizer"
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

// accumulator collects a whole answer from the chunks of choice 0.
type accumulator struct {
	ID           string
	Model        string
	Created      int64
	Content      strings.Builder
	Reasoning    strings.Builder
	ToolCalls    []toolCall
	FinishReason string
	Usage        chunkUsage
	HaveUsage    bool
}

func (a *accumulator) add(ch *chatChunk) {
	if a.ID == "" {
		a.ID, a.Model, a.Created = ch.ID, ch.Model, ch.Created
	}
	if ch.Usage != nil {
		a.Usage, a.HaveUsage = *ch.Usage, true
	}
	for i := range ch.Choices {
		c := &ch.Choices[i]
		if c.Index != 0 {
			continue
		}
		a.Content.WriteString(c.Delta.Content)
		a.Content.WriteString(c.Text)
		a.Reasoning.WriteString(c.Delta.reasoning())
		for _, tc := range c.Delta.ToolCalls {
			for len(a.ToolCalls) <= tc.Index && tc.Index < 1024 {
				a.ToolCalls = append(a.ToolCalls, toolCall{Type: "function"})
			}
			if tc.Index < 0 || tc.Index >= len(a.ToolCalls) {
				continue
			}
			t := &a.ToolCalls[tc.Index]
			if tc.ID != "" {
				t.ID = tc.ID
			}
			if tc.Function.Name != "" {
				t.Function.Name = tc.Function.Name
			}
			t.Function.Arguments += tc.Function.Arguments
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			a.FinishReason = *c.FinishReason
		}
	}
}

// assistantMessage is the answer as a message of the conversation, for the
// next turn (speculative prefill, stored responses).
func (a *accumulator) assistantMessage() chatMessage {
	m := textMessage("assistant", a.Content.String())
	m.ReasoningContent = a.Reasoning.String()
	m.ToolCalls = a.ToolCalls
	return m
}

// errClientGone marks a failed write to the client.
var errClientGone = errors.New("client went away")

// exchange is one request in flight to one worker.
type exchange struct {
	g        *Gateway
	req      *engineRequest
	id       string
	route    Route
	resp     *http.Response
	cancel   context.CancelFunc
	started  time.Time
	prompt   int // prompt tokens by our count
	acc      accumulator
	first    bool
	released sync.Once
	status   int // reported in metrics

	// For the traffic record.
	arrived time.Time
	client  string
	hashes  []tokenizer.SeqHash
	ttft    time.Duration
}

// dispatch routes the request and opens the engine's stream. A worker that
// refuses the connection or fails before answering is excluded and the
// router is asked once more.
func (g *Gateway) dispatch(ctx context.Context, rr RouteRequest, path string, body []byte) (*exchange, error) {
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		route, err := g.router.Route(ctx, rr)
		if err != nil {
			if lastErr != nil && errors.Is(err, ErrNoWorker) {
				return nil, lastErr
			}
			if errors.Is(err, ErrQueueFull) {
				return nil, &apiError{Status: http.StatusTooManyRequests, Message: "all workers are busy; retry later", RetryAfter: int(g.cfg.RetryAfter.Round(time.Second) / time.Second)}
			}
			return nil, fmt.Errorf("route: %w", err)
		}
		upCtx, cancel := context.WithCancel(context.Background())
		hreq, err := http.NewRequestWithContext(upCtx, http.MethodPost, strings.TrimRight(route.BaseURL, "/")+path, bytes.NewReader(body))
		if err != nil {
			cancel()
			g.router.Done(rr.ID)
			return nil, fmt.Errorf("worker %s: %w", route.WorkerID, err)
		}
		hreq.Header.Set("Content-Type", "application/json")
		hreq.Header.Set("Accept", "text/event-stream")
		hreq.Header.Set("X-Request-Id", rr.ID)
		resp, err := g.client.Do(hreq)
		if err == nil && resp.StatusCode == http.StatusOK {
			return &exchange{g: g, id: rr.ID, route: route, resp: resp, cancel: cancel, started: time.Now(), prompt: rr.PromptTokens, status: http.StatusOK}, nil
		}
		if err == nil {
			msg := engineErrorMessage(resp.Body)
			resp.Body.Close()
			if overflow := engineOverflow(msg); overflow != nil && resp.StatusCode == http.StatusBadRequest {
				err = overflow
			} else {
				err = &apiError{Status: resp.StatusCode, Message: "engine: " + msg}
			}
		}
		cancel()
		g.router.Done(rr.ID)
		var ae *apiError
		if errors.As(err, &ae) && ae.Status < 500 {
			return nil, ae // the request itself is bad; another worker would say the same
		}
		g.log.Warn("worker failed before answering", "worker", route.WorkerID, "request", rr.ID, "error", err)
		g.metrics.retries.Inc()
		lastErr = &apiError{Status: http.StatusBadGateway, Message: fmt.Sprintf("worker %s failed: %v", route.WorkerID, err)}
		rr.Exclude = append(rr.Exclude, route.WorkerID)
	}
	return nil, lastErr
}

// engineErrorMessage extracts the message of an engine's error body.
func engineErrorMessage(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	var v struct {
		Message string `json:"message"`
		Error   *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &v) == nil {
		if v.Error != nil && v.Error.Message != "" {
			return v.Error.Message
		}
		if v.Message != "" {
			return v.Message
		}
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 512 {
		s = s[:512]
	}
	if s == "" {
		s = "no details"
	}
	return s
}

// setRouteHeaders tells the client where its request went.
func (ex *exchange) setRouteHeaders(c *fiber.Ctx) {
	c.Set("x-hearth-worker", ex.route.WorkerID)
	c.Set("x-hearth-cached-blocks", strconv.Itoa(ex.route.OverlapBlocks))
	c.Set("x-hearth-prompt-blocks", strconv.Itoa(ex.route.PromptBlocks))
	if ex.route.Policy != "" {
		c.Set("x-hearth-policy", ex.route.Policy)
	}
	c.Set("x-request-id", ex.id)
}

// release ends the exchange: the engine request is cancelled (a no-op when
// it finished) and the router told. Safe to call more than once.
func (ex *exchange) release() {
	ex.released.Do(func() {
		ex.cancel()
		ex.resp.Body.Close()
		ex.record() // before Done, so that whoever waits for Done finds it
		ex.g.router.Done(ex.id)
		ex.g.metrics.observe(ex.req.Dialect, ex.status, time.Since(ex.started))
	})
}

// record adds the finished exchange to the gateway's traffic record.
func (ex *exchange) record() {
	r := RequestRecord{
		ID: ex.id, At: ex.arrived, SessionID: ex.req.SessionID, Client: ex.client,
		Worker: ex.route.WorkerID, Status: ex.status, PromptTokens: ex.prompt, TTFT: ex.ttft,
	}
	if ex.acc.HaveUsage {
		if ex.acc.Usage.PromptTokens > 0 {
			r.PromptTokens = ex.acc.Usage.PromptTokens
		}
		r.CachedTokens = ex.acc.Usage.cached()
		r.OutputTokens = ex.acc.Usage.CompletionTokens
	}
	ex.g.traffic.Record(r, ex.hashes, time.Now())
}

// read consumes the engine's SSE stream, calling fn for every chunk with its
// raw JSON. It returns nil at the end of a complete stream.
func (ex *exchange) read(fn func(raw []byte, ch *chatChunk) error) error {
	br := bufio.NewReaderSize(ex.resp.Body, 32<<10)
	var long []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && (err != io.EOF || len(line) == 0) {
			if err == io.EOF {
				if ex.acc.FinishReason != "" {
					return nil // an engine that ends without [DONE]
				}
				return errors.New("engine closed the stream before finishing")
			}
			return fmt.Errorf("engine stream: %w", err)
		}
		data, ok := sseData(line)
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			return nil
		}
		var ch chatChunk
		if err := json.Unmarshal(data, &ch); err != nil {
			return fmt.Errorf("engine sent a malformed chunk: %w", err)
		}
		if err := ch.streamError(); err != nil {
			return err
		}
		if !ex.first {
			ex.first = true
			ex.g.router.FirstToken(ex.id)
			ex.ttft = time.Since(ex.arrived)
			ex.g.metrics.ttft.WithLabelValues(ex.req.Dialect.String()).Observe(time.Since(ex.started).Seconds())
		}
		ex.acc.add(&ch)
		if fn != nil {
			if err := fn(data, &ch); err != nil {
				return err
			}
		}
	}
}

// sseData returns the payload of a "data:" line.
func sseData(line []byte) ([]byte, bool) {
	line = bytes.TrimRight(line, "\r\n")
	if !bytes.HasPrefix(line, []byte("data:")) {
		return nil, false
	}
	d := bytes.TrimPrefix(line[5:], []byte(" "))
	return d, len(d) > 0
}

// responder writes an answer in one client dialect.
type responder interface {
	// start writes what precedes the first chunk (e.g. message_start).
	start(w *bufio.Writer) error
	chunk(w *bufio.Writer, raw []byte, ch *chatChunk) error
	finish(w *bufio.Writer, acc *accumulator) error
	// fail ends a stream that broke after it began.
	fail(w *bufio.Writer, ae *apiError)
	// final is the whole answer of a non-streaming request.
	final(acc *accumulator) ([]byte, error)
}

// forward sends req to a worker and answers the client through rs.
func (g *Gateway) forward(c *fiber.Ctx, req *engineRequest, rs func(ex *exchange) responder) error {
	creq, err := req.chatRequest()
	if err != nil {
		return writeError(c, req.Dialect, err)
	}
	_, ids, err := g.tok.EncodeChat(creq)
	if err != nil {
		return writeError(c, req.Dialect, badRequestf("messages", "cannot render the chat template: %v", err))
	}
	if g.cfg.ContextTokens > 0 && len(ids) >= g.cfg.ContextTokens {
		// Said here rather than by the engine so that every dialect gets the
		// wording its clients act on (see writeFailure).
		return g.writeFailure(c, req, rs, errContextOverflow(len(ids), g.cfg.ContextTokens))
	}
	maxTokens := g.clampMaxTokens(req.MaxTokens, len(ids))
	body, err := req.body(req.Messages, maxTokens, true)
	if err != nil {
		return writeError(c, req.Dialect, err)
	}
	return g.forwardBody(c, req, "/v1/chat/completions", body, ids, rs)
}

// forwardBody routes an already built engine body and relays the answer.
func (g *Gateway) forwardBody(c *fiber.Ctx, req *engineRequest, path string, body []byte, ids []uint32, rs func(ex *exchange) responder) error {
	arrived := time.Now()
	rr := RouteRequest{
		ID: newID("req_"), Model: req.Model, PromptTokens: len(ids),
		Hashes:    blockHashes(ids, g.cfg.BlockSize),
		SessionID: req.SessionID, Session: req.Session, Hints: req.Hints, Policy: req.Policy,
	}
	ex, err := g.dispatch(c.UserContext(), rr, path, body)
	if err != nil {
		return g.writeFailure(c, req, rs, err)
	}
	ex.req = req
	ex.arrived, ex.client, ex.hashes = arrived, clientKind(c), rr.Hashes
	ex.setRouteHeaders(c)
	if len(req.DroppedTools) > 0 {
		c.Set("x-hearth-dropped-tools", strings.Join(req.DroppedTools, ","))
	}
	r := rs(ex)
	if !req.ClientStream {
		defer ex.release()
		if err := ex.read(nil); err != nil {
			ex.status = http.StatusBadGateway
			return writeError(c, req.Dialect, &apiError{Status: http.StatusBadGateway, Message: err.Error()})
		}
		out, err := r.final(&ex.acc)
		if err != nil {
			ex.status = http.StatusInternalServerError
			return writeError(c, req.Dialect, err)
		}
		g.afterAnswer(ex)
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(out)
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no")
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) { g.relay(ex, r, w) })
	return nil
}

// writeFailure answers a request that failed before an engine answered. A
// prompt too long for the context goes to a streaming Responses client as a
// response.failed event with code context_length_exceeded: that is the only
// form in which Codex recognises it, marks its context full and compacts
// (dropping the oldest items while even the compaction request does not
// fit); a plain 400 just fails the turn.
func (g *Gateway) writeFailure(c *fiber.Ctx, req *engineRequest, rs func(ex *exchange) responder, err error) error {
	ae := toAPIError(err)
	g.metrics.observe(req.Dialect, ae.Status, 0)
	if ae.Overflow == nil || req.Dialect != dialectResponses || !req.ClientStream {
		return writeError(c, req.Dialect, ae)
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	r := rs(&exchange{req: req})
	if err := r.start(w); err != nil {
		return writeError(c, req.Dialect, ae)
	}
	r.fail(w, ae)
	if err := w.Flush(); err != nil {
		return writeError(c, req.Dialect, ae)
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	return c.Send(buf.Bytes())
}

// relay copies the engine's stream to the client. A failed write means the
// client went away: the engine request is cancelled at once. While the engine
// is silent (a long prefill), SSE comments go out every KeepAlive so that a
// vanished client is noticed then too.
func (g *Gateway) relay(ex *exchange, r responder, w *bufio.Writer) {
	defer ex.release()
	var (
		mu      sync.Mutex // guards w between the relay and the keep-alive
		gone    atomic.Bool
		written atomic.Bool // something was written since the last tick
	)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(g.cfg.KeepAlive)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if written.Swap(false) {
					continue
				}
				mu.Lock()
				_, err := w.WriteString(": keep-alive\n\n")
				if err == nil {
					err = w.Flush()
				}
				mu.Unlock()
				if err != nil {
					gone.Store(true)
					ex.cancel()
					return
				}
			}
		}
	}()
	defer func() { close(stop); <-stopped }()
	write := func(fn func() error) error {
		mu.Lock()
		defer mu.Unlock()
		written.Store(true)
		if fn() != nil || w.Flush() != nil {
			gone.Store(true)
			return errClientGone
		}
		return nil
	}

	err := write(func() error { return r.start(w) })
	if err == nil {
		err = ex.read(func(raw []byte, ch *chatChunk) error {
			return write(func() error { return r.chunk(w, raw, ch) })
		})
	}
	if gone.Load() {
		err = errClientGone
	}
	switch {
	case errors.Is(err, errClientGone):
		ex.status = 499 // nginx's "client closed request"
		g.metrics.clientGone.Inc()
		g.log.Debug("client went away; engine request cancelled", "request", ex.id, "worker", ex.route.WorkerID)
	case err != nil:
		ex.status = http.StatusBadGateway
		g.log.Warn("stream failed", "request", ex.id, "worker", ex.route.WorkerID, "error", err)
		_ = write(func() error { r.fail(w, &apiError{Status: http.StatusBadGateway, Message: err.Error()}); return nil })
	default:
		if write(func() error { return r.finish(w, &ex.acc) }) != nil {
			ex.status = 499
			return
		}
		g.afterAnswer(ex)
	}
}

func (g *Gateway) clampMaxTokens(asked, prompt int) int {
	n := asked
	if g.cfg.MaxOutputTokens > 0 && (n == 0 || n > g.cfg.MaxOutputTokens) {
		n = g.cfg.MaxOutputTokens
	}
	if g.cfg.ContextTokens > 0 {
		room := g.cfg.ContextTokens - prompt
		if room < 1 {
			room = 1
		}
		if n == 0 || n > room {
			n = room
		}
	}
	return n
}
