package router

import "time"

// Hints are the agent hints of a request (Dynamo's nvext.agent_hints). The
// gateway parses them from the client's JSON; the router only reads them.
type Hints struct {
	// Priority orders waiting requests: higher is served sooner (and, in
	// engines that support it, evicted later).
	Priority int
	// StrictPriority is a strict tier: a waiting request is never served
	// before one of a higher tier, whatever their Priority.
	StrictPriority int
	// OSL is the expected number of output tokens (0: unknown); it adds to
	// the decode load the request brings to a worker.
	OSL int
	// SpeculativePrefill asks the gateway to warm the cache with the next
	// turn's prompt after the answer; the router only carries it.
	SpeculativePrefill bool
	// Background marks work nobody waits for (the gateway's own prefill of
	// the next turn in a tool pause): served after turns and side requests.
	Background bool
}

// Session actions of nvext.session_control.
const (
	SessionOpen  = "open"
	SessionClose = "close"
)

// SessionControl is what a request asks of its session
// (nvext.session_control): sticky routing opened or closed by the client.
// The session it applies to is the request's session id.
type SessionControl struct {
	Action  string        // SessionOpen, SessionClose or "" (use the session)
	Timeout time.Duration // idle time after which the session is forgotten; 0: default
}
