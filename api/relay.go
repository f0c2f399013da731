package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	json "github.com/goccy/go-json"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fastjson"

	"github.com/hearth-llm/hearth/tokenizer"
)

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

// errClientGone is the cause of a request's cancellation when its client
// went away.
var errClientGone = errors.New("client went away")

// engineLineBuffer is the read buffer of an engine stream: an SSE line of a
// chunk is a few hundred bytes, and a longer one is gathered in
// exchange.long.
const engineLineBuffer = 1 << 10

var lineReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, engineLineBuffer) }}

// exchange is one request in flight to one worker.
type exchange struct {
	g        *Gateway
	req      *engineRequest
	id       string
	route    Route
	ctx      context.Context // ends when the request is released or its client goes away
	watch    *clientWatch    // nil in tests that build an exchange by hand
	body     io.ReadCloser   // the engine's answer
	lines    *bufio.Reader   // over body
	long     []byte          // a line longer than lines' buffer
	parser   *fastjson.Parser
	chunk    chatChunk // the latest, decoded; its slices are reused
	started  time.Time
	prompt   int // prompt tokens by our count
	acc      accumulator
	first    bool
	complete bool // [DONE] was read
	released sync.Once
	status   int // reported in metrics

	// For the traffic record.
	arrived time.Time
	client  string
	kind    RequestKind
	parent  string   // the session that started this one (a subagent), or ""
	ids     []uint32 // the prompt's tokens
	hashes  []tokenizer.SeqHash
	ttft    time.Duration
	oe      outputEstimate // the expected output the request was routed with
	logLine *requestLine   // the request's log line; nil in tests that build an exchange by hand
}

// dispatch routes the request and opens the engine's stream. A worker that
// refuses the connection or fails before answering is excluded and the
// router is asked once more. ctx bounds the routing and the engine request.
func (g *Gateway) dispatch(ctx context.Context, rr RouteRequest, path string, body []byte) (*exchange, error) {
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		route, err := g.router.Route(ctx, rr)
		if err != nil {
			if context.Cause(ctx) == errClientGone {
				return nil, errClientGone // it waited in the queue, and its client left
			}
			if lastErr != nil && errors.Is(err, ErrNoWorker) {
				return nil, lastErr
			}
			if errors.Is(err, ErrQueueFull) {
				return nil, &apiError{Status: http.StatusTooManyRequests, Message: "all workers are busy; retry later", RetryAfter: int(g.cfg.RetryAfter.Round(time.Second) / time.Second)}
			}
			return nil, fmt.Errorf("route: %w", err)
		}
		hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(route.BaseURL, "/")+path, bytes.NewReader(body))
		if err != nil {
			g.router.Free(rr.ID)
			return nil, fmt.Errorf("worker %s: %w", route.Worker, err)
		}
		hreq.Header.Set("Content-Type", "application/json")
		hreq.Header.Set("Accept", "text/event-stream")
		hreq.Header.Set("X-Request-Id", rr.ID)
		resp, err := g.client.do(ctx, hreq)
		if err == nil && resp.StatusCode == http.StatusOK {
			return &exchange{g: g, id: rr.ID, route: route, ctx: ctx, body: resp.Body, started: time.Now(), prompt: rr.PromptTokens, status: http.StatusOK}, nil
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
		g.router.Free(rr.ID)
		if context.Cause(ctx) == errClientGone {
			return nil, errClientGone
		}
		var ae *apiError
		if errors.As(err, &ae) && ae.Status < 500 {
			return nil, ae // the request itself is bad; another worker would say the same
		}
		g.log.Warn("worker failed before answering", "worker", route.Worker, "request", rr.ID, "error", err)
		g.metrics.retries.Inc()
		lastErr = &apiError{Status: http.StatusBadGateway, Message: fmt.Sprintf("worker %s failed: %v", route.Worker, err)}
		rr.Exclude = append(rr.Exclude, route.Worker)
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
	c.Set("x-hearth-worker", ex.route.Worker)
	if ex.g.revealsCache(c) {
		c.Set("x-hearth-cached-blocks", strconv.Itoa(ex.route.CachedBlocks))
		c.Set("x-hearth-tier-blocks", tierBlocksHeader(ex.route))
	}
	c.Set("x-hearth-prompt-blocks", strconv.Itoa(ex.route.PromptBlocks))
	if ex.route.Policy != "" {
		c.Set("x-hearth-policy", ex.route.Policy)
	}
	if v := ex.oe.header(); v != "" {
		c.Set("x-hearth-osl", v)
	}
	c.Set("x-request-id", ex.id)
}

// tierBlocksHeader is the x-hearth-tier-blocks value: the prompt blocks the
// worker holds on its GPU, then loads from host RAM, then from its node's
// SSD, e.g. "gpu=12,ram=4,ssd=0".
func tierBlocksHeader(r Route) string {
	var b [64]byte
	s := append(b[:0], "gpu="...)
	s = strconv.AppendInt(s, int64(r.CachedBlocks), 10)
	s = append(s, ",ram="...)
	s = strconv.AppendInt(s, int64(r.RAMBlocks), 10)
	s = append(s, ",ssd="...)
	s = strconv.AppendInt(s, int64(r.DiskBlocks), 10)
	return string(s)
}

// clientGone reports whether the request ended because its client left.
func (ex *exchange) clientGone() bool {
	return ex.ctx != nil && context.Cause(ex.ctx) == errClientGone
}

// release ends the exchange: the engine request is cancelled (a no-op when
// it finished) and the router told. Safe to call more than once.
func (ex *exchange) release() {
	ex.released.Do(func() {
		if ex.complete {
			ex.drain()
		}
		// Closing a body read to its end gives the connection back; any
		// other is closed, which ends the engine's request. Only then is
		// the context ended, which would close the connection.
		ex.body.Close()
		if ex.watch != nil {
			ex.watch.stop()
		}
		if ex.lines != nil {
			ex.lines.Reset(nil)
			lineReaders.Put(ex.lines)
			chunkParsers.Put(ex.parser)
			ex.lines, ex.parser = nil, nil
		}
		ex.record() // before Free, so that whoever waits for Free finds it
		ex.g.router.Free(ex.id)
		ex.g.metrics.observe(ex.req.Dialect, ex.status, time.Since(ex.started))
	})
}

// drain reads what follows [DONE], the end of the chunked body, so that
// the connection goes back to the pool: closing a body before its end
// closes the connection, and the next request would pay for a new one. An
// engine that keeps the stream open after [DONE] is cut off after
// drainTimeout, give or take Config.ClientCheck.
func (ex *exchange) drain() {
	if ex.watch != nil {
		ex.watch.stopAfter(drainTimeout)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(ex.lines, 64<<10))
}

const drainTimeout = time.Second

// record adds the finished exchange to the gateway's traffic record.
func (ex *exchange) record() {
	r := RequestRecord{
		ID: ex.id, At: ex.arrived, SessionID: ex.req.SessionID, ParentSession: ex.parent, Client: ex.client, Kind: ex.kind,
		Worker: ex.route.Worker, Status: ex.status, PromptTokens: ex.prompt, TTFT: ex.ttft,
		Hints: ex.req.Hints, HintOrigins: ex.req.HintOrigins,
	}
	if ex.acc.HaveUsage {
		if ex.acc.Usage.PromptTokens > 0 {
			r.PromptTokens = ex.acc.Usage.PromptTokens
		}
		r.CachedTokens = ex.acc.Usage.cached()
		r.CacheReported = ex.acc.Usage.PromptTokensDetails != nil
		r.OutputTokens = ex.acc.Usage.CompletionTokens
	}
	ex.learnOutput(&r)
	ex.g.traffic.Record(r, ex.ids, ex.hashes, time.Now())
	ex.logEnd(r)
}

// next returns the engine's next chunk, as raw JSON and decoded, and adds it
// to the accumulated answer; both are valid until the next call. At the end
// of a complete stream it returns io.EOF.
func (ex *exchange) next() ([]byte, *chatChunk, error) {
	if ex.lines == nil {
		ex.lines = lineReaders.Get().(*bufio.Reader)
		ex.lines.Reset(ex.body)
		ex.parser = chunkParsers.Get()
	}
	for {
		line, err := ex.line()
		if err != nil && (err != io.EOF || len(line) == 0) {
			switch {
			case ex.clientGone():
				return nil, nil, errClientGone
			case err != io.EOF:
				return nil, nil, fmt.Errorf("engine stream: %w", err)
			case ex.acc.FinishReason != "":
				return nil, nil, io.EOF // an engine that ends without [DONE]
			default:
				return nil, nil, errors.New("engine closed the stream before finishing")
			}
		}
		data, ok := sseData(line)
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			ex.complete = true
			return nil, nil, io.EOF
		}
		ch := &ex.chunk
		if err := decodeChunk(ex.parser, data, ch); err != nil {
			return nil, nil, fmt.Errorf("engine sent a malformed chunk: %w", err)
		}
		if err := ch.streamError(); err != nil {
			return nil, nil, err
		}
		if !ex.first {
			ex.first = true
			ex.g.router.PrefillDone(ex.id)
			ex.ttft = time.Since(ex.arrived)
			ex.g.metrics.ttft.WithLabelValues(ex.req.Dialect.String()).Observe(time.Since(ex.started).Seconds())
		}
		ex.acc.add(ch)
		return data, ch, nil
	}
}

// line reads the engine's next line.
func (ex *exchange) line() ([]byte, error) {
	line, err := ex.lines.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	ex.long = append(ex.long[:0], line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = ex.lines.ReadSlice('\n')
		ex.long = append(ex.long, line...)
	}
	return ex.long, err
}

// pending reports whether a whole data line has already been received, so
// that next would not wait for the engine: in the line reader, or below it
// in what the engine connection read ahead (the engine's next chunks, in
// HTTP chunked framing, whose size lines are not data lines). The blank
// line that ends every SSE event, and comments, do not count: next skips
// them and would wait.
func (ex *exchange) pending() bool {
	b, _ := ex.lines.Peek(ex.lines.Buffered())
	if hasDataLine(b) {
		return true
	}
	if eb, ok := ex.body.(*engineBody); ok {
		return hasDataLine(eb.conn.readAhead())
	}
	return false
}

// hasDataLine reports whether b holds a whole SSE data line.
func hasDataLine(b []byte) bool {
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return false
		}
		if _, ok := sseData(b[:i+1]); ok {
			return true
		}
		b = b[i+1:]
	}
}

// read consumes the rest of the engine's stream, calling fn, when set, for
// every chunk. It returns nil at the end of a complete stream.
func (ex *exchange) read(fn func(raw []byte, ch *chatChunk) error) error {
	for {
		raw, ch, err := ex.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if fn != nil {
			if err := fn(raw, ch); err != nil {
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
	start(w *bytes.Buffer)
	chunk(w *bytes.Buffer, raw []byte, ch *chatChunk)
	finish(w *bytes.Buffer, acc *accumulator)
	// fail ends a stream that broke after it began.
	fail(w *bytes.Buffer, ae *apiError)
	// final is the whole answer of a non-streaming request.
	final(acc *accumulator) ([]byte, error)
}

// forward sends req to a worker and answers the client through rs.
func (g *Gateway) forward(c *fiber.Ctx, req *engineRequest, rs func(ex *exchange) responder) error {
	noteRequest(c, req)
	if overflow := g.prompts.fitsChat(req.Messages, req.Tools); overflow != nil {
		return g.writeFailure(c, req, rs, overflow) // before rendering: too large, or it cannot fit
	}
	creq, err := req.chatRequest()
	if err != nil {
		return writeError(c, req.Dialect, err)
	}
	ctx, watch := g.watcher.watch(c.Context().Conn())
	ids, hashes, err := g.prompts.encode(ctx, req.SessionID, creq)
	watch.stop()
	if ctx.Err() != nil && err != nil && errors.Is(err, ctx.Err()) {
		return g.clientLeft(c, req.Dialect) // while its prompt was tokenized
	}
	if overflow := (*apiError)(nil); errors.As(err, &overflow) {
		return g.writeFailure(c, req, rs, overflow) // before tokenizing: it cannot fit
	} else if err != nil {
		return writeError(c, req.Dialect, badRequestf("messages", "cannot render the chat template: %v", err))
	}
	if g.cfg.ContextTokens > 0 && len(ids) >= g.cfg.ContextTokens {
		// Said here rather than by the engine so that every dialect gets the
		// wording its clients act on (see writeFailure).
		return g.writeFailure(c, req, rs, errContextOverflow(len(ids), g.cfg.ContextTokens))
	}
	if req.CacheSalt != "" {
		// The engine caches a salted prompt apart: predict its blocks
		// under the salted hashes the ingest indexes them by.
		hashes = tokenizer.SaltedBlockHashes(ids, tokenizer.DefaultBlockSize, req.CacheSalt)
	}
	maxTokens := g.capMaxTokens(c, req.MaxTokens, len(ids))
	body, err := req.body(req.Messages, maxTokens, true)
	if err != nil {
		return writeError(c, req.Dialect, err)
	}
	g.observeFirstPrompt(req, ids)
	return g.forwardBody(c, req, "/v1/chat/completions", body, ids, hashes, rs)
}

// forwardBody routes an already built engine body, whose prompt has
// the token ids ids and the block hashes hashes, and relays the answer.
func (g *Gateway) forwardBody(c *fiber.Ctx, req *engineRequest, path string, body []byte, ids []uint32, hashes []tokenizer.SeqHash, rs func(ex *exchange) responder) error {
	noteRequest(c, req)
	arrived := time.Now()
	rr := RouteRequest{
		ID: newID("req_"), Model: req.Model, PromptTokens: len(ids),
		Hashes:    hashes,
		SessionID: req.SessionID, Session: req.Session, Hints: req.Hints, Policy: req.Policy,
	}
	client := clientKind(c)
	parent := ""
	if req.Kind == KindTurn {
		g.pauses.end(req.SessionID, req.Messages) // the worker is this turn's now
		parent = g.subagents.parentOf(req.SessionID, req.Messages)
	}
	oe := g.estimateOutput(&rr, client, req)
	ctx, watch := g.watcher.watch(c.Context().Conn())
	info := exchangeInfo{req: req, watch: watch, line: lineOf(c), arrived: arrived, client: client, ids: ids, hashes: rr.Hashes, parent: parent, oe: oe}
	if req.ClientStream && g.residency != nil && g.residency.ModelState(req.Model) != modelResident {
		return g.streamAfterLoad(c, ctx, info, rr, path, body, rs)
	}
	ex, err := g.dispatch(ctx, rr, path, body)
	if err != nil {
		watch.stop()
		if errors.Is(err, errClientGone) {
			return g.clientLeft(c, req.Dialect)
		}
		return g.writeFailure(c, req, rs, err)
	}
	ex.adopt(info)
	ex.setRouteHeaders(c)
	setRequestHeaders(c, req)
	r := rs(ex)
	if !req.ClientStream {
		defer ex.release()
		if err := ex.read(nil); err != nil {
			ex.failed(err)
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
	return g.streamAnswer(c, ex, r)
}

// setRequestHeaders tells the client the hints its request was routed
// with and the tools dropped from it.
func setRequestHeaders(c *fiber.Ctx, req *engineRequest) {
	if h := FormatHints(req.Hints, req.HintOrigins); h != "" {
		c.Set(headerHints, h)
	}
	if len(req.DroppedTools) > 0 {
		c.Set("x-hearth-dropped-tools", strings.Join(req.DroppedTools, ","))
	}
}

// streamAnswer streams the answer of a routed request to its client.
func (g *Gateway) streamAnswer(c *fiber.Ctx, ex *exchange, r responder) error {
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no")
	ex.logLine.streamed = true
	c.Context().SetBodyStream(&streamBody{ex: ex, r: r}, -1)
	return nil
}

// exchangeInfo is what an exchange learns of its request once routed.
type exchangeInfo struct {
	req     *engineRequest
	watch   *clientWatch
	line    *requestLine
	arrived time.Time
	client  string
	ids     []uint32
	hashes  []tokenizer.SeqHash
	parent  string
	oe      outputEstimate
}

func (ex *exchange) adopt(i exchangeInfo) {
	ex.req, ex.watch = i.req, i.watch
	ex.arrived, ex.client, ex.ids, ex.hashes = i.arrived, i.client, i.ids, i.hashes
	ex.logLine = i.line
	ex.kind, ex.parent, ex.oe = i.req.Kind, i.parent, i.oe
	ex.logLine.kind = ex.kind
	ex.logLine.hints, ex.logLine.origins = i.req.Hints, i.req.HintOrigins
}

// modelResident is Residency.ModelState's word for a model that serves
// now.
const modelResident = "resident"

// streamAfterLoad answers a streaming request whose model is not resident
// (Residency): routing blocks while the model loads, which can take from
// a second (a wake) to a minute (a cold start). When the route comes
// within one keep-alive interval the answer goes as any other; past it the
// stream begins (200, no routing headers) with a keep-alive every interval
// in the client's dialect, an SSE comment for OpenAI's, Anthropic's ping
// event, so that neither the client nor a proxy between gives up on a
// silent connection, and the answer follows. A request that cannot be
// routed ends with the dialect's error: before the stream began, with its
// status and Retry-After; after, as the stream's error event. rs may then
// run after the handler returned c, so it must not read c.
func (g *Gateway) streamAfterLoad(c *fiber.Ctx, ctx context.Context, info exchangeInfo, rr RouteRequest, path string, body []byte, rs func(*exchange) responder) error {
	req := info.req
	done := make(chan dispatchResult, 1)
	go func() {
		ex, err := g.dispatch(ctx, rr, path, body)
		done <- dispatchResult{ex, err}
	}()
	tick := time.NewTicker(g.cfg.KeepAliveInterval)
	select {
	case d := <-done:
		tick.Stop()
		if d.err != nil {
			info.watch.stop()
			if errors.Is(d.err, errClientGone) {
				return g.clientLeft(c, req.Dialect)
			}
			return g.writeFailure(c, req, rs, d.err)
		}
		d.ex.adopt(info)
		d.ex.setRouteHeaders(c)
		setRequestHeaders(c, req)
		return g.streamAnswer(c, d.ex, rs(d.ex))
	case <-tick.C:
	}
	keepAlive := sseKeepAlive
	if req.Dialect == dialectAnthropic {
		keepAlive = anthropicPing
	}
	info.line.streamed = true
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no")
	c.Context().SetBodyStream(&waitingStream{g: g, info: info, rs: rs, done: done, tick: tick, pending: keepAlive, keepAlive: keepAlive}, -1)
	return nil
}

// The keep-alives of a stream waiting for its model: a comment line, which
// SSE clients skip, and the ping event of Anthropic's streams.
var (
	sseKeepAlive  = []byte(": keep-alive\n\n")
	anthropicPing = []byte("event: ping\ndata: {\"type\": \"ping\"}\n\n")
)

type dispatchResult struct {
	ex  *exchange
	err error
}

// waitingStream is the body of a stream that began before its request was
// routed: keep-alives until the route comes, then the answer's stream.
type waitingStream struct {
	g         *Gateway
	info      exchangeInfo
	rs        func(*exchange) responder
	done      <-chan dispatchResult
	tick      *time.Ticker
	keepAlive []byte
	pending   []byte      // to write before anything else
	stream    *streamBody // once routed
	ended     bool        // routing failed; pending holds the error event
	closed    bool
}

func (w *waitingStream) Read(p []byte) (int, error) {
	for {
		switch {
		case len(w.pending) > 0:
			n := copy(p, w.pending)
			w.pending = w.pending[n:]
			return n, nil
		case w.stream != nil:
			return w.stream.Read(p)
		case w.ended:
			return 0, io.EOF
		}
		select {
		case d := <-w.done:
			w.routed(d)
		case <-w.tick.C:
			w.pending = w.keepAlive
		}
	}
}

// routed takes the routing's outcome: the answer's stream, or the error
// event.
func (w *waitingStream) routed(d dispatchResult) {
	w.tick.Stop()
	req := w.info.req
	if d.err == nil {
		d.ex.adopt(w.info)
		w.stream = &streamBody{ex: d.ex, r: w.rs(d.ex)}
		return
	}
	w.info.watch.stop()
	w.ended = true
	// The stream is logged here: no exchange will log it.
	defer w.g.logLine(context.Background(), w.info.line, slog.LevelInfo)
	if errors.Is(d.err, errClientGone) {
		w.g.metrics.clientGone.Inc()
		w.g.metrics.observe(req.Dialect, statusClientGone, 0)
		w.info.line.status, w.info.line.reason = statusClientGone, errClientGone.Error()
		return
	}
	ae := toAPIError(d.err)
	w.g.metrics.observe(req.Dialect, ae.Status, 0)
	w.info.line.status, w.info.line.reason = ae.Status, ae.Message
	var buf bytes.Buffer
	r := w.rs(&exchange{req: req})
	if req.Dialect == dialectResponses {
		r.start(&buf) // its clients read a failure only after response.created
	}
	r.fail(&buf, ae)
	w.pending = buf.Bytes()
}

// Close is called by the server when the body is written or the client
// could not be written to. A client that left while its request waited
// ends the routing; whatever it still brings is given back.
func (w *waitingStream) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.tick.Stop()
	if w.stream != nil {
		return w.stream.Close()
	}
	if w.ended {
		return nil
	}
	w.info.watch.cancel(errClientGone)
	d := <-w.done
	w.routed(d)
	if w.stream != nil {
		return w.stream.Close()
	}
	return nil
}

// clientLeft records a request whose client went away before an answer
// began; there is nobody to answer.
func (g *Gateway) clientLeft(c *fiber.Ctx, d dialect) error {
	g.metrics.clientGone.Inc()
	g.metrics.observe(d, statusClientGone, 0)
	l := lineOf(c)
	l.status, l.reason = statusClientGone, errClientGone.Error()
	return nil
}

// statusClientGone is what metrics and the traffic record say of a request
// whose client left: nginx's "client closed request".
const statusClientGone = 499

// failed records why the engine's answer broke off.
func (ex *exchange) failed(err error) {
	if ex.logLine != nil {
		ex.logLine.reason = err.Error()
	}
	if errors.Is(err, errClientGone) {
		ex.status = statusClientGone
		ex.g.metrics.clientGone.Inc()
		ex.g.log.Debug("client went away; engine request cancelled", "request", ex.id, "worker", ex.route.Worker)
		return
	}
	ex.status = http.StatusBadGateway
	ex.g.log.Warn("stream failed", "request", ex.id, "worker", ex.route.Worker, "error", err)
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
	r := rs(&exchange{req: req})
	r.start(&buf)
	r.fail(&buf, ae)
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	return c.Send(buf.Bytes())
}

// streamBody is the body of a streamed answer. fasthttp's server pulls it
// from the client connection's own goroutine, which so reads the engine,
// translates and writes to the client with no goroutine or pipe in between.
// The server flushes after every Read, and Read returns as soon as no
// further engine chunk has been received: one write per chunk while the
// gateway keeps up, and everything that arrived together in one write (up
// to the server's buffer) when the engine sends faster than that.
type streamBody struct {
	ex   *exchange
	r    responder
	out  *bytes.Buffer // translated, not yet handed to the server
	sent bool          // start was written
	done bool          // the answer is complete, or broke off
}

// outBuffers hold what streams translated and the server has not taken
// yet: a few chunks each.
var outBuffers = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, 1<<10)) }}

func (s *streamBody) Read(p []byte) (int, error) {
	if s.out == nil {
		s.out = outBuffers.Get().(*bytes.Buffer)
	}
	for s.out.Len() == 0 {
		if s.done {
			return 0, io.EOF
		}
		s.fill()
	}
	return s.out.Read(p)
}

// fill translates at least one engine chunk into out, waiting for it, and
// then every chunk that is already buffered.
func (s *streamBody) fill() {
	ex := s.ex
	if !s.sent {
		s.sent = true
		s.r.start(s.out)
		if s.out.Len() > 0 {
			return // e.g. message_start goes out before the engine's first token
		}
	}
	for {
		raw, ch, err := ex.next()
		switch {
		case err == io.EOF:
			s.r.finish(s.out, &ex.acc)
			s.done = true
			ex.g.afterAnswer(ex)
			return
		case err != nil:
			ex.failed(err)
			if ex.status != statusClientGone {
				s.r.fail(s.out, &apiError{Status: http.StatusBadGateway, Message: err.Error()})
			}
			s.done = true
			return
		}
		s.r.chunk(s.out, raw, ch)
		// A chunk that carries nothing to show waits for the next one:
		// vLLM writes its role-only first chunk right before the first
		// token's, and one write to the client is cheaper than two.
		if s.out.Len() > 0 && !ex.pending() && !ch.bare() {
			return
		}
	}
}

// Close is called by the server when the body is written or the client
// could not be written to.
func (s *streamBody) Close() error {
	if !s.done {
		s.done = true
		s.ex.failed(errClientGone)
	}
	s.ex.release()
	if s.out != nil && s.out.Cap() <= 64<<10 {
		s.out.Reset()
		outBuffers.Put(s.out)
	}
	s.out = nil
	return nil
}

// capMaxTokens is the max_tokens sent to the engine for a prompt of prompt
// tokens (see clampMaxTokens). When it is less than the client asked for,
// the answer's x-hearth-max-tokens-capped header says so, as "asked->sent":
// agents ask for more than a local context leaves (Claude Code 32000 or
// 64000 whatever the model) and expect the room left, not an error.
func (g *Gateway) capMaxTokens(c *fiber.Ctx, asked, prompt int) int {
	n := g.clampMaxTokens(asked, prompt)
	if asked > 0 && n < asked {
		c.Set(headerMaxTokensCapped, strconv.Itoa(asked)+"->"+strconv.Itoa(n))
	}
	return n
}

// headerMaxTokensCapped reports a max_tokens the gateway lowered.
const headerMaxTokensCapped = "x-hearth-max-tokens-capped"

// clampMaxTokens lowers asked (0: the client did not say) to
// Config.MaxOutputTokens and to the room the context leaves after the
// prompt; a prompt that leaves no room is refused before this.
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
