package api

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	json "github.com/goccy/go-json"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hearth-llm/hearth/netguard"
)

// Gateway is Hearth's HTTP surface. Create it with New, serve it with Run or
// Serve.
type Gateway struct {
	cfg     Config
	router  Router
	tok     Tokenizer
	store   ResponseStore
	log     *slog.Logger
	client  *engineClient
	models  modelResolver
	metrics *metrics
	app     *fiber.App
	keys    KeyChecker
	traffic *Traffic
	prompts *prompts
	watcher *clientWatcher
	gate    *bodyGate
	open    openClients
	osl     OutputLengths // nil: no estimates
	// residency, with models on demand, says which models are resident;
	// nil: all are.
	residency Residency

	pauses    *toolPauses    // sessions in a tool pause
	subagents *subagentLinks // sessions started by another session's call

	background sync.WaitGroup // speculative prefills
	closing    chan struct{}
	closeOnce  sync.Once

	mu      sync.Mutex
	warning string
}

// New builds a gateway. cfg is validated; deps.Router and deps.Tokenizer are
// required.
func New(cfg Config, deps Deps) (*Gateway, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Router == nil || deps.Tokenizer == nil {
		return nil, errors.New("api: router and tokenizer are required")
	}
	g := &Gateway{
		cfg: cfg, router: deps.Router, tok: deps.Tokenizer, store: deps.Store,
		log: deps.Logger, client: newEngineClient(), models: newModelResolver(cfg),
		closing: make(chan struct{}), keys: deps.Keys, traffic: deps.Traffic,
		prompts: newPrompts(deps.Tokenizer, cfg.ConversationSessions, cfg.ContextTokens),
		watcher: newClientWatcher(cfg.ClientCheck), gate: newBodyGate(cfg.MaxBodyBytesInFlight), pauses: newToolPauses(max(cfg.ConversationSessions, 64)),
		subagents: newSubagentLinks(256),
		osl:       deps.OutputLengths, residency: deps.Residency,
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	if deps.Models != nil {
		g.models = deps.Models.r
	}
	if g.traffic == nil {
		g.traffic = NewTraffic(TrafficLimits{})
	}
	g.log = g.log.With("component", "api")
	reg := deps.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	g.metrics = m
	g.app = g.newApp(reg, deps.Mount)
	return g, nil
}

// App returns the fiber application, e.g. to mount more routes before serving.
func (g *Gateway) App() *fiber.App { return g.app }

// Run listens on Config.Addr and serves until ctx ends.
func (g *Gateway) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", g.cfg.Addr)
	if err != nil {
		return fmt.Errorf("api: listen: %w", err)
	}
	return g.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then shuts down gracefully: streams in
// flight may finish for up to 10 seconds and background prefills are
// cancelled. ln is capped at Config.MaxConns and never fails on a
// temporary accept error (netguard); Config.TLS, when set, goes above.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	g.checkExposure(ctx, ln.Addr())
	ln = netguard.Listen(ln, netguard.Config{MaxConns: g.cfg.MaxConns, Logger: g.log})
	if g.cfg.TLS != nil {
		ln = tls.NewListener(ln, g.cfg.TLS)
	}
	g.background.Add(1)
	go func() {
		defer g.background.Done()
		g.watcher.run(g.closing)
	}()
	errc := make(chan error, 1)
	go func() { errc <- g.app.Listener(ln) }()
	select {
	case err := <-errc:
		g.stopBackground()
		if err != nil {
			return fmt.Errorf("api: serve: %w", err)
		}
		return nil
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := g.app.ShutdownWithContext(shutCtx)
	// A shutdown that came before the listener started serving finds nothing
	// to stop, and the server would then serve forever: closing the listener
	// ends it in every case.
	ln.Close()
	g.stopBackground()
	<-errc
	if err != nil {
		return fmt.Errorf("api: shutdown: %w", err)
	}
	return nil
}

func (g *Gateway) stopBackground() {
	g.closeOnce.Do(func() { close(g.closing) })
	g.background.Wait()
	g.client.closeIdle()
}

// SecurityWarning is non-empty when the gateway listens beyond loopback
// without API keys; the console shows it.
func (g *Gateway) SecurityWarning() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.warning
}

// checkExposure warns when the API listens beyond loopback and no key,
// neither of Config.APIKeys nor of Deps.Keys (where the daemon puts
// --api-key next to the console's keys), is needed to use it.
func (g *Gateway) checkExposure(ctx context.Context, addr net.Addr) {
	if g.KeyRequired(ctx) {
		return
	}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || tcp.IP.IsLoopback() {
		return
	}
	w := fmt.Sprintf("the API listens on %s with no API key: anyone who can reach this address can use the GPUs", addr)
	g.mu.Lock()
	g.warning = w
	g.mu.Unlock()
	g.log.Warn("!!! " + w + " !!! set an API key or listen on 127.0.0.1")
}

func (g *Gateway) newApp(reg *prometheus.Registry, mount func(fiber.Router)) *fiber.App {
	app := fiber.New(fiber.Config{
		AppName:               "hearth",
		DisableStartupMessage: true,
		BodyLimit:             g.cfg.MaxBodyBytes,
		// fasthttp's read timeout runs from a connection's start (or a
		// kept one's next request) through the headers; the body gets
		// BodyTimeout more once they are in (HeaderReceived below), and
		// the answer none (streams).
		ReadTimeout:  g.cfg.HeaderTimeout,
		IdleTimeout:  g.cfg.IdleTimeout,
		ErrorHandler: g.handleServerError,
		// A multipart body would be read (into memory, then files) before
		// any handler or key check; the API takes none.
		DisablePreParseMultipartForm: true,
	})
	app.Server().HeaderReceived = g.headerReceived
	app.Use(g.releaseBody)
	app.Use(endReadDeadline)
	app.Use(g.logRequests)
	app.Use(refuseAmbiguousFraming)
	app.Get("/health", func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"status": "ok"})
	})
	if mount != nil {
		mount(app) // before the root's answer, which a mount may take over
	}
	// Claude Code probes the root with HEAD before its first request.
	app.Get("/", func(c *fiber.Ctx) error { return c.SendString("hearth") })
	app.Get("/metrics", g.guardMetrics, adaptor.HTTPHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))

	v1 := app.Group("/v1", g.authenticate)
	v1.Get("/models", g.handleModels)
	v1.Post("/chat/completions", g.handleChatCompletions)
	v1.Post("/completions", g.handleCompletions)
	v1.Post("/responses", g.handleResponses)
	v1.Post("/messages", g.handleMessages)
	v1.Post("/messages/count_tokens", g.handleCountTokens)
	app.Use(func(c *fiber.Ctx) error {
		return writeError(c, dialectOf(c.Path()), &apiError{Status: http.StatusNotFound, Message: fmt.Sprintf("no route for %s %s", c.Method(), c.Path())})
	})
	return app
}

// endReadDeadline lifts the read deadline of a request that has been read:
// the client watcher peeks at the connection while the answer is made,
// and a peek past a deadline would count the client as gone. fasthttp sets
// the idle deadline again before the next request.
func endReadDeadline(c *fiber.Ctx) error {
	if conn := c.Context().Conn(); conn != nil {
		_ = conn.SetReadDeadline(time.Time{})
	}
	return c.Next()
}

// dialectOf picks the error dialect from the path, for errors raised before
// a handler runs.
func dialectOf(path string) dialect {
	switch {
	case strings.HasPrefix(path, "/v1/messages"):
		return dialectAnthropic
	case strings.HasPrefix(path, "/v1/responses"):
		return dialectResponses
	default:
		return dialectOpenAI
	}
}

// KeyRequired reports whether /v1 requests need an API key right now:
// when Config.APIKeys or Deps.Keys holds one.
func (g *Gateway) KeyRequired(ctx context.Context) bool {
	if len(g.cfg.APIKeys) > 0 {
		return true
	}
	if g.keys == nil {
		return false
	}
	has, err := g.keys.HasKeys(ctx)
	return err != nil || has
}

// Traffic returns the gateway's record of recent requests and sessions.
func (g *Gateway) Traffic() *Traffic { return g.traffic }

// authenticate checks the API key when keys are configured. Without keys
// on a loopback listener it still refuses what a web page could send
// (refuseWebPages).
func (g *Gateway) authenticate(c *fiber.Ctx) error {
	if !g.KeyRequired(c.UserContext()) {
		if err := refuseWebPages(c); err != nil {
			return writeError(c, dialectOf(c.Path()), err)
		}
		g.open.note(lineOf(c).client, time.Now())
		return c.Next()
	}
	key := requestKey(c.Get("x-api-key"), c.Get(fiber.HeaderAuthorization))
	if g.validKey(c.UserContext(), key) {
		return c.Next()
	}
	d := dialectOf(c.Path())
	g.metrics.observe(d, http.StatusUnauthorized, 0)
	return writeError(c, d, keyRefusal(key))
}

// isAdminKey reports whether key is an admin key: a command-line key, or
// a stored key AdminKeyChecker vouches for.
func (g *Gateway) isAdminKey(ctx context.Context, key string) bool {
	if key == "" {
		return false
	}
	for _, k := range g.cfg.APIKeys {
		if subtle.ConstantTimeCompare([]byte(key), []byte(k)) == 1 {
			return true
		}
	}
	admin, ok := g.keys.(AdminKeyChecker)
	return ok && admin.IsAdminKey(ctx, key)
}

// revealsCache reports whether a request may be told how much of its
// prompt the engines held (x-hearth-cached-blocks, x-hearth-tier-blocks).
// Block by block, those counts tell whether another client's prompt
// starts with a guessed text; with keys required, only an admin key,
// which may read every session anyway, gets them.
func (g *Gateway) revealsCache(c *fiber.Ctx) bool {
	if !g.KeyRequired(c.UserContext()) {
		return true
	}
	return g.isAdminKey(c.UserContext(), requestKey(c.Get("x-api-key"), c.Get(fiber.HeaderAuthorization)))
}

// validKey reports whether key opens /v1: a configured key, or one the
// key store knows.
func (g *Gateway) validKey(ctx context.Context, key string) bool {
	for _, k := range g.cfg.APIKeys {
		if subtle.ConstantTimeCompare([]byte(key), []byte(k)) == 1 {
			return true
		}
	}
	return key != "" && g.keys != nil && g.keys.CheckKey(ctx, key) == nil
}

// keyRefusal is the 401 for a request that carried key.
func keyRefusal(key string) *apiError {
	msg := "invalid API key"
	if key == "" {
		msg = "missing API key (Authorization: Bearer or x-api-key)"
	}
	return &apiError{Status: http.StatusUnauthorized, Message: msg}
}

// requestKey is the API key a request carries: x-api-key (Anthropic's
// clients), else an Authorization: Bearer token (OpenAI's); "" for none.
func requestKey(xAPIKey, authorization string) string {
	if key := strings.TrimSpace(xAPIKey); key != "" {
		return key
	}
	const scheme = "bearer "
	if len(authorization) > len(scheme) && strings.EqualFold(authorization[:len(scheme)], scheme) {
		return strings.TrimSpace(authorization[len(scheme):])
	}
	return ""
}

// guardMetrics lets /metrics be read from this machine without a key,
// and from elsewhere only with an admin key (a command-line key, or a
// stored key AdminKeyChecker vouches for): the metrics name models,
// clients' load and the host's GPUs.
func (g *Gateway) guardMetrics(c *fiber.Ctx) error {
	if ip := c.Context().RemoteIP(); ip != nil && ip.IsLoopback() && loopbackHost(string(c.Request().Host())) {
		return c.Next()
	}
	if g.isAdminKey(c.UserContext(), requestKey(c.Get("x-api-key"), c.Get(fiber.HeaderAuthorization))) {
		return c.Next()
	}
	return c.Status(http.StatusUnauthorized).JSON(fiber.Map{"error": "/metrics from another machine needs an admin API key (Authorization: Bearer)"})
}

// loopbackHost reports whether a Host header names this machine, so that
// a page whose name was rebound to 127.0.0.1 gets no loopback privilege.
// refuseWebPages guards the keyless API on a loopback listener against the
// pages of the user's browser. A page on another site can reach
// 127.0.0.1 through a name it controls that resolves there (DNS
// rebinding): its requests then carry that name as Host. And a
// cross-site form or fetch that needs no preflight can only send
// text/plain, form or multipart bodies. So only loopback Host names and
// JSON bodies are served; every agent client sends both.
func refuseWebPages(c *fiber.Ctx) *apiError {
	local, ok := c.Context().LocalAddr().(*net.TCPAddr)
	if !ok || !local.IP.IsLoopback() {
		return nil
	}
	if !loopbackHost(string(c.Request().Host())) {
		return &apiError{Status: http.StatusForbidden, Message: fmt.Sprintf(
			"this API listens on loopback without an API key and answers only requests addressed to localhost, 127.0.0.1 or [::1], not %q", c.Request().Host())}
	}
	if len(c.Body()) > 0 || c.Method() == fiber.MethodPost {
		mediaType, _, _ := strings.Cut(string(c.Request().Header.ContentType()), ";")
		if !strings.EqualFold(strings.TrimSpace(mediaType), fiber.MIMEApplicationJSON) {
			return &apiError{Status: http.StatusUnsupportedMediaType, Message: "request bodies must be JSON (Content-Type: application/json)"}
		}
	}
	return nil
}

func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// handleModels lists the served models. Each carries the served context
// in max_model_len, as vLLM's model card does
// (vllm/entrypoints/openai/protocol.py, ModelCard), so that a client
// (hearth launch) learns the limits it is to be told with the key it will
// use.
func (g *Gateway) handleModels(c *fiber.Ctx) error {
	type model struct {
		ID          string `json:"id"`
		Object      string `json:"object"`
		Created     int64  `json:"created"`
		OwnedBy     string `json:"owned_by"`
		MaxModelLen int    `json:"max_model_len,omitempty"`
		// State is where the model is, with models on demand: resident,
		// loading, sleeping, unloading or on disk.
		State string `json:"state,omitempty"`
		// Loading is a loading model's progress.
		Loading *modelLoad `json:"loading,omitempty"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list"}
	for _, m := range g.cfg.Models {
		entry := model{ID: m, Object: "model", OwnedBy: "hearth", MaxModelLen: g.cfg.ContextTokens}
		if g.residency != nil {
			entry.State = g.residency.ModelState(m)
			if elapsed, expected := g.residency.ModelLoad(m); elapsed > 0 || expected > 0 {
				entry.Loading = newModelLoad(elapsed, expected)
			}
		}
		out.Data = append(out.Data, entry)
	}
	return c.JSON(out)
}

// modelLoad is a loading model's progress in /v1/models: the seconds its
// load has run, the seconds it is expected to take (its last load of the
// same kind, else the catalog's estimate), and their ratio, held below 1
// until the model is resident (a load that overruns its estimate is not
// done).
type modelLoad struct {
	ElapsedSeconds  float64 `json:"elapsed_seconds"`
	ExpectedSeconds float64 `json:"expected_seconds"`
	Progress        float64 `json:"progress"`
}

func newModelLoad(elapsed, expected time.Duration) *modelLoad {
	l := &modelLoad{ElapsedSeconds: elapsed.Seconds(), ExpectedSeconds: expected.Seconds()}
	if expected > 0 {
		l.Progress = min(elapsed.Seconds()/expected.Seconds(), 0.99)
	}
	return l
}

// sessionID picks the session id of a request: an explicit nvext value, then
// one from the body, then the clients' headers.
func sessionID(c *fiber.Ctx, fromNvext, fromBody string) string {
	if fromNvext != "" {
		return fromNvext
	}
	if fromBody != "" {
		return fromBody
	}
	for _, h := range sessionHeaders {
		if v := c.Get(h); v != "" {
			return strings.Clone(v) // fiber's strings point into a reused buffer
		}
	}
	return ""
}

// afterAnswer runs what follows a complete answer, off the request's path:
// a prefill of the next turn, asked for by the client or, for a turn that
// ended in tool calls, inferred (see speculate.go).
func (g *Gateway) afterAnswer(ex *exchange) {
	if ex.req.onAnswer != nil {
		ex.req.onAnswer(&ex.acc)
	}
	if ex.kind == KindTurn {
		g.subagents.noteCalls(ex.req.SessionID, ex.acc.ToolCalls)
		if len(ex.acc.ToolCalls) > 0 && g.residency != nil {
			g.residency.ToolPause(ex.req.Model, ex.req.SessionID)
		}
	}
	switch {
	case ex.req.Hints.SpeculativePrefill && len(ex.req.Messages) > 0:
		g.speculate(ex.route, ex.req, ex.acc.assistantMessage())
	case inferSpeculativePrefill(ex):
		g.prefillToolPause(ex)
	}
}

// speculate sends the next turn's prompt (history plus this answer) with
// max_tokens 1 to the same worker, so that its KV cache holds the whole
// conversation when the client's tool call comes back.
func (g *Gateway) speculate(route Route, req *engineRequest, answer chatMessage) {
	msgs := make([]chatMessage, 0, len(req.Messages)+1)
	msgs = append(append(msgs, req.Messages...), answer)
	bg := *req
	if !g.cfg.NoInferredHints {
		bg.EnginePriority = g.enginePriority(PriorityBackground) // background work, after every turn
	}
	body, err := bg.body(msgs, 1, false)
	if err != nil {
		return
	}
	g.background.Add(1)
	go func() {
		defer g.background.Done()
		ctx, cancel := context.WithTimeout(context.Background(), g.cfg.SpeculativeTimeout)
		defer cancel()
		go func() {
			select {
			case <-g.closing:
				cancel()
			case <-ctx.Done():
			}
		}()
		g.sendPrefill(ctx, route, "/v1/chat/completions", body)
	}()
}

// newID returns prefix followed by 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// commonFields decodes the fields every dialect shares: nvext, the session
// id and the policy header. An invalid nvext is a 400 naming the field.
func (g *Gateway) commonFields(c *fiber.Ctx, req *engineRequest, raw json.RawMessage, bodySession string) error {
	nv, err := ParseNvext(raw)
	if ne := (*NvextError)(nil); errors.As(err, &ne) {
		return badRequest(ne.Field, ne.Reason)
	} else if err != nil {
		return badRequest("nvext", err.Error())
	}
	req.Hints, req.Session = nv.AgentHints, nv.SessionControl
	req.SessionID = sessionID(c, nv.SessionID, bodySession)
	req.Policy = strings.Clone(c.Get("x-hearth-policy"))
	req.Kind = requestKind(requestShapeOf(c, clientKind(c), req))
	req.HintOrigins = nv.HintsSent
	if !g.cfg.NoInferredHints {
		inferHints(&req.Hints, &req.HintOrigins, req.Kind)
	}
	req.EnginePriority = g.enginePriority(engineSidePriority(req.Hints.Priority, req.HintOrigins.Priority))
	return nil
}

// engineSidePriority is the priority an engine is told for a request. An
// inferred side request is told a turn's: the engines' priority queues
// have no bound on waiting (vLLM's also preempts the lowest first), so
// under load they starve side requests that the router's queue, bounded
// by router.Config.PriorityWait, serves late but surely. A client's own
// priority and background work reach the engines as they are.
func engineSidePriority(p int, origin HintOrigin) int {
	if origin == HintInferred && p == PrioritySide {
		return PriorityTurn
	}
	return p
}

// enginePriority is Hearth's priority p in the engines' convention
// (Config.EnginePriority); nil when they take none.
func (g *Gateway) enginePriority(p int) *int {
	if g.cfg.EnginePriority == 0 {
		return nil
	}
	p *= g.cfg.EnginePriority
	return &p
}
