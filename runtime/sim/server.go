package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/netguard"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/tokenizer"
)

// Tokenizer turns prompts into token ids and back, and renders chat
// requests with the model's template. *tokenizer.Model implements it.
type Tokenizer interface {
	Encode(text string) []uint32
	Decode(ids []uint32) string
	ApplyChatTemplate(req tokenizer.ChatRequest) (string, error)
}

// Engine is what the HTTP server drives: a Runner, or a fake in tests.
type Engine interface {
	// Run runs the engine loop until ctx is done.
	Run(ctx context.Context) error
	// Submit queues a request; tokens arrive on the channel, which is closed
	// after the Finished output, or early when ctx is done (abort).
	Submit(ctx context.Context, req *Request) (<-chan TokenOutput, error)
	Stats() Stats
}

var (
	_ Engine    = (*Runner)(nil)
	_ Tokenizer = (*tokenizer.Model)(nil)
)

// ServerOptions configures a Server.
type ServerOptions struct {
	Engine Engine // required
	// Profile serves Go's runtime profiles (net/http/pprof) under
	// /debug/pprof/, to measure the simulator's own memory; no real
	// engine has them, so it is off unless asked for (sim-engine --pprof).
	Profile   bool
	Tokenizer Tokenizer // required
	// ServedModelName is the model id clients send and /v1/models lists.
	// Required.
	ServedModelName string
	// ModelName is the modelled model, reported as the model's root;
	// default ServedModelName.
	ModelName string
	// MaxModelLen caps prompt plus output tokens. Required.
	MaxModelLen int
	// NumGPUBlocks, BlockSize and GPUMemoryUtilization are reported by
	// vllm:cache_config_info.
	NumGPUBlocks         int
	BlockSize            int
	GPUMemoryUtilization float64
	// NumCPUBlocks is the host-RAM tier's size; when positive the engine
	// exports vLLM's external prefix-cache counters.
	NumCPUBlocks int
	// NodeStore: the engine has a node store below host RAM, also a KV
	// connector tier.
	NodeStore bool
	// Speedup is the engine's: wall time times Speedup is modelled time, the
	// unit latency histograms are kept in. Default 1.
	Speedup float64
	// Seed mixes into every answer's choice of text.
	Seed int64
	// Agent shapes the model's tool use (see AgentOptions).
	Agent AgentOptions
	// Kind is the engine kind the server plays: vLLM's metrics and health
	// (the default) or SGLang's (flavor.go).
	Kind hruntime.Kind
	// ModelPath is what the engine loaded (SGLang's model_path in
	// /server_info); default ModelName.
	ModelPath string
	// ServerInfo holds further fields of SGLang's /server_info (its
	// server arguments and scheduler info); the fields the server knows
	// itself are added to them.
	ServerInfo map[string]any
	// Version is the release the server reports as its own (vLLM's
	// /version); "": the kind's pinned release.
	Version string
	// HealthCheckTimeout bounds the one-token generation of SGLang's
	// /health_generate; default 20s, SGLang's SGLANG_HEALTH_CHECK_TIMEOUT.
	HealthCheckTimeout time.Duration
	// Sleep turns on the sleep endpoints of the kind (SleepOptions); nil:
	// the engine was started without sleep mode.
	Sleep *SleepOptions
	// Clock is the wall clock; nil means clock.Real.
	Clock  clock.Clock
	Logger *slog.Logger
}

// defaultHealthCheckTimeout is SGLang's default bound on /health_generate.
const defaultHealthCheckTimeout = 20 * time.Second

// Server is one simulated vLLM or SGLang server: the OpenAI API subset,
// /tokenize, /detokenize, /health and /metrics (SGLang flavour also
// /health_generate, /server_info and /get_model_info), in front of an
// Engine.
type Server struct {
	opts    ServerOptions
	log     *slog.Logger
	metrics *engineMetrics
	mux     *http.ServeMux
	created int64 // /v1/models "created"

	engineRunning atomic.Bool
	// starting is set while an SGLang-flavoured server warms up: /health
	// answers 503 and the API is not served yet.
	starting atomic.Bool
	nextID   atomic.Uint64
	idPrefix uint64
	sleep    *sleeper // nil without sleep mode
}

// maxBodyBytes bounds a request body. Coding agents send prompts of a few
// hundred kilobytes (tool schemas included); this leaves ample room.
const maxBodyBytes = 64 << 20

// NewServer checks opts and builds the server.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.Kind == "" {
		opts.Kind = hruntime.KindVLLM
	}
	switch {
	case opts.Engine == nil:
		return nil, errors.New("sim server: no engine")
	case opts.Tokenizer == nil:
		return nil, errors.New("sim server: no tokenizer")
	case opts.ServedModelName == "":
		return nil, errors.New("sim server: no served model name")
	case opts.MaxModelLen < 1:
		return nil, fmt.Errorf("sim server: max model len %d < 1", opts.MaxModelLen)
	}
	if opts.ModelName == "" {
		opts.ModelName = opts.ServedModelName
	}
	if opts.Speedup <= 0 {
		opts.Speedup = 1
	}
	if opts.ModelPath == "" {
		opts.ModelPath = opts.ModelName
	}
	if opts.HealthCheckTimeout <= 0 {
		opts.HealthCheckTimeout = defaultHealthCheckTimeout
	}
	opts.Clock = clock.Or(opts.Clock)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		opts:     opts,
		log:      log.With("component", "sim-server"),
		created:  opts.Clock.Now().Unix(),
		idPrefix: rand.Uint64(),
	}
	s.metrics = newEngineMetrics(opts.Kind, opts.ServedModelName, cacheInfo{
		NumGPUBlocks:         opts.NumGPUBlocks,
		BlockSize:            opts.BlockSize,
		GPUMemoryUtilization: opts.GPUMemoryUtilization,
		External:             opts.NumCPUBlocks > 0 || opts.NodeStore,
	}, opts.Engine.Stats)

	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handleChatCompletions)
	mux.HandleFunc("POST /v1/completions", s.handleCompletions)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.HandleFunc("POST /tokenize", s.handleTokenize)
	mux.HandleFunc("POST /detokenize", s.handleDetokenize)
	mux.Handle("GET /metrics", s.metrics.handler())
	if opts.Kind != hruntime.KindSGLang {
		mux.HandleFunc("GET /version", s.handleVersion)
	}
	if opts.Kind == hruntime.KindSGLang {
		mux.HandleFunc("GET /health_generate", s.handleHealthGenerate)
		mux.HandleFunc("GET /server_info", s.handleServerInfo)
		mux.HandleFunc("GET /get_server_info", s.handleDeprecatedServerInfo)
		mux.HandleFunc("GET /get_model_info", s.handleModelInfo)
		// SGLang's one tokenize handler answers both paths.
		mux.HandleFunc("POST /v1/tokenize", s.handleTokenize)
	}
	if opts.Sleep != nil {
		s.sleep = newSleeper(*opts.Sleep)
		s.registerSleep(mux)
	}
	if opts.Profile {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	s.mux = mux
	return s, nil
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// serveHTTP answers 503 while the server starts, but for the endpoints a
// starting SGLang answers itself.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if s.starting.Load() {
		switch r.URL.Path {
		case "/health", "/health_generate", "/metrics", "/server_info", "/get_server_info", "/get_model_info":
		default:
			s.writeError(w, &apiError{status: http.StatusServiceUnavailable, message: "the server is starting"})
			return
		}
	}
	if s.sleep != nil && protectedPaths[r.URL.Path] {
		ctx, done, err := s.sleep.admit(r.Context())
		if err != nil {
			s.writeError(w, err)
			return
		}
		defer done()
		r = r.WithContext(ctx)
	}
	s.mux.ServeHTTP(w, r)
}

// Run runs the engine loop and serves HTTP on ln until ctx is done or either
// fails. /health answers 503 unless the engine loop is running.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	g, ctx := errgroup.WithContext(ctx)
	srv := netguard.Server(&http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	})
	g.Go(func() error {
		s.engineRunning.Store(true)
		defer s.engineRunning.Store(false)
		if err := s.opts.Engine.Run(ctx); err != nil {
			return fmt.Errorf("sim server: engine: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		s.log.Info("serving the OpenAI API", "addr", ln.Addr().String(), "model", s.opts.ServedModelName)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("sim server: serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		// Streams end by themselves: the stopped engine closes every token
		// channel. The grace period only covers slow writers.
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			srv.Close()
		}
		return nil
	})
	return g.Wait()
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	if !s.engineRunning.Load() || s.starting.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	type permission struct {
		ID                 string  `json:"id"`
		Object             string  `json:"object"`
		Created            int64   `json:"created"`
		AllowCreateEngine  bool    `json:"allow_create_engine"`
		AllowSampling      bool    `json:"allow_sampling"`
		AllowLogprobs      bool    `json:"allow_logprobs"`
		AllowSearchIndices bool    `json:"allow_search_indices"`
		AllowView          bool    `json:"allow_view"`
		AllowFineTuning    bool    `json:"allow_fine_tuning"`
		Organization       string  `json:"organization"`
		Group              *string `json:"group"`
		IsBlocking         bool    `json:"is_blocking"`
	}
	type card struct {
		ID          string       `json:"id"`
		Object      string       `json:"object"`
		Created     int64        `json:"created"`
		OwnedBy     string       `json:"owned_by"`
		Root        string       `json:"root"`
		Parent      *string      `json:"parent"`
		MaxModelLen int          `json:"max_model_len"`
		Permission  []permission `json:"permission"`
	}
	writeJSON(w, http.StatusOK, struct {
		Object string `json:"object"`
		Data   []card `json:"data"`
	}{"list", []card{{
		ID: s.opts.ServedModelName, Object: "model", Created: s.created, OwnedBy: string(s.opts.Kind),
		Root: s.opts.ModelName, MaxModelLen: s.opts.MaxModelLen,
		Permission: []permission{{
			ID: fmt.Sprintf("modelperm-%016x", s.idPrefix), Object: "model_permission", Created: s.created,
			AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*",
		}},
	}}})
}

// apiError is an error answered in vLLM's OpenAI-style body:
// {"error": {"message", "type", "param", "code"}}, code being the HTTP
// status as an integer.
type apiError struct {
	status  int
	message string
	param   string
}

func (e *apiError) Error() string { return e.message }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...)}
}

// errorType names an HTTP status the way vLLM's error bodies do.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "BadRequestError"
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusRequestEntityTooLarge:
		return "RequestEntityTooLargeError"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableError"
	}
	return "InternalServerError"
}

// writeError is the one place errors become HTTP responses.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		switch {
		case errors.Is(err, ErrPromptTooLong):
			ae = &apiError{status: http.StatusBadRequest, message: err.Error()}
		case errors.Is(err, ErrStopped):
			ae = &apiError{status: http.StatusServiceUnavailable, message: "the engine is not running"}
		default:
			s.log.Error("request failed", "error", err)
			ae = &apiError{status: http.StatusInternalServerError, message: err.Error()}
		}
	}
	var param *string
	if ae.param != "" {
		param = &ae.param
	}
	type info struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    int     `json:"code"`
	}
	writeJSON(w, ae.status, struct {
		Error info `json:"error"`
	}{info{Message: ae.message, Type: errorType(ae.status), Param: param, Code: ae.status}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// An error here means the client went away; there is no one to tell.
	_ = json.NewEncoder(w).Encode(v)
}

// decodeBody reads a JSON request body into v. Unknown fields are ignored,
// as vLLM ignores them.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, maxBodyBytes)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &apiError{status: http.StatusRequestEntityTooLarge, message: "request body too large"}
		}
		return badRequest("invalid JSON body: %v", err)
	}
	if dec.More() {
		return badRequest("invalid JSON body: data after the JSON value")
	}
	return nil
}

// requestID returns a fresh id with the given prefix ("chatcmpl", "cmpl").
func (s *Server) requestID(prefix string) string {
	return fmt.Sprintf("%s-%016x%08x", prefix, s.idPrefix, s.nextID.Add(1))
}

// handleVersion answers vLLM's /version: {"version": release}.
func (s *Server) handleVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"version": playedVersion(hruntime.KindVLLM, s.opts.Version)})
}
