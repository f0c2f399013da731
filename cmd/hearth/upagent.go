package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/hearth-llm/hearth/bench"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/nodes"
)

// upAgent is hearth up --agent: the client whose simulated workload picks
// the engines' layout, and which layout flags the command line set itself.
type upAgent struct {
	client   string
	sessions int
	// explicit names the layout flags given ("tp", "kv-cache-dtype",
	// "rope-scaling"): they override the recommendation.
	explicit []string
}

// layoutFlagNames are the flags a recommended layout sets.
var layoutFlagNames = []string{"tp", "kv-cache-dtype", "rope-scaling"}

// chooseAgentLayout discovers the GPUs hearth up serves from, evaluates the
// layouts of its model on the client's workload as hearth plan --agent does,
// (an evaluation of that size), and sets cfg's layout to the recommended
// one, less the fields the command line set itself.
func chooseAgentLayout(ctx context.Context, cfg *upConfig, size bench.EvaluationSize, log *slog.Logger) error {
	d, err := nodes.NewDiscoverer(nodes.DiscoverConfig{Sim: cfg.Sim, Node: cfg.Node})
	if err != nil {
		return fmt.Errorf("up: --agent: %w", err)
	}
	if c, ok := d.(io.Closer); ok {
		defer c.Close()
	}
	inv, err := d.Discover(ctx)
	if err != nil {
		return fmt.Errorf("up: --agent: %w", err)
	}
	uses := make([]catalog.GPUUse, len(inv.GPUs))
	for i, g := range inv.GPUs {
		uses[i] = gpuUseOf(g)
	}
	model, ok := catalog.LookupModel(cfg.Model)
	if !ok {
		return fmt.Errorf("%w: --agent chooses among the layouts of the catalog's models, and %s is not one of them", errUsage, cfg.Model)
	}
	preset, err := bench.PresetByName(cfg.agent.client)
	if err != nil {
		return fmt.Errorf("%w: --agent: %v", errUsage, err)
	}
	kinds := make([]string, len(uses))
	for i, u := range uses {
		kinds[i] = u.GPU.Kind
	}
	candidates := bench.AgentCandidates(uses, model)
	// The simulation takes seconds to tens of seconds: say what it waits for.
	log.Info("choosing a layout for the agent client: simulating its sessions on each layout that fits",
		"client", cfg.agent.client, "layouts", len(candidates), "workloads", size.Seeds,
		"sessions", size.Seeds*size.Rounds*cfg.agent.sessions)
	ev, err := bench.EvaluateLayouts(ctx, candidates, kinds, preset, cfg.agent.sessions, agentEvaluationSeed, size)
	if err != nil {
		return fmt.Errorf("up: --agent: %w", err)
	}
	best := ev.Recommended().Candidate.Layout
	if !slices.Contains(cfg.agent.explicit, "tp") {
		cfg.TP = best.TPSize()
	}
	if !slices.Contains(cfg.agent.explicit, "kv-cache-dtype") {
		cfg.KVCacheDtype = best.KVCacheDtypeOrAuto()
	}
	if !slices.Contains(cfg.agent.explicit, "rope-scaling") {
		cfg.RopeScaling = best.RopeScaling
	}
	chosen := catalog.Layout{TP: cfg.TP, KVCacheDtype: cfg.KVCacheDtype, RopeScaling: cfg.RopeScaling}
	if len(cfg.agent.explicit) > 0 {
		log.Info("layout for the agent client: explicit flags override the recommendation",
			"client", cfg.agent.client, "recommended", best.String(), "overridden", "--"+strings.Join(cfg.agent.explicit, ", --"), "layout", chosen.String())
	} else {
		log.Info("layout for the agent client", "client", cfg.agent.client, "layout", chosen.String(), "reason", ev.Reason)
	}
	return nil
}
