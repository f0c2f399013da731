package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"

	"github.com/hearth-llm/hearth/bench"
	"github.com/hearth-llm/hearth/catalog"
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
	// agent, when set, evaluates the layouts on that client's preset
	// workload at sessions concurrent sessions instead of planning one.
	agent    string
	sessions int
	seed     uint64
}

// agentEvaluationSeed is the seed hearth up --agent and, unless --seed says
// another, hearth plan --agent simulate with: a fixed one, so that the
// recommendation is repeatable.
const agentEvaluationSeed = 1

// layout is the layout the flags ask for.
func (c planConfig) layout() catalog.Layout {
	return catalog.Layout{TP: c.tp, KVCacheDtype: c.kvCacheDtype, RopeScaling: c.ropeScaling}
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
		model, err = catalog.ResolveModel(cfg.model, cfg.hfCache)
	}
	if err != nil {
		return err
	}
	if cfg.agent != "" {
		ev, err := evaluateAgentLayouts(ctx, cfg, uses, model, env.layoutEvaluationSize())
		if err != nil {
			return err
		}
		if cfg.json {
			enc := json.NewEncoder(env.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(agentPlanJSONOf(model, ev))
		}
		fmt.Fprintf(env.stdout, "%s (%s), layouts for %s\n", model.Name, model.Repo, cfg.agent)
		return bench.WriteLayoutTable(env.stdout, ev)
	}
	if model, err = catalog.ApplyLayout(model, cfg.layout()); err != nil {
		return err
	}
	plan, err := catalog.PlanEngines(catalog.PlanRequest{GPUs: uses, Model: model, TP: cfg.tp, MaxModelLen: cfg.maxModelLen,
		KVCacheDtype: cfg.kvCacheDtype})
	if err != nil {
		return err
	}
	out := planJSONOf(plan, cfg)
	if cfg.json {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return writePlanText(env.stdout, out)
}

// evaluateAgentLayouts runs the agent client's preset workload on each
// layout of model that fits the GPUs (bench.AgentCandidates) and
// recommends one from an evaluation of size.
func evaluateAgentLayouts(ctx context.Context, cfg planConfig, uses []catalog.GPUUse, model catalog.Model, size bench.EvaluationSize) (bench.LayoutEvaluation, error) {
	preset, err := bench.PresetByName(cfg.agent)
	if err != nil {
		return bench.LayoutEvaluation{}, err
	}
	kinds := make([]string, len(uses))
	for i, u := range uses {
		kinds[i] = u.GPU.Kind
	}
	return bench.EvaluateLayouts(ctx, bench.AgentCandidates(uses, model), kinds, preset, cfg.sessions, cfg.seed, size)
}

func parsePlanFlags(env *environment, args []string) (planConfig, error) {
	fs := newFlagSet(env, "plan",
		"plan [--model M] (--gpu rtx4090[,rtx3090...] | --sim 2x4090) [--tp N] [--kv-cache-dtype auto|fp8] [--rope-scaling] [--max-model-len N] [--used-gb X] [--hf-cache DIR] [--json]\n"+
			"       hearth plan --agent claude-code|opencode|codex [--sessions N] [--seed N] [--model M] (--gpu ... | --sim 2x4090) [--json]")
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
	fs.StringVar(&cfg.hfCache, "hf-cache", "", "Hugging Face hub cache to read models from (default $HF_HOME/hub or ~/.cache/huggingface/hub)")
	fs.BoolVar(&cfg.json, "json", false, "print the plan (with --agent: every layout's figures and the recommendation) as JSON")
	fs.StringVar(&cfg.agent, "agent", "", "evaluate the layouts that fit (one engine per GPU, TP, FP8 KV, YaRN) on this client's simulated workload and recommend one: "+
		strings.Join(bench.ClientPresetNames(), ", "))
	fs.IntVar(&cfg.sessions, "sessions", 4, fmt.Sprintf("with --agent: the client's sessions at once (each layout runs %d times as many in all, to their end, on each of %d workloads)", bench.EvaluationRounds, bench.EvaluationSeeds))
	fs.Uint64Var(&cfg.seed, "seed", agentEvaluationSeed, fmt.Sprintf("with --agent: the seed of the first of the %d simulated workloads (hearth up --agent uses the default)", bench.EvaluationSeeds))
	if err := parseFlags(fs, args); err != nil {
		return cfg, err
	}
	set := flagsSet(fs)
	switch {
	case cfg.agent != "" && !slices.Contains(bench.ClientPresetNames(), cfg.agent):
		return cfg, fmt.Errorf("%w: --agent %q: want one of %s", errUsage, cfg.agent, strings.Join(bench.ClientPresetNames(), ", "))
	case cfg.agent != "" && (set["tp"] || set["kv-cache-dtype"] || set["rope-scaling"] || set["max-model-len"]):
		return cfg, fmt.Errorf("%w: --agent evaluates the layouts itself: leave out --tp, --kv-cache-dtype, --rope-scaling and --max-model-len", errUsage)
	case cfg.agent == "" && (set["sessions"] || set["seed"]):
		return cfg, fmt.Errorf("%w: --sessions and --seed go with --agent", errUsage)
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
			use := gpuUseOf(g)
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
		cfg.hfCache = catalog.HFCacheDir(env.getenv)
	}
	return cfg, nil
}

// gpuUseOf is a GPU as the planner sees it (catalog.GPUUseOf).
func gpuUseOf(g nodes.GPU) catalog.GPUUse {
	return catalog.GPUUseOf(g.Kind, g.Name, g.MemoryTotal, g.MemoryUsed)
}

// planJSON is hearth plan --json: the plan per GPU, engine figures repeated
// on each GPU of the engine. Field names are stable.
type planJSON struct {
	Model           string        `json:"model"`
	Repo            string        `json:"repo"`
	DefaultModel    bool          `json:"default_model"`
	TP              int           `json:"tp"`
	KVCacheDtype    string        `json:"kv_cache_dtype"`
	RopeScaling     bool          `json:"rope_scaling"`
	Layout          string        `json:"layout"`
	Engines         int           `json:"engines"`
	MaxModelLen     int           `json:"max_model_len"`
	AgentTurnTokens int           `json:"agent_turn_tokens"`
	GPUs            []planGPUJSON `json:"gpus"`
	Summary         string        `json:"summary"`
}

type planGPUJSON struct {
	GPU             string `json:"gpu"`
	Engine          int    `json:"engine"`
	Kind            string `json:"kind"`
	Name            string `json:"name"`
	TotalBytes      uint64 `json:"total_bytes"`
	UsedBytes       uint64 `json:"used_bytes"`
	FreeBytes       uint64 `json:"free_bytes"`
	WeightBytes     uint64 `json:"weight_bytes"`
	KVBytesPerToken int    `json:"kv_bytes_per_token"`
	// ActivationReserveBytes is activations plus memory outside PyTorch,
	// both of which also appear on their own.
	ActivationReserveBytes uint64 `json:"activation_reserve_bytes"`
	ActivationBytes        uint64 `json:"activation_bytes"`
	NonTorchBytes          uint64 `json:"non_torch_bytes"`
	// GPUMemoryUtilization is vLLM's --gpu-memory-utilization,
	// MemFractionStatic SGLang's --mem-fraction-static.
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization"`
	MemFractionStatic    float64 `json:"mem_fraction_static"`
	KVCacheBytes         uint64  `json:"kv_cache_bytes"`
	// KVTokens, MaxModelLen and AgentTurns are the engine's.
	KVTokens    int `json:"kv_tokens"`
	MaxModelLen int `json:"max_model_len"`
	AgentTurns  int `json:"agent_turns"`
}

func planJSONOf(p catalog.Plan, cfg planConfig) planJSON {
	out := planJSON{
		Model: p.Model.Name, Repo: p.Model.Repo, DefaultModel: cfg.model == "", TP: p.TP, Engines: len(p.Engines),
		KVCacheDtype: cfg.layout().KVCacheDtypeOrAuto(), RopeScaling: cfg.ropeScaling, Layout: cfg.layout().String(),
		MaxModelLen: p.MaxModelLen, AgentTurnTokens: catalog.AgentTurnTokens,
	}
	turns := 0
	for i, e := range p.Engines {
		turns += e.AgentTurns
		for _, g := range e.GPUs {
			out.GPUs = append(out.GPUs, planGPUJSON{
				GPU: cfg.gpus[g.Index].label, Engine: i, Kind: g.GPU.Kind, Name: g.GPU.Name,
				TotalBytes: g.TotalBytes, UsedBytes: g.UsedBytes, FreeBytes: g.FreeBytes,
				WeightBytes: roundBytes(g.WeightBytes), KVBytesPerToken: g.KVBytesPerToken,
				ActivationReserveBytes: roundBytes(g.ActivationBytes + g.NonTorchBytes),
				ActivationBytes:        roundBytes(g.ActivationBytes), NonTorchBytes: roundBytes(g.NonTorchBytes),
				GPUMemoryUtilization: e.GPUMemoryUtilization, MemFractionStatic: e.MemFractionStatic,
				KVCacheBytes: roundBytes(g.KVCacheBytes), KVTokens: e.KVTokens, MaxModelLen: e.MaxModelLen, AgentTurns: e.AgentTurns,
			})
		}
	}
	engines := fmt.Sprintf("%d engines on %d GPUs", len(p.Engines), len(out.GPUs))
	if len(p.Engines) == 1 {
		engines = fmt.Sprintf("1 engine on %s", plural(len(out.GPUs), "GPU"))
	}
	if flags := cfg.layout().Flags(); flags != "" {
		engines += " (" + flags + ")"
	}
	inAll := ""
	if len(p.Engines) > 1 {
		inAll = " in all"
	}
	out.Summary = fmt.Sprintf("%s fits: %s, context %s tokens, %s of %dk tokens at once%s.",
		p.Model.Name, engines, humanize.Comma(int64(p.MaxModelLen)), plural(turns, "agent turn"), catalog.AgentTurnTokens/1024, inAll)
	return out
}

// agentPlanJSON is hearth plan --agent --json: every candidate layout as the
// simulation measured it and the recommendation. Field names are stable.
type agentPlanJSON struct {
	Model    string `json:"model"`
	Repo     string `json:"repo"`
	Agent    string `json:"agent"`
	Sessions int    `json:"sessions"`
	// TotalSessions is the closed set of sessions every layout ran to their
	// end: the evaluation's rounds × Sessions on each of the Seeds workloads
	// from seed Seed.
	TotalSessions int               `json:"total_sessions"`
	Seed          uint64            `json:"seed"`
	Seeds         int               `json:"seeds"`
	Policy        string            `json:"policy"`
	Layouts       []agentLayoutJSON `json:"layouts"`
	Recommended   string            `json:"recommended"`
	Reason        string            `json:"reason"`
}

// agentLayoutJSON is one layout: times in ms, task time (a finished
// session's first request to its last token; 0 when none finished) in s.
type agentLayoutJSON struct {
	Layout                string  `json:"layout"`
	TP                    int     `json:"tp"`
	KVCacheDtype          string  `json:"kv_cache_dtype"`
	RopeScaling           bool    `json:"rope_scaling"`
	Engines               int     `json:"engines"`
	MaxModelLen           int     `json:"max_model_len"`
	PeakContext           int     `json:"peak_context"`
	SessionsFit           int     `json:"sessions_fit"`
	TTFTP50Ms             float64 `json:"ttft_p50_ms"`
	TTFTP90Ms             float64 `json:"ttft_p90_ms"`
	TTFTP99Ms             float64 `json:"ttft_p99_ms"`
	TaskP50S              float64 `json:"task_p50_s"`
	CompactionsPerSession float64 `json:"compactions_per_session"`
	Errors                int     `json:"errors"`
	StartedSessions       int     `json:"started_sessions"`
	FinishedSessions      int     `json:"finished_sessions"`
	OutputTokS            float64 `json:"output_tok_s"`
	Recommended           bool    `json:"recommended"`
}

func agentPlanJSONOf(model catalog.Model, ev bench.LayoutEvaluation) agentPlanJSON {
	out := agentPlanJSON{Model: model.Name, Repo: model.Repo, Agent: ev.Preset, Sessions: ev.Sessions, TotalSessions: ev.TotalSessions, Seed: ev.Seed, Seeds: ev.Size.Seeds,
		Policy: bench.EvaluationPolicy, Recommended: ev.Recommended().Candidate.Layout.String(), Reason: ev.Reason}
	for i, r := range ev.Layouts {
		l, s := r.Candidate.Layout, r.Summary
		task := 0.0
		if s.FinishedSessions > 0 {
			task = math.Round(s.Session.P50) / 1000
		}
		out.Layouts = append(out.Layouts, agentLayoutJSON{
			Layout: l.String(), TP: l.TPSize(), KVCacheDtype: l.KVCacheDtypeOrAuto(), RopeScaling: l.RopeScaling,
			Engines: len(r.Candidate.Plan.Engines), MaxModelLen: r.MaxModelLen, PeakContext: r.PeakContext, SessionsFit: r.SessionsFit,
			TTFTP50Ms: round1(s.TTFT.P50), TTFTP90Ms: round1(s.TTFT.P90), TTFTP99Ms: round1(s.TTFT.P99), TaskP50S: task,
			CompactionsPerSession: math.Round(s.CompactionsPerSession*1000) / 1000, Errors: s.Errors,
			StartedSessions: s.StartedSessions, FinishedSessions: s.FinishedSessions, OutputTokS: round1(s.OutputTokS),
			Recommended: i == ev.Best,
		})
	}
	return out
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// writePlanText prints a small table per GPU and the summary.
func writePlanText(w io.Writer, p planJSON) error {
	chosen := ""
	if p.DefaultModel {
		chosen = ", the largest that fits"
	}
	fmt.Fprintf(w, "%s (%s%s)\nlayout: %s\n", p.Model, p.Repo, chosen, p.Layout)
	for _, g := range p.GPUs {
		fmt.Fprintf(w, "\n%s: %s, engine %d\n", g.GPU, g.Name, g.Engine)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "  free\t%s of %s (%s used by other programs)\n", formatGiB(g.FreeBytes), formatGiB(g.TotalBytes), formatGiB(g.UsedBytes))
		fmt.Fprintf(tw, "  weights\t%s\n", formatGiB(g.WeightBytes))
		fmt.Fprintf(tw, "  KV per token\t%d KiB\n", g.KVBytesPerToken>>10)
		fmt.Fprintf(tw, "  activation reserve\t%s (activations %s, outside PyTorch %s)\n",
			formatGiB(g.ActivationReserveBytes), formatGiB(g.ActivationBytes), formatGiB(g.NonTorchBytes))
		fmt.Fprintf(tw, "  memory fraction\t%.2f vLLM --gpu-memory-utilization, %.3f SGLang --mem-fraction-static\n",
			g.GPUMemoryUtilization, g.MemFractionStatic)
		fmt.Fprintf(tw, "  KV cache\t%s, %s tokens\n", formatGiB(g.KVCacheBytes), humanize.Comma(int64(g.KVTokens)))
		fmt.Fprintf(tw, "  context\t%s tokens (--max-model-len)\n", humanize.Comma(int64(g.MaxModelLen)))
		fmt.Fprintf(tw, "  %dk-token turns\t%d at once\n", p.AgentTurnTokens/1024, g.AgentTurns)
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\n%s\n", p.Summary)
	return err
}

func roundBytes(b float64) uint64 { return uint64(math.Round(max(b, 0))) }

func formatGiB(b uint64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
