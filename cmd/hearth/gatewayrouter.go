package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/router"
)

// gatewayRouter adapts the router to the interface the gateway declares: it
// translates requests and decisions, and knows where each worker's OpenAI
// API is.
type gatewayRouter struct {
	rt *router.Router

	// defaultPolicy, when set, names the policy of requests that name
	// none (the console's Settings change it while Hearth runs).
	defaultPolicy func() string

	mu       sync.RWMutex
	baseURLs map[router.WorkerID]string
	byName   map[string]router.WorkerID
}

var _ api.Router = (*gatewayRouter)(nil)

func newGatewayRouter(rt *router.Router) *gatewayRouter {
	return &gatewayRouter{rt: rt, baseURLs: make(map[router.WorkerID]string), byName: make(map[string]router.WorkerID)}
}

// addWorker makes a worker registered with the router under name reachable
// for the gateway.
func (g *gatewayRouter) addWorker(id router.WorkerID, name, baseURL string) {
	g.mu.Lock()
	g.baseURLs[id] = baseURL
	g.byName[name] = id
	g.mu.Unlock()
}

func (g *gatewayRouter) Route(ctx context.Context, req api.RouteRequest) (api.Route, error) {
	if req.Session.Action != "" {
		g.rt.ApplySessionControl(req.SessionID, req.Session)
	}
	var exclude []router.WorkerID
	if len(req.Exclude) > 0 {
		g.mu.RLock()
		for _, name := range req.Exclude {
			if id, ok := g.byName[name]; ok {
				exclude = append(exclude, id)
			}
		}
		g.mu.RUnlock()
	}
	policy := req.Policy
	if policy == "" && g.defaultPolicy != nil {
		policy = g.defaultPolicy()
	}
	d, err := g.rt.Route(ctx, &router.Request{
		ID:           req.ID,
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
		return api.Route{}, fmt.Errorf("%w: %w", api.ErrNoWorker, err)
	case err != nil:
		return api.Route{}, err
	}
	g.mu.RLock()
	baseURL, ok := g.baseURLs[d.WorkerID]
	g.mu.RUnlock()
	if !ok {
		g.rt.Free(req.ID)
		return api.Route{}, fmt.Errorf("%w: worker %s has no address", api.ErrNoWorker, d.Worker)
	}
	return api.Route{
		Worker:           d.Worker,
		BaseURL:          baseURL,
		CachedBlocks:     d.CachedBlocks,
		PromptBlocks:     d.PromptBlocks,
		PredictedHitRate: d.PredictedHitRate,
		Policy:           d.Policy,
	}, nil
}

func (g *gatewayRouter) PrefillDone(requestID string) { g.rt.PrefillDone(requestID) }

func (g *gatewayRouter) Free(requestID string) { g.rt.Free(requestID) }
