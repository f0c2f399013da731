package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/models"
	"github.com/hearth-llm/hearth/router"
)

// gatewayRouter adapts the router to the interface the gateway declares: it
// translates requests and decisions. Where each worker serves is in the
// router's worker info, which decisions carry.
type gatewayRouter struct {
	rt *router.Router

	// defaultPolicy names the policy of requests that name none (the
	// console's Settings change it while Hearth runs).
	defaultPolicy func() string
	// whyNoWorker, when set, says why no engine serves a model right now
	// (engines loading, restarting or failed), for the 503 the client gets.
	whyNoWorker func(model string) string
	// residency, when models are served on demand, makes a request's
	// model resident before it is routed, and counts the request on it
	// until Free; nil: every model always serves.
	residency *residency

	mu       sync.Mutex
	releases map[string]func() // by request id, of requests holding their model
}

var _ api.Router = (*gatewayRouter)(nil)

func (g *gatewayRouter) Route(ctx context.Context, req api.RouteRequest) (api.Route, error) {
	if req.Session.Action != "" {
		g.rt.ApplySessionControl(req.SessionID, req.Session)
	}
	var exclude []router.WorkerID
	for _, name := range req.Exclude {
		if id, ok := g.rt.WorkerByName(name); ok {
			exclude = append(exclude, id)
		}
	}
	policy := req.Policy
	if policy == "" {
		policy = g.defaultPolicy()
	}
	if g.residency != nil {
		release, err := g.residency.acquire(ctx, models.Request{Model: req.Model, Session: req.SessionID, Priority: req.Hints.Priority})
		if err != nil {
			if ctx.Err() != nil {
				return api.Route{}, err // the client left while it waited
			}
			return api.Route{}, fmt.Errorf("%w: %s could not be loaded in time: %w", api.ErrNoWorker, req.Model, err)
		}
		g.mu.Lock()
		if g.releases == nil {
			g.releases = map[string]func(){}
		}
		g.releases[req.ID] = release
		g.mu.Unlock()
	}
	route, err := g.route(ctx, req, exclude, policy)
	if err != nil {
		g.releaseModel(req.ID)
	}
	return route, err
}

// releaseModel ends a request's hold on its model.
func (g *gatewayRouter) releaseModel(requestID string) {
	if g.residency == nil {
		return
	}
	g.mu.Lock()
	release := g.releases[requestID]
	delete(g.releases, requestID)
	g.mu.Unlock()
	if release != nil {
		release()
	}
}

func (g *gatewayRouter) route(ctx context.Context, req api.RouteRequest, exclude []router.WorkerID, policy string) (api.Route, error) {
	d, err := g.rt.Route(ctx, &router.Request{
		ID:           req.ID,
		Model:        req.Model,
		Hashes:       req.Hashes,
		PromptTokens: req.PromptTokens,
		Policy:       policy,
		SessionID:    req.SessionID,
		Exclude:      exclude,
		Hints:        req.Hints,
	})
	switch {
	case errors.Is(err, router.ErrQueueFull):
		return api.Route{}, fmt.Errorf("%w: %w", api.ErrQueueFull, err)
	case errors.Is(err, router.ErrNoWorker):
		if g.whyNoWorker != nil {
			return api.Route{}, fmt.Errorf("%w: %s", api.ErrNoWorker, g.whyNoWorker(req.Model))
		}
		return api.Route{}, fmt.Errorf("%w: %w", api.ErrNoWorker, err)
	case err != nil:
		return api.Route{}, err
	}
	return api.Route{
		Worker:           d.Worker,
		BaseURL:          d.BaseURL,
		CachedBlocks:     d.CachedBlocks,
		RAMBlocks:        d.RAMBlocks,
		DiskBlocks:       d.DiskBlocks,
		PromptBlocks:     d.PromptBlocks,
		PredictedHitRate: d.PredictedHitRate,
		Policy:           d.Policy,
	}, nil
}

func (g *gatewayRouter) PrefillDone(requestID string) { g.rt.PrefillDone(requestID) }

func (g *gatewayRouter) Free(requestID string) {
	g.rt.Free(requestID)
	g.releaseModel(requestID)
}
