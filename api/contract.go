package api

import (
	"context"
	"errors"
	"time"

	json "github.com/goccy/go-json"

	"github.com/hearth-llm/hearth/api/store"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/tokenizer"
)

// Router picks the worker that serves a request. The gateway calls Route once
// per attempt, FirstToken when the engine produced its first token (prefill is
// over) and Done exactly once per successful Route, when the request ended for
// any reason.
type Router interface {
	// Route picks a worker. It may block while the request waits in a queue;
	// it returns an error wrapping ErrQueueFull or ErrNoWorker when it cannot.
	Route(ctx context.Context, req RouteRequest) (Route, error)
	FirstToken(requestID string)
	Done(requestID string)
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
	ID           string              // unique per request; FirstToken and Done use it
	Model        string              // the served model name (aliases resolved)
	Hashes       []tokenizer.SeqHash // sequence hashes of the prompt's full blocks
	PromptTokens int
	SessionID    string // "" when the client sent none
	Session      SessionControl
	Hints        Hints
	Policy       string   // routing policy override from the x-hearth-policy header; "" = default
	Exclude      []string // worker ids that already failed this request
}

// Hints are Dynamo's agent hints (nvext.agent_hints), as plain fields.
type Hints struct {
	Priority           int  // higher = sooner, evicted later
	StrictPriority     int  // a strict tier in the router queue
	OSL                int  // expected output tokens; 0 = unknown
	SpeculativePrefill bool // warm the next turn's prompt after the answer
}

// SessionControl is nvext.session_control: sticky sessions opened and closed
// by the client.
type SessionControl struct {
	Action  string        // "", "open" or "close"
	Timeout time.Duration // 0 = router default
}

// Route is the router's decision.
type Route struct {
	WorkerID         string
	BaseURL          string // the worker's OpenAI endpoint root, e.g. http://10.0.0.2:8000
	OverlapBlocks    int    // prompt blocks the worker already holds
	PromptBlocks     int    // full blocks in the prompt
	PredictedHitRate float64
	Policy           string // the policy that decided
}

// parseNvext decodes and validates the request body's Dynamo extension with
// the router's own parser; errors are 400s naming the offending field.
// Unknown fields are ignored.
func parseNvext(raw json.RawMessage) (h Hints, sc SessionControl, sessionID string, err error) {
	nv, err := router.ParseNvext(raw)
	if err != nil {
		var ne *router.NvextError
		if errors.As(err, &ne) {
			return h, sc, "", badRequest(ne.Field, ne.Reason)
		}
		return h, sc, "", badRequest("nvext", err.Error())
	}
	h = Hints{
		Priority:           nv.AgentHints.Priority,
		StrictPriority:     nv.AgentHints.StrictPriority,
		OSL:                nv.AgentHints.OSL,
		SpeculativePrefill: nv.AgentHints.SpeculativePrefill,
	}
	if c := nv.SessionControl; c != nil {
		sc = SessionControl{Action: c.Action, Timeout: c.Timeout}
		sessionID = c.SessionID
	}
	return h, sc, sessionID, nil
}
