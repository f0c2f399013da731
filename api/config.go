package api

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"path"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hearth-llm/hearth/netguard"
)

// Config is the gateway's configuration. Zero values take the documented
// defaults; Validate reports what cannot work.
type Config struct {
	// Addr is where Run listens. Default "127.0.0.1:8080".
	Addr string
	// Models are the served model names, as the engines know them. The first
	// is the default target of aliases. Required.
	Models []string
	// Aliases maps a client's model name to a served one. Keys are exact names
	// or path.Match patterns ("claude-*", "*"); exact names win, then the
	// longest pattern. A name that is neither served nor aliased gets a 404.
	// These are the aliases at start; Gateway.SetAliases replaces them.
	Aliases map[string]string
	// APIKeys, when non-empty, are required on every /v1 request (Bearer or
	// x-api-key). /health and /metrics stay open.
	APIKeys []string
	// MaxBodyBytes caps request bodies. Default 32 MiB.
	MaxBodyBytes int
	// MaxBodyBytesInFlight caps the body bytes of all requests being
	// received at once (each counts as the length it announces, from its
	// headers until it is handled); a request over it gets a 503 in its
	// dialect without its body being read. Default 8 × MaxBodyBytes.
	MaxBodyBytesInFlight int64
	// MaxOutputTokens clamps a request's max_tokens; 0 = no clamp.
	MaxOutputTokens int
	// ContextTokens is the served model's context length; when set, max_tokens
	// is clamped so that prompt plus output fit (clients such as Claude Code
	// ask for 64000 output tokens regardless of the model), and a prompt that
	// alone does not fit is refused without dispatch.
	ContextTokens int
	// RetryAfter is what a 429 tells clients to wait. Default 1s.
	RetryAfter time.Duration
	// SpeculativeTimeout bounds a speculative prefill request. Default 30s.
	SpeculativeTimeout time.Duration
	// ClientCheck is how often a request that has nothing to send (queued,
	// or waiting through a long prefill) looks whether its client is still
	// connected; one that left has its engine request cancelled. Default 1s.
	ClientCheck time.Duration
	// KeepAliveInterval is how long a stream whose model is loading waits
	// silent before its stream begins, and then how often it gets a
	// keep-alive until its answer begins. Default 1s.
	KeepAliveInterval time.Duration
	// ConversationSessions is how many agent conversations keep a
	// tokenizer session, so that a turn tokenizes only what it adds to the
	// one before; each holds its prompt's text and tokens (a few hundred KB
	// for a long conversation). Default 64; negative turns sessions off.
	ConversationSessions int

	// HeaderTimeout is how long a client may take to send a request's
	// headers, counted from its connection (TLS handshake included) or, on
	// a kept connection, from the request's first byte; one that sends
	// nothing is closed then. Default netguard.HeaderTimeout (10s).
	HeaderTimeout time.Duration
	// BodyTimeout is how long a client may take to send a request's body
	// once its headers are in. Default 60s. An answer has no deadline:
	// streams last as long as the engine writes.
	BodyTimeout time.Duration
	// IdleTimeout closes a kept connection with no request for this long.
	// Default netguard.IdleTimeout (60s).
	IdleTimeout time.Duration
	// MaxConns caps the connections open at once; more clients wait to be
	// accepted. Default a quarter of the process's file descriptor limit,
	// at most 4096.
	MaxConns int
	// TLS, when set, serves HTTPS; Serve puts it above the connection cap.
	TLS *tls.Config

	// NoInferredHints leaves the agent hints a client did not send unset
	// (hearth up --infer-hints off): no inferred priority (inferHints) and
	// no prefill in the tool pause of a client that did not ask for one.
	NoInferredHints bool
	// EnginePriority says how the engines take a request's priority in
	// the "priority" field of the body the gateway sends them: 0 they do
	// not order by it and the field is left out; 1 as Hearth's, higher
	// first (SGLang); -1 negated, lower first (vLLM). Every request then
	// carries the field, a turn's 0 included.
	EnginePriority int
	// HotPrefixes, when set, is told every session's first prompt and
	// gives the prefixes WarmEngine prefills on a starting engine.
	HotPrefixes HotPrefixes
}

// Deps are the gateway's collaborators.
type Deps struct {
	Router    Router    // required
	Tokenizer Tokenizer // required
	// Store keeps Responses-API results for previous_response_id; nil means
	// store: true is accepted but nothing is kept, and previous_response_id
	// gets a 400.
	Store ResponseStore
	// Registry receives the gateway's metrics and is what GET /metrics
	// serves; nil = a private registry.
	Registry *prometheus.Registry
	// Logger; nil = slog.Default().
	Logger *slog.Logger
	// Keys checks API keys kept outside Config.APIKeys (those created in
	// the console); nil = none. While Config.APIKeys or Keys holds a key,
	// every /v1 request needs one.
	Keys KeyChecker
	// Models resolves client model names; nil = one made from
	// Config.Models and Config.Aliases (which it then replaces).
	Models *Models
	// Traffic records requests and sessions; nil = a record of the
	// gateway's own. A daemon passes one its console reads too.
	Traffic *Traffic
	// Mount adds routes to the gateway's app, such as the console's. It is
	// called after /health is registered and before the root's answer, the
	// API's routes and the catch-all 404, so it may also answer GET /.
	Mount func(fiber.Router)
	// OutputLengths estimates the output of requests whose client sent no
	// nvext.agent_hints.osl and learns from every answer; nil = none: such
	// requests are routed without an expected output length.
	OutputLengths OutputLengths
	// Residency says where each model is when more are configured than the
	// GPUs hold at once, and hears of agents' tool pauses; nil = every
	// model always serves.
	Residency Residency
}

const (
	defaultAddr         = "127.0.0.1:8080"
	defaultMaxBodyBytes = 32 << 20
	defaultRetryAfter   = time.Second
	defaultSpecTimeout  = 30 * time.Second
	defaultBodyTimeout  = 60 * time.Second
)

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = defaultAddr
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = defaultMaxBodyBytes
	}
	if c.MaxBodyBytesInFlight <= 0 {
		c.MaxBodyBytesInFlight = 8 * int64(c.MaxBodyBytes)
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = defaultRetryAfter
	}
	if c.ConversationSessions == 0 {
		c.ConversationSessions = 64
	}
	if c.ClientCheck <= 0 {
		c.ClientCheck = time.Second
	}
	if c.KeepAliveInterval <= 0 {
		c.KeepAliveInterval = time.Second
	}
	if c.SpeculativeTimeout <= 0 {
		c.SpeculativeTimeout = defaultSpecTimeout
	}
	if c.HeaderTimeout <= 0 {
		c.HeaderTimeout = netguard.HeaderTimeout
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = defaultBodyTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = netguard.IdleTimeout
	}
	if c.MaxConns <= 0 {
		c.MaxConns = netguard.MaxConns(4, 4096)
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if len(c.Models) == 0 {
		return errors.New("api: config: no served model")
	}
	served := make(map[string]bool, len(c.Models))
	for _, m := range c.Models {
		if m == "" {
			return errors.New("api: config: empty served model name")
		}
		served[m] = true
	}
	if err := checkAliases(c.Aliases, served); err != nil {
		return fmt.Errorf("api: config: %w", err)
	}
	for _, k := range c.APIKeys {
		if k == "" {
			return errors.New("api: config: empty API key")
		}
	}
	if c.MaxOutputTokens < 0 || c.ContextTokens < 0 {
		return errors.New("api: config: negative token limit")
	}
	return nil
}

// checkAliases reports an alias whose name is a malformed pattern or whose
// target is not served.
func checkAliases(aliases map[string]string, served map[string]bool) error {
	for _, k := range slices.Sorted(maps.Keys(aliases)) { // the same error every time
		if _, err := path.Match(k, ""); err != nil {
			return fmt.Errorf("alias %q: %w", k, err)
		}
		if v := aliases[k]; !served[v] {
			return fmt.Errorf("alias %q points at %q, which is not served", k, v)
		}
	}
	return nil
}

// modelResolver maps client model names to served ones. Copies share one
// table, which SetAliases replaces whole: a request resolves against the
// old aliases or the new ones, never a mix, and reading costs one atomic
// load.
type modelResolver struct {
	table *atomic.Pointer[aliasTable]
}

// aliasTable is one immutable set of aliases, prepared for lookup.
type aliasTable struct {
	served   map[string]bool
	exact    map[string]string
	patterns []string // longest first
	aliases  map[string]string
}

// newModelResolver prepares c's aliases; c must be valid.
func newModelResolver(c Config) modelResolver {
	r := modelResolver{table: new(atomic.Pointer[aliasTable])}
	r.table.Store(newAliasTable(c.Models, c.Aliases))
	return r
}

func newAliasTable(models []string, aliases map[string]string) *aliasTable {
	t := &aliasTable{served: map[string]bool{}, exact: map[string]string{}, aliases: maps.Clone(aliases)}
	for _, m := range models {
		t.served[m] = true
	}
	for k, v := range t.aliases {
		if isPattern(k) {
			t.patterns = append(t.patterns, k)
		} else {
			t.exact[k] = v
		}
	}
	sort.Slice(t.patterns, func(i, j int) bool {
		if len(t.patterns[i]) != len(t.patterns[j]) {
			return len(t.patterns[i]) > len(t.patterns[j])
		}
		return t.patterns[i] < t.patterns[j]
	})
	return t
}

// setAliases validates aliases against the served models and, when they
// are valid, puts them in place for the requests that follow. The served
// models never change, so concurrent calls need no lock: the last wins.
func (r modelResolver) setAliases(aliases map[string]string) error {
	cur := r.table.Load()
	if err := checkAliases(aliases, cur.served); err != nil {
		return err
	}
	r.table.Store(newAliasTable(slices.Collect(maps.Keys(cur.served)), aliases))
	return nil
}

// Models maps client model names to the served ones. A daemon makes one
// and hands it to the gateway (Deps.Models) and to whatever edits the
// aliases while the gateway runs (the console's settings), so that neither
// needs the other.
type Models struct{ r modelResolver }

// NewModels checks aliases against the served models, with the rules of
// Config.Aliases.
func NewModels(served []string, aliases map[string]string) (*Models, error) {
	c := Config{Models: served, Aliases: aliases}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Models{r: newModelResolver(c)}, nil
}

// SetAliases replaces the aliases, as Gateway.SetAliases does.
func (m *Models) SetAliases(aliases map[string]string) error {
	if err := m.r.setAliases(aliases); err != nil {
		return fmt.Errorf("api: %w", err)
	}
	return nil
}

// SetAliases replaces Config.Aliases while the gateway runs, with the same
// rules: keys are exact names or path.Match patterns, values served models.
// Invalid aliases are refused and the current ones stay. Requests already
// past model resolution keep the model they resolved to.
func (g *Gateway) SetAliases(aliases map[string]string) error {
	if err := g.models.setAliases(aliases); err != nil {
		return fmt.Errorf("api: %w", err)
	}
	return nil
}

func isPattern(s string) bool {
	for _, c := range s {
		switch c {
		case '*', '?', '[', '\\':
			return true
		}
	}
	return false
}

// resolve returns the served model for a client's name, or a 404 apiError.
func (r modelResolver) resolve(name string) (string, error) {
	if name == "" {
		return "", badRequest("model", "required")
	}
	t := r.table.Load()
	if t.served[name] {
		return name, nil
	}
	if m, ok := t.exact[name]; ok {
		return m, nil
	}
	for _, p := range t.patterns {
		if ok, _ := path.Match(p, name); ok {
			return t.aliases[p], nil
		}
	}
	return "", errModelNotFound(name, t.served)
}

// errModelNotFound is the 404 for a name neither served nor aliased. It
// lists the served models, sorted, so that the client's user can pick one
// (or add an alias) without reading the daemon's configuration.
func errModelNotFound(name string, served map[string]bool) *apiError {
	return &apiError{Status: http.StatusNotFound, Param: "model",
		Message: fmt.Sprintf("model %q is not served here and no alias applies; served models: %s",
			name, strings.Join(slices.Sorted(maps.Keys(served)), ", "))}
}
