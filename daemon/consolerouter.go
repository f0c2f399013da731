package daemon

import (
	"context"

	"github.com/hearth-llm/hearth/console"
	"github.com/hearth-llm/hearth/router"
)

// routerSource reports the router's decisions and queue.
type routerSource struct{ rt *router.Router }

var _ console.RouterSource = routerSource{}

func (s routerSource) Decisions(_ context.Context, n int) ([]console.Decision, error) {
	ds := s.rt.Decisions(n)
	out := make([]console.Decision, len(ds))
	for i, d := range ds {
		out[i] = decisionOf(d)
	}
	return out, nil
}

func (s routerSource) QueueLen(context.Context) (int, error) { return s.rt.QueueLen(), nil }

func decisionOf(d router.Decision) console.Decision {
	cd := console.Decision{
		RequestID: d.RequestID, At: d.At, Policy: d.Policy, Worker: d.Worker, Reason: d.Reason,
		PromptBlocks: d.PromptBlocks, CachedBlocks: d.CachedBlocks, PredictedHitRate: d.PredictedHitRate,
		Queued: d.Queued, Candidates: make([]console.Candidate, len(d.Candidates)),
	}
	for i, c := range d.Candidates {
		cd.Candidates[i] = console.Candidate{
			Worker: c.Worker, CachedBlocks: c.CachedBlocks, ActiveBlocks: c.ActiveBlocks,
			PendingPrefillTokens: c.PendingPrefillTokens, Cost: c.Cost,
		}
	}
	return cd
}
