package api

import (
	"strconv"

	"github.com/hearth-llm/hearth/router/osl"
)

// outputEstimate is what the gateway expected of a request's output, and
// what it learns from when the answer ends (Deps.OutputLengths).
type outputEstimate struct {
	on     bool // the gateway has an estimator: it learns from the answer
	call   osl.Call
	est    osl.Estimate // zero when the client sent its own osl
	client int          // the client's nvext.agent_hints.osl; 0 when it sent none
}

// oslCallOf is what the estimator sees of a request before its answer:
// its client and session, whether it is a side request, and whether its
// prompt ends with a tool result, named by the tool call it answers.
func oslCallOf(client, session string, kind RequestKind, msgs []chatMessage) osl.Call {
	c := osl.Call{Client: client, Session: session, Side: kind == KindSide}
	if c.Side || len(msgs) == 0 {
		return c
	}
	last := len(msgs) - 1
	if msgs[last].Role != "tool" {
		return c
	}
	c.AfterTool = true
	id := msgs[last].ToolCallID
	for i := last - 1; i >= 0 && c.Tool == ""; i-- {
		for _, tc := range msgs[i].ToolCalls {
			if tc.ID == id {
				c.Tool = tc.Function.Name
				break
			}
		}
	}
	return c
}

// estimateOutput gives a request whose client sent no osl the gateway's
// estimate as its osl hint, so that the router counts the room its answer
// will take.
func (g *Gateway) estimateOutput(rr *RouteRequest, client string, req *engineRequest) outputEstimate {
	if g.osl == nil || g.cfg.NoInferredHints {
		return outputEstimate{client: rr.Hints.OSL}
	}
	oe := outputEstimate{on: true, call: oslCallOf(client, req.SessionID, req.Kind, req.Messages), client: rr.Hints.OSL}
	if oe.client > 0 {
		return oe // the client's hint wins
	}
	oe.est = g.osl.Predict(oe.call)
	if oe.est.Tokens > 0 {
		rr.Hints.OSL = oe.est.Tokens
		req.Hints.OSL, req.HintOrigins.OSL = oe.est.Tokens, HintInferred
	}
	return oe
}

// header is the x-hearth-osl value: the expected output tokens the router
// was given and where they came from, e.g. "183; source=session;
// kind=tool_call; turns=4" (turns: the session's turns the estimate had
// learned from) or "300; source=client"; "" when there were none.
func (oe outputEstimate) header() string {
	switch {
	case oe.client > 0:
		return strconv.Itoa(oe.client) + "; source=client"
	case oe.est.Tokens > 0:
		return strconv.Itoa(oe.est.Tokens) + "; source=" + oe.est.Source.String() + "; kind=" + oe.est.Kind.String() +
			"; turns=" + strconv.Itoa(oe.est.SessionTurns)
	}
	return ""
}

// learnOutput teaches the estimator a finished answer and records the
// estimate beside it.
func (ex *exchange) learnOutput(r *RequestRecord) {
	oe := &ex.oe
	r.PredictedOutputTokens = oe.est.Tokens
	if oe.client > 0 {
		r.PredictedOutputTokens = oe.client
	}
	if !oe.on || r.Status != 200 || r.OutputTokens <= 0 {
		return
	}
	kind := osl.Final
	if len(ex.acc.ToolCalls) > 0 {
		kind = osl.ToolCall
	}
	ex.g.osl.Observe(oe.call, kind, r.OutputTokens)
}
