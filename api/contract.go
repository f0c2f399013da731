package api

import (
	"context"
	"errors"
	"time"

	"github.com/hearth-llm/hearth/api/store"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/router/osl"
	"github.com/hearth-llm/hearth/tokenizer"
)

// Router picks the worker that serves a request. The gateway calls Route once
// per attempt, PrefillDone when the engine produced its first token (prefill
// is over) and Free exactly once per successful Route, when the request ended
// for any reason. The names are router.Router's, whose methods of the same
// names an adapter forwards to.
type Router interface {
	// Route picks a worker. It may block while the request waits in a queue;
	// it returns an error wrapping ErrQueueFull or ErrNoWorker when it cannot.
	Route(ctx context.Context, req RouteRequest) (Route, error)
	PrefillDone(requestID string)
	Free(requestID string)
}

// OutputLengths estimates how many tokens a request will generate from the
// answers before it, and learns from each answer. *osl.Estimator
// satisfies it.
type OutputLengths interface {
	Predict(osl.Call) osl.Estimate
	// Observe learns from a finished request: what it answered (a tool
	// call, a final answer, a side request's answer) and its output tokens.
	Observe(call osl.Call, kind osl.Kind, tokens int)
}

// Tokenizer renders a chat with the served model's template and turns text
// into token ids. *tokenizer.Model satisfies it.
type Tokenizer interface {
	EncodeChat(tokenizer.ChatRequest) (rendered string, ids []uint32, err error)
	Encode(text string) []uint32
}

// ResponseStore keeps finished Responses-API conversations so that a later
// request can continue one through previous_response_id. *store.SQLite
// satisfies it.
type ResponseStore interface {
	PutResponse(ctx context.Context, r store.Response) error
	// GetResponse returns an error wrapping store.ErrNotFound for an unknown id.
	GetResponse(ctx context.Context, id string) (store.Response, error)
}

// KeyChecker checks API keys that live outside the configuration, such as
// the keys created in the console. The console's key store satisfies it
// through a small adapter.
type KeyChecker interface {
	// HasKeys reports whether any key exists. An error counts as yes: a
	// store that cannot answer keeps the API closed.
	HasKeys(ctx context.Context) (bool, error)
	// CheckKey returns nil when secret is a valid key.
	CheckKey(ctx context.Context, secret string) error
}

// AdminKeyChecker is a KeyChecker that also knows keys' scopes. Keys open
// /v1 whatever their scope; /metrics from another machine needs an admin
// key. A KeyChecker without it opens /metrics remotely with command-line
// keys only.
type AdminKeyChecker interface {
	IsAdminKey(ctx context.Context, secret string) bool
}

// Residency is where the served models are when more are configured than
// the GPUs hold at once (the daemon's models on demand). While a request's
// model loads, Router.Route blocks; the gateway keeps a streaming client's
// connection alive meanwhile.
type Residency interface {
	// ModelState is the model's state: "resident", "loading", "sleeping",
	// "unloading" or "on disk".
	ModelState(model string) string
	// ModelLoad is, while the model is loading, how long its load has run
	// and how long it is expected to take; zeros otherwise.
	ModelLoad(model string) (elapsed, expected time.Duration)
	// ToolPause is told that an agent session's turn on model ended in
	// tool calls: the session's next turn comes back to the model, which
	// should not be swapped out meanwhile. session is the request's
	// session id ("" when the client sent none).
	ToolPause(model, session string)
}

// Sentinel errors a Router wraps so that the gateway can answer with the right
// status in the client's dialect.
var (
	// ErrNoWorker: no worker can serve the model right now (503).
	ErrNoWorker = errors.New("no worker available")
	// ErrQueueFull: the router's queue is full (429 with Retry-After).
	ErrQueueFull = errors.New("router queue full")
)

// RouteRequest is what the router sees of a request.
type RouteRequest struct {
	ID           string              // unique per request; PrefillDone and Free use it
	Model        string              // the served model name (aliases resolved)
	Hashes       []tokenizer.SeqHash // sequence hashes of the prompt's full blocks
	PromptTokens int
	SessionID    string                // "" when the client sent none
	Session      router.SessionControl // nvext.session_control, applied to SessionID
	Hints        router.Hints          // nvext.agent_hints
	Policy       string                // routing policy override from the x-hearth-policy header; "" = default
	Exclude      []string              // names of the workers that already failed this request
}

// Route is the router's decision.
type Route struct {
	Worker           string // the worker's name
	BaseURL          string // the worker's OpenAI endpoint root, e.g. http://10.0.0.2:8000
	CachedBlocks     int    // leading prompt blocks the worker already holds on its GPU
	RAMBlocks        int    // prompt blocks after those that it loads from host RAM
	DiskBlocks       int    // prompt blocks after GPU and RAM that it loads from disk (its node's SSD)
	PromptBlocks     int    // full blocks in the prompt
	PredictedHitRate float64
	Policy           string // the policy that decided
}
