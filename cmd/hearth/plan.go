package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/hearth-llm/hearth/bench"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/nodes"
)

// planConfig is the parsed command line of hearth plan.
type planConfig struct {
	model       string // "" picks the largest that fits
	gpus        []planGPU
	tp          int
	maxModelLen int
	hfCache     string
	json        bool
	// kvCacheDtype and ropeScaling complete the layout with tp.
	kvCacheDtype string
	ropeScaling  bool
	// maxBatchedTokens is the layout's step budget: the agent layout's
	// when it is chosen, else 0 (the default).
	maxBatchedTokens int
	// agent, when set, evaluates the layouts on that client's preset
	// workload at sessions concurrent sessions instead of planning one.
	agent    string
	sessions int
	seed     uint64
	// rigs, above 1, plans for a cluster of that many machines, each with
	// the GPUs named (bench.LayoutEvaluator.WriteRigsPlan).
	rigs int
	// layoutMode is --layout: daemon.LayoutAgent or LayoutPerGPU, the
	// layout planned when layoutGiven is false (no --tp, --kv-cache-dtype,
	// --rope-scaling or --max-model-len).
	layoutMode  string
	layoutGiven bool
}

// layout is the layout the flags ask for.
func (c planConfig) layout() catalog.Layout {
	return catalog.Layout{TP: c.tp, KVCacheDtype: c.kvCacheDtype, RopeScaling: c.ropeScaling, MaxBatchedTokens: c.maxBatchedTokens}
}

// planGPU is one GPU to plan for and how the output names it.
type planGPU struct {
	label string // "gpu 0", "sim/gpu1"
	use   catalog.GPUUse
}

// runPlan prints what fits on each GPU: the model's weights and KV cache,
// the memory fraction to pass each engine and the context that fits. A model
// that does not fit is an error whose text is one sentence with the fix.
func runPlan(ctx context.Context, env *environment, args []string) error {
	cfg, err := parsePlanFlags(env, args)
	if err != nil {
		return err
	}
	uses := make([]catalog.GPUUse, len(cfg.gpus))
	for i, g := range cfg.gpus {
		uses[i] = g.use
	}
	var model catalog.Model
	if cfg.model == "" {
		model, err = catalog.DefaultModel(uses)
	} else {
		model, err = catalog.ResolveModel(cfg.model, catalog.HFHubDir(cfg.hfCache))
	}
	if err != nil {
		return err
	}
	if cfg.agent != "" && cfg.rigs > 1 {
		req := catalog.AgentLayoutRequest{Model: model, Client: cfg.agent, Sessions: cfg.sessions, Seed: cfg.seed}
		return env.layoutEvaluator().WriteRigsPlan(ctx, env.stdout, req, uses, cfg.rigs)
	}
	if cfg.agent != "" {
		ev, err := env.layoutEvaluator().Evaluate(ctx, catalog.AgentLayoutRequest{
			GPUs: uses, Model: model, Client: cfg.agent, Sessions: cfg.sessions, Seed: cfg.seed,
		})
		if err != nil {
			return err
		}
		if cfg.json {
			enc := json.NewEncoder(env.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(ev.Report(model))
		}
		fmt.Fprintf(env.stdout, "%s (%s), layouts for %s\n", model.Name, model.Repo, cfg.agent)
		return bench.WriteLayoutTable(env.stdout, ev)
	}
	if err := cfg.chooseLayout(uses, model, env.stdout); err != nil {
		return err
	}
	if model, err = catalog.ApplyLayout(model, cfg.layout()); err != nil {
		return err
	}
	plan, err := catalog.PlanEngines(catalog.PlanRequest{GPUs: uses, Model: model, TP: cfg.tp, MaxModelLen: cfg.maxModelLen,
		KVCacheDtype: cfg.kvCacheDtype, MaxBatchedTokens: cfg.maxBatchedTokens})
	if err != nil {
		return err
	}
	labels := make([]string, len(cfg.gpus))
	for i, g := range cfg.gpus {
		labels[i] = g.label
	}
	out := catalog.ReportOfPlan(plan, cfg.layout(), labels, cfg.model == "")
	if cfg.json {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return out.WriteText(env.stdout)
}

// chooseLayout sets the layout to plan as hearth up chooses it: without
// layout flags, --layout agent (the default) plans the layout for coding
// agents (catalog.DefaultAgentLayout, for Claude Code) and says why in a
// line before the text report; a model that fits no layout at all is
// planned one engine per GPU, whose error says the fix.
func (c *planConfig) chooseLayout(uses []catalog.GPUUse, model catalog.Model, out io.Writer) error {
	if c.layoutGiven || c.layoutMode == daemon.LayoutPerGPU {
		return nil
	}
	choice, err := catalog.DefaultAgentLayout(uses, model, catalog.ClaudeCodeID)
	if errors.Is(err, catalog.ErrNoAgentLayout) {
		return nil
	}
	if err != nil {
		return err
	}
	l := choice.Candidate.Layout
	c.tp, c.kvCacheDtype, c.ropeScaling, c.maxBatchedTokens = l.TPSize(), l.KVCacheDtypeOrAuto(), l.RopeScaling, l.MaxBatchedTokens
	if !c.json {
		fmt.Fprintf(out, "layout %s, %s; --layout per-gpu plans one engine per GPU\n", l, choice.Reason)
		if choice.Shortfall != "" {
			fmt.Fprintln(out, choice.Shortfall)
		}
	}
	return nil
}

func parsePlanFlags(env *environment, args []string) (planConfig, error) {
	fs := newFlagSet(env, "plan",
		"plan [--model M] (--gpu rtx4090[,rtx3090...] | --sim 2x4090) [--tp N] [--kv-cache-dtype auto|fp8] [--rope-scaling] [--max-model-len N] [--used-gb X] [--hf-cache DIR] [--json]\n"+
			"       hearth plan --agent claude-code|opencode|codex [--sessions N] [--seed N] [--model M] (--gpu ... | --sim 2x4090) [--rigs N] [--json]")
	var cfg planConfig
	fs.StringVar(&cfg.model, "model", "", "model: a catalog name ("+strings.Join(catalog.ModelNames(), ", ")+
		") or a Hugging Face repository id in the cache (default: the largest that fits the smallest GPU)")
	gpuList := fs.String("gpu", "", "GPU kinds, separated by commas: "+strings.Join(catalog.GPUKinds(), ", "))
	sim := fs.String("sim", "", `simulated GPUs as hearth up --sim takes them, e.g. "2x4090" or "1x4090+2x3090"`)
	fs.IntVar(&cfg.tp, "tp", 1, "tensor parallel size: GPUs per engine")
	fs.StringVar(&cfg.kvCacheDtype, "kv-cache-dtype", catalog.KVCacheAuto, "KV cache dtype: auto (the model's, BF16) or fp8 (half the bytes per token)")
	fs.BoolVar(&cfg.ropeScaling, "rope-scaling", false, "the model's longer context with YaRN rope scaling, where it has one (Qwen3: 131,072 tokens)")
	fs.IntVar(&cfg.maxModelLen, "max-model-len", 0, "context of each engine (0: the longest that fits)")
	usedGB := fs.Float64("used-gb", 0, "memory other programs use on each GPU, in GB (GiB), e.g. a game's")
	fs.StringVar(&cfg.hfCache, "hf-cache", "", "Hugging Face home to read models from (HF_HOME, models under its hub/; default $HF_HOME or ~/.cache/huggingface)")
	fs.BoolVar(&cfg.json, "json", false, "print the plan (with --agent: every layout's figures and the recommendation) as JSON")
	fs.StringVar(&cfg.agent, "agent", "", "evaluate the layouts that fit (one engine per GPU, TP, FP8 KV, YaRN) on this client's simulated workload and recommend one: "+
		strings.Join(bench.ClientPresetNames(), ", "))
	fs.IntVar(&cfg.sessions, "sessions", 4, fmt.Sprintf("with --agent: the client's sessions at once (each layout runs %d times as many in all, to their end, on each of %d workloads)", bench.EvaluationRounds, bench.EvaluationSeeds))
	fs.Uint64Var(&cfg.seed, "seed", catalog.AgentEvaluationSeed, fmt.Sprintf("with --agent: the seed of the first of the %d simulated workloads (hearth up --agent uses the default)", bench.EvaluationSeeds))
	fs.IntVar(&cfg.rigs, "rigs", 1, "with --agent: plan for a cluster of this many machines, each with the GPUs named (--sim 1x4090 --rigs 4: four single-4090 gaming rigs), and say what each holds")
	fs.StringVar(&cfg.layoutMode, "layout", daemon.LayoutAgent, "the layout to plan without --tp, --kv-cache-dtype, --rope-scaling or --max-model-len, as hearth up serves it: agent (the layout for coding agents) or per-gpu (one engine per GPU)")
	if err := parseFlags(fs, args); err != nil {
		return cfg, err
	}
	set := flagsSet(fs)
	cfg.layoutGiven = set["tp"] || set["kv-cache-dtype"] || set["rope-scaling"] || set["max-model-len"]
	switch {
	case !slices.Contains(daemon.LayoutNames(), cfg.layoutMode):
		return cfg, fmt.Errorf("%w: --layout %q: want %s", errUsage, cfg.layoutMode, strings.Join(daemon.LayoutNames(), " or "))
	case set["layout"] && (cfg.layoutGiven || cfg.agent != ""):
		return cfg, fmt.Errorf("%w: --layout goes without --agent, --tp, --kv-cache-dtype, --rope-scaling and --max-model-len, which set the layout themselves", errUsage)
	case cfg.agent != "" && !slices.Contains(bench.ClientPresetNames(), cfg.agent):
		return cfg, fmt.Errorf("%w: --agent %q: want one of %s", errUsage, cfg.agent, strings.Join(bench.ClientPresetNames(), ", "))
	case cfg.agent != "" && (set["tp"] || set["kv-cache-dtype"] || set["rope-scaling"] || set["max-model-len"]):
		return cfg, fmt.Errorf("%w: --agent evaluates the layouts itself: leave out --tp, --kv-cache-dtype, --rope-scaling and --max-model-len", errUsage)
	case cfg.agent == "" && (set["sessions"] || set["seed"] || set["rigs"]):
		return cfg, fmt.Errorf("%w: --sessions, --seed and --rigs go with --agent", errUsage)
	case cfg.rigs < 1 || cfg.rigs > 16:
		return cfg, fmt.Errorf("%w: --rigs %d: want 1 to 16", errUsage, cfg.rigs)
	case cfg.rigs > 1 && cfg.json:
		return cfg, fmt.Errorf("%w: --rigs prints text only", errUsage)
	case cfg.agent != "" && (cfg.sessions < 1 || cfg.sessions > 64):
		return cfg, fmt.Errorf("%w: --sessions %d: want 1 to 64", errUsage, cfg.sessions)
	case *gpuList == "" && *sim == "":
		return cfg, fmt.Errorf("%w: name the GPUs with --gpu rtx4090 (or --sim 2x4090): hearth plan does not discover GPUs yet", errUsage)
	case *gpuList != "" && *sim != "":
		return cfg, fmt.Errorf("%w: --gpu and --sim exclude each other", errUsage)
	case cfg.tp < 1:
		return cfg, fmt.Errorf("%w: --tp must be at least 1", errUsage)
	case cfg.maxModelLen < 0:
		return cfg, fmt.Errorf("%w: --max-model-len must not be negative", errUsage)
	case cfg.layout().Validate() != nil:
		return cfg, fmt.Errorf("%w: %v", errUsage, cfg.layout().Validate())
	case !(*usedGB >= 0 && *usedGB <= 1<<20):
		return cfg, fmt.Errorf("%w: --used-gb must be a size in GB, not %v", errUsage, *usedGB)
	}
	used := uint64(math.Round(*usedGB * (1 << 30)))
	if *sim != "" {
		gpus, err := nodes.ParseSimSpec(*sim)
		if err != nil {
			return cfg, fmt.Errorf("%w: --sim: %v", errUsage, err)
		}
		for _, g := range gpus {
			use := g.PlannerUse()
			use.UsedBytes += used
			cfg.gpus = append(cfg.gpus, planGPU{label: fmt.Sprintf("%s/gpu%d", g.Node, g.Index), use: use})
		}
	} else {
		for i, kind := range strings.Split(*gpuList, ",") {
			board, ok := catalog.LookupGPU(kind)
			if !ok {
				return cfg, fmt.Errorf("%w: --gpu: unknown GPU %q (known: %s)", errUsage, strings.TrimSpace(kind), strings.Join(catalog.GPUKinds(), ", "))
			}
			cfg.gpus = append(cfg.gpus, planGPU{label: fmt.Sprintf("gpu %d", i), use: catalog.GPUUse{GPU: board, UsedBytes: used}})
		}
	}
	if cfg.hfCache == "" {
		cfg.hfCache = catalog.HFHome(env.getenv)
	}
	var err error
	cfg.hfCache, err = readHFHome(env, cfg.hfCache)
	return cfg, err
}
