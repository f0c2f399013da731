package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/nodes"
)

// ChooseAgentLayout is hearth up --agent: it discovers the GPUs the daemon
// serves from, has ev measure the layouts of its model that fit them on
// the client's workload (as hearth plan --agent does), and sets cfg's
// layout to the one the planner recommends, less the fields the command
// line set itself (cfg.Agent.Explicit). Run it before Run, after Complete.
func ChooseAgentLayout(ctx context.Context, cfg *Config, ev catalog.LayoutEvaluator, log *slog.Logger) error {
	d, err := nodes.NewDiscoverer(discoverConfig(cfg.Node, cfg.Sim, hostWSL()))
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
	model, ok := catalog.LookupModel(cfg.Model)
	if !ok {
		return fmt.Errorf("%w: --agent chooses among the layouts of the catalog's models, and %s is not one of them", ErrUsage, cfg.Model)
	}
	req := catalog.AgentLayoutRequest{
		GPUs: nodes.PlannerUses(inv.GPUs), Model: model, Client: cfg.Agent.Client, Sessions: cfg.Agent.Sessions, Seed: catalog.AgentEvaluationSeed,
	}
	candidates := catalog.AgentCandidates(req.GPUs, model)
	if host := hostWSL(); host.WSL2 && !slices.Contains(cfg.Agent.Explicit, "tp") && len(req.GPUs) > 1 {
		if one := catalog.WithoutTP(candidates); len(one) > 0 {
			candidates = one
			log.Warn("WSL2: one engine per GPU, no tensor parallelism across GPUs, which has hung under WSL2; --tp 2 tries it", "kernel", host.KernelRelease)
		}
	}
	if len(candidates) == 0 {
		return fmt.Errorf("up: --agent: no layout of %s fits the GPUs", model.Name)
	}
	// The simulation takes seconds to tens of seconds: say what it waits for.
	log.Info("choosing a layout for the agent client: simulating its sessions on each layout that fits",
		"client", cfg.Agent.Client, "layouts", len(candidates), "sessions", cfg.Agent.Sessions)
	measures, err := ev.MeasureLayouts(ctx, req, candidates)
	if err != nil {
		return fmt.Errorf("up: --agent: %w", err)
	}
	i, reason := catalog.RecommendLayout(measures)
	best := measures[i].Layout
	explicit := cfg.Agent.Explicit
	if !slices.Contains(explicit, "tp") {
		cfg.TP = best.TPSize()
	}
	if !slices.Contains(explicit, "kv-cache-dtype") {
		cfg.KVCacheDtype = best.KVCacheDtypeOrAuto()
	}
	if !slices.Contains(explicit, "rope-scaling") {
		cfg.RopeScaling = best.RopeScaling
	}
	cfg.MaxBatchedTokens = best.MaxBatchedTokens
	chosen := layoutOf(*cfg)
	cfg.measured = &ServedLayout{Name: chosen.String(), Layout: chosen, Chosen: ChosenByMeasure, Reason: reason}
	if len(explicit) > 0 {
		cfg.measured.Reason = fmt.Sprintf("--agent %s recommended %s; --%s overrode it", cfg.Agent.Client, best, strings.Join(explicit, ", --"))
		log.Info("layout for the agent client: explicit flags override the recommendation",
			"client", cfg.Agent.Client, "recommended", best.String(), "overridden", "--"+strings.Join(explicit, ", --"), "layout", chosen.String())
	} else {
		log.Info("layout for the agent client", "client", cfg.Agent.Client, "layout", chosen.String(), "reason", reason)
	}
	return nil
}
