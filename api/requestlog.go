package api

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hearth-llm/hearth/router"
)

// requestLine is what the gateway says in its log of one request when the
// request ends: one line per request, so that a terminal shows traffic,
// refusals included.
type requestLine struct {
	start                      time.Time
	method, path               string
	client, session, model     string
	kind                       RequestKind // a turn of the session or a side request
	hints                      router.Hints
	origins                    HintOrigins // where each of hints came from
	worker                     string
	promptTokens, cachedTokens int
	ttft                       time.Duration
	status                     int    // 0: the response's
	reason                     string // why it failed; "" when it did not
	// streamed is set when an exchange streams the answer after the
	// handler returned: the exchange then logs the line when it ends.
	streamed bool
}

const requestLineKey = "hearth.requestLine"

// lineOf returns the request's log line, or a detached one (never logged)
// when the request came in before the logging middleware.
func lineOf(c *fiber.Ctx) *requestLine {
	if l, ok := c.Locals(requestLineKey).(*requestLine); ok {
		return l
	}
	return &requestLine{}
}

// logRequests is the outermost middleware: it logs every request once it
// ended. API requests (/v1) are logged at info, failures at warn with their
// reason, and the rest (console, health, metrics) at debug.
func (g *Gateway) logRequests(c *fiber.Ctx) error {
	l := &requestLine{start: time.Now(), method: strings.Clone(c.Method()), path: strings.Clone(c.Path())}
	api := strings.HasPrefix(l.path, "/v1/")
	if api {
		l.client = clientKind(c)
	}
	c.Locals(requestLineKey, l)
	if err := c.Next(); err != nil {
		// Answer it here, as fiber would after us, to log the status the
		// client gets.
		if herr := c.App().ErrorHandler(c, err); herr != nil {
			return herr
		}
	}
	if l.streamed {
		return nil
	}
	if l.status == 0 {
		l.status = c.Response().StatusCode()
	}
	if !api && l.status < 400 {
		if !g.log.Enabled(c.UserContext(), slog.LevelDebug) {
			return nil
		}
		g.logLine(c.UserContext(), l, slog.LevelDebug)
		return nil
	}
	g.logLine(c.UserContext(), l, slog.LevelInfo)
	return nil
}

// logLine writes l at level, or at warn when the request failed.
func (g *Gateway) logLine(ctx context.Context, l *requestLine, level slog.Level) {
	if l.status >= 400 && level < slog.LevelWarn {
		level = slog.LevelWarn
	}
	if !g.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 14)
	attrs = append(attrs, slog.String("method", l.method), slog.String("path", l.path))
	if l.client != "" {
		attrs = append(attrs, slog.String("client", l.client))
	}
	if l.session != "" {
		attrs = append(attrs, slog.String("session", l.session))
	}
	if l.kind != "" {
		attrs = append(attrs, slog.String("kind", string(l.kind)))
	}
	if l.model != "" {
		attrs = append(attrs, slog.String("model", l.model))
	}
	if h := FormatHints(l.hints, l.origins); h != "" {
		attrs = append(attrs, slog.String("hints", h))
	}
	if l.worker != "" {
		attrs = append(attrs, slog.String("worker", l.worker),
			slog.Int("prompt_tokens", l.promptTokens), slog.Int("cached_tokens", l.cachedTokens),
			slog.Int64("ttft_ms", l.ttft.Milliseconds()))
	}
	attrs = append(attrs, slog.Int("status", l.status), slog.Int64("duration_ms", time.Since(l.start).Milliseconds()))
	if l.reason != "" {
		attrs = append(attrs, slog.String("error", l.reason))
	}
	g.log.LogAttrs(ctx, level, "request", attrs...)
}

// noteRequest puts what the gateway parsed of a request on its log line,
// and names the served model in the answer's x-hearth-model header (the
// body names the model as the client did; see the package doc).
func noteRequest(c *fiber.Ctx, req *engineRequest) {
	l := lineOf(c)
	l.session, l.model = req.SessionID, req.Model
	c.Set(headerModel, req.Model)
}

// headerModel names the served model that answered.
const headerModel = "x-hearth-model"

// logEnd fills the request's line from the finished exchange and, when
// the answer was streamed after the handler returned, logs it.
func (ex *exchange) logEnd(r RequestRecord) {
	l := ex.logLine
	if l == nil {
		return
	}
	l.worker, l.promptTokens, l.cachedTokens, l.ttft, l.status = r.Worker, r.PromptTokens, r.CachedTokens, r.TTFT, r.Status
	if l.streamed {
		ex.g.logLine(context.Background(), l, slog.LevelInfo)
	}
}
