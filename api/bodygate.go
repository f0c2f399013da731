package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// bodyGate decides, when a request's headers are in and before its body is
// read, whether the body may be read at all. fasthttp reserves a body of
// the length a request announces before its first byte arrives, so a client
// that announces 32 MB and sends a byte now and then holds 32 MB for as long
// as it likes: with a wrong key, before any handler ran. The gate refuses
// the body of a /v1 request whose key is wrong, and keeps the bodies in
// flight (announced and not yet handled) under a budget shared by all
// connections. A refused request is answered in its dialect (401, or 503
// overloaded) without reading its body, and its connection is closed.
type bodyGate struct {
	budget int64 // bytes; 0: no budget

	mu       sync.Mutex
	inFlight int64
	// admitted holds each request's reservation or refusal, by its header,
	// which fasthttp keeps in place from the header's arrival to the
	// request's end; an entry goes when its request ends (release).
	admitted map[*fasthttp.RequestHeader]admission
}

type admission struct {
	bytes   int64
	refusal *apiError // nil: admitted
}

func newBodyGate(budget int64) *bodyGate {
	return &bodyGate{budget: budget, admitted: make(map[*fasthttp.RequestHeader]admission)}
}

// refusedBodySize is the body limit a refused request gets: any announced
// body is then too large, and fasthttp answers (through the error handler,
// which reads the refusal) without reading it.
const refusedBodySize = 1

// admit decides on the request whose headers h are. refuse, when it
// returns an error, refuses the body outright (a wrong key); maxBody is the
// largest body the server reads. It returns the body limit to set.
func (b *bodyGate) admit(h *fasthttp.RequestHeader, maxBody int, refuse func() *apiError) int {
	b.release(h) // a request that ended without a handler or an error
	n := int64(h.ContentLength())
	if n == -1 { // chunked: as large as it may grow
		n = int64(maxBody)
	}
	if n <= 0 {
		return maxBody // no body to hold
	}
	if ae := refuse(); ae != nil {
		b.set(h, admission{refusal: ae})
		return refusedBodySize
	}
	if n > int64(maxBody) {
		return maxBody // fasthttp's own 413
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.budget > 0 && b.inFlight+n > b.budget {
		b.admitted[h] = admission{refusal: &apiError{Status: http.StatusServiceUnavailable, RetryAfter: 1,
			Message: fmt.Sprintf("the server is receiving %d MiB of request bodies, its limit; retry shortly", b.budget>>20)}}
		return refusedBodySize
	}
	b.inFlight += n
	b.admitted[h] = admission{bytes: n}
	return maxBody
}

func (b *bodyGate) set(h *fasthttp.RequestHeader, a admission) {
	b.mu.Lock()
	b.admitted[h] = a
	b.mu.Unlock()
}

// release ends the request of h and returns what it was admitted with.
func (b *bodyGate) release(h *fasthttp.RequestHeader) admission {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.admitted[h]
	if !ok {
		return admission{}
	}
	delete(b.admitted, h)
	b.inFlight -= a.bytes
	return a
}

// held returns the body bytes admitted and not yet released.
func (b *bodyGate) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight
}

// headerReceived is the server's hook between a request's headers and its
// body: the body's deadline, and the gate.
func (g *Gateway) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	limit := g.gate.admit(h, g.cfg.MaxBodyBytes, func() *apiError { return g.earlyKeyRefusal(h) })
	return fasthttp.RequestConfig{ReadTimeout: g.cfg.BodyTimeout, MaxRequestBodySize: limit}
}

// earlyKeyRefusal is authenticate's refusal, made from the headers alone:
// a /v1 request without a valid key, when keys are required.
func (g *Gateway) earlyKeyRefusal(h *fasthttp.RequestHeader) *apiError {
	if !strings.HasPrefix(string(h.RequestURI()), "/v1/") {
		return nil
	}
	ctx := context.Background() // the request has no context yet
	if !g.KeyRequired(ctx) {
		return nil
	}
	key := requestKey(string(h.Peek("x-api-key")), string(h.Peek(fiber.HeaderAuthorization)))
	if g.validKey(ctx, key) {
		return nil
	}
	return keyRefusal(key)
}

// releaseBody is the first middleware: it ends the request's hold on the
// gate once it is handled.
func (g *Gateway) releaseBody(c *fiber.Ctx) error {
	defer g.gate.release(&c.Request().Header)
	return c.Next()
}

// handleServerError answers a request fasthttp could not read, or a
// handler's error: a body the gate refused gets the gate's refusal.
func (g *Gateway) handleServerError(c *fiber.Ctx, err error) error {
	d := dialectOf(c.Path())
	if a := g.gate.release(&c.Request().Header); a.refusal != nil && errorIs(err, fiber.ErrRequestEntityTooLarge) {
		// No middleware ran: log the request here, as logRequests would.
		l := &requestLine{start: time.Now(), method: strings.Clone(c.Method()), path: strings.Clone(c.Path()), client: clientKind(c)}
		c.Locals(requestLineKey, l)
		c.Context().SetConnectionClose()
		g.metrics.observe(d, a.refusal.Status, 0)
		werr := writeError(c, d, a.refusal)
		l.status = a.refusal.Status
		g.logLine(context.Background(), l, slog.LevelInfo)
		return werr
	}
	return writeError(c, d, err)
}

func errorIs(err error, fe *fiber.Error) bool {
	e, ok := err.(*fiber.Error)
	return ok && e.Code == fe.Code
}
