package api

import (
	"strconv"
	"strings"

	"github.com/hearth-llm/hearth/router"
)

// Priorities the gateway gives requests whose client sent none
// (router.PriorityTurn and the others).
const (
	PriorityTurn       = router.PriorityTurn
	PrioritySide       = router.PrioritySide
	PriorityBackground = router.PriorityBackground
)

// HintOrigin says where one of a request's agent hints came from.
type HintOrigin string

const (
	// HintNone: the request has no such hint.
	HintNone HintOrigin = ""
	// HintClient: the client sent it in nvext.agent_hints.
	HintClient HintOrigin = "client"
	// HintInferred: the gateway inferred it from the request.
	HintInferred HintOrigin = "inferred"
)

// HintOrigins says, for each agent hint of a request, where it came from.
type HintOrigins struct {
	Priority, StrictPriority, OSL, SpeculativePrefill HintOrigin
}

// inferHints fills the hints the client did not send, in place, and
// records where each came from: a client's hint always stands. kind is the
// request's (requestKind). The priority is PriorityTurn for a turn and
// PrioritySide for a side request.
func inferHints(h *router.Hints, o *HintOrigins, kind RequestKind) {
	if o.Priority == HintNone {
		h.Priority, o.Priority = PriorityTurn, HintInferred
		if kind == KindSide {
			h.Priority = PrioritySide
		}
	}
}

// FormatHints is the x-hearth-hints value: each hint the request carries,
// its value and origin, e.g. "priority=-1(inferred),osl=512(client)"; ""
// when it carries none.
func FormatHints(h router.Hints, o HintOrigins) string {
	var b strings.Builder
	add := func(name string, v string, origin HintOrigin) {
		if origin == HintNone {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(v)
		b.WriteByte('(')
		b.WriteString(string(origin))
		b.WriteByte(')')
	}
	add("priority", strconv.Itoa(h.Priority), o.Priority)
	add("strict_priority", strconv.Itoa(h.StrictPriority), o.StrictPriority)
	add("osl", strconv.Itoa(h.OSL), o.OSL)
	add("speculative_prefill", strconv.FormatBool(h.SpeculativePrefill), o.SpeculativePrefill)
	return b.String()
}

// headerHints names the agent hints a request was served with and where
// each came from (FormatHints).
const headerHints = "x-hearth-hints"
