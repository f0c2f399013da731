package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/installer/doctor"
	"github.com/hearth-llm/hearth/installer/wsl"
	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
	"github.com/hearth-llm/hearth/runtime/process"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// Plan is the engines Run would start with cfg: the GPUs it reads, the
// layout for them (chooseLayout), and one engine per GPU (per cfg.TP GPUs). notes holds, by engine name, why an
// engine got less than its GPUs could give it.
func Plan(ctx context.Context, cfg Config, opts ...Option) (specs []hruntime.Spec, notes map[string]string, err error) {
	for _, o := range opts {
		o(&cfg)
	}
	src, err := gpuSourceOf(cfg)
	if err != nil {
		return nil, nil, err
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}
	inv, discoverErr := src.Discover(ctx)
	gpus, err := selectGPUs(cfg, inv, discoverErr, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, err
	}
	if _, err := chooseLayout(&cfg, gpus); err != nil {
		return nil, nil, err
	}
	return planEngines(cfg, gpus)
}

// planEngines turns the command line and the GPUs it picked into one
// engine per GPU (per --tp GPUs). notes holds, by engine name, why an
// engine got less than its GPUs could give it (other programs hold memory).
func planEngines(cfg Config, gpus []nodes.GPU) (specs []hruntime.Spec, notes map[string]string, err error) {
	// Without --engine the simulated engine runs from the spec (sim and
	// process runtimes), playing vLLM.
	engine, simulated := hruntime.KindVLLM, cfg.Engine == ""
	if !simulated {
		engine = hruntime.Kind(cfg.Engine)
	}
	tp := max(cfg.TP, 1)
	if len(gpus) == 0 {
		return nil, nil, errors.New("up: no GPU to serve from")
	}
	if len(gpus)%tp != 0 {
		return nil, nil, fmt.Errorf("%w: --tp %d splits each engine over %d GPUs, and %d GPUs do not divide by it", ErrUsage, tp, tp, len(gpus))
	}
	toSpec := func(g nodes.GPU) hruntime.GPU {
		return hruntime.GPU{Index: g.Index, UUID: g.UUID, Kind: g.Kind, Name: g.Name, Node: g.Node}
	}
	// One engine per GPU group, serving the models in turn; with more
	// models than groups, one engine per model, model i on group i %
	// groups, which serves its models on demand (residency.go): they sleep
	// and wake, so their engines start in sleep mode.
	groups := len(gpus) / tp
	onDemand := len(cfg.Models) > groups
	specs = make([]hruntime.Spec, max(groups, len(cfg.Models)))
	notes = map[string]string{}
	shares, err := sharePlans(cfg, gpus)
	if err != nil {
		return nil, nil, err
	}
	var kvBytes []float64 // each real engine's GPU KV cache, when planned
	for i := range specs {
		group := i % groups
		gpu := gpus[group*tp]
		var peers []hruntime.GPU
		for _, g := range gpus[group*tp+1 : (group+1)*tp] {
			peers = append(peers, toSpec(g))
		}
		model := cfg.Models[i%len(cfg.Models)]
		overrides, err := modelOverrides(cfg, model)
		if err != nil {
			return nil, nil, err
		}
		name := fmt.Sprintf("%s/gpu%d", gpu.Node, gpu.Index)
		extraArgs, env := engineArgs(cfg, simulated), []string(nil)
		if onDemand {
			name += "/" + model
			if sleep := engine.Descriptor().SleepMode; sleep != nil {
				extraArgs = append(slices.Clip(extraArgs), sleep.Flags...)
				env = slices.Clone(sleep.Env)
			}
		}
		spec := hruntime.Spec{
			Name:      name,
			Engine:    engine,
			Simulated: simulated,
			Model:     model,
			// The engine loads the model's repository; clients ask for
			// Hearth's name of it.
			ModelPath:      catalog.ModelRepo(model),
			ExtraArgs:      extraArgs,
			Env:            env,
			GPU:            toSpec(gpu),
			TensorParallel: peers,
			MaxModelLen:    cfg.MaxModelLen,
			// The step budget the plan sizes the activations for
			// (planMemory sets the plan's, the same one).
			MaxBatchedTokens: layoutOf(cfg).StepBudget(),
			KVCacheDtype:     kvCacheDtypeOf(cfg),
			ModelOverrides:   overrides,
			KVOffloadingGiB:  cfg.KVOffloadGiB,
			KVStoreDir:       cfg.KVStoreDir,
			// An --image of an engine's own repository names the release
			// it runs, whose wire facts Hearth then speaks (and which a
			// simulated engine plays).
			EngineVersion:   engine.Descriptor().ImageVersion(cfg.Image),
			Speedup:         cfg.Speedup,
			Seed:            cfg.Seed, // equal content hashes equally in every engine, as vLLM's sha256 does
			AllowWriteTools: cfg.SimAgent.AllowWriteTools,
			MinToolCalls:    cfg.SimAgent.MinToolCalls,
			MaxToolCalls:    cfg.SimAgent.MaxToolCalls,
		}
		shared, planned := shares[group]
		switch {
		case planned:
			// Served on demand from a group whose models share it: the
			// fraction the plan of the group gives it (sharePlans).
			e := shared.Models[i/groups].Engine
			spec.GPUMemoryUtilization = engine.Descriptor().MemoryFraction(e)
			if note := shareNote(shared, model); note != "" {
				notes[spec.Name] = note
			}
			if !simulated {
				spec.MaxModelLen = e.MaxModelLen
				kvBytes = append(kvBytes, e.KVCacheBytes())
			}
		case simulated && onDemand:
			// A model that loads on demand would fail only at its first
			// request: one that cannot fit its GPUs is refused now, with
			// the plan's fixes, as a real engine's is by planMemory.
			uses := nodes.PlannerUses(gpus[group*tp : (group+1)*tp])
			layout := catalog.Layout{KVCacheDtype: spec.KVCacheDtype, RopeScaling: spec.ModelOverrides != "", MaxBatchedTokens: spec.MaxBatchedTokens}
			if _, _, err := catalog.PlanEngineMemory(spec.ModelPath, cfg.hubDir(), uses, spec.MaxModelLen, layout); err != nil {
				return nil, nil, fmt.Errorf("up: engine %s: %w", spec.Name, err)
			}
		case !simulated:
			note, kv, err := planMemory(&spec, cfg, gpus[group*tp:(group+1)*tp])
			if err != nil {
				return nil, nil, err
			}
			if note != "" {
				notes[spec.Name] = note
			}
			kvBytes = append(kvBytes, kv)
		}
		specs[i] = spec
	}
	host := hostWSL()
	if cfg.KVOffloadAuto && len(kvBytes) == len(specs) && !slices.Contains(kvBytes, 0) {
		planHostRAM(specs, kvBytes, notes, host.PinnedLimit())
	}
	wslEngineEnv(specs, host)
	for i := range specs {
		spec := specs[i]
		estimate, err := estimateProfile(spec)
		if err != nil {
			return nil, nil, fmt.Errorf("up: engine %s: %w", spec.Name, err)
		}
		spec.Estimate = estimate
		if cfg.tweakSpec != nil {
			cfg.tweakSpec(&spec)
		}
		specs[i] = spec
	}
	return specs, notes, nil
}

// planMemory sets a real engine's memory fraction and context length from
// the plan of what fits its GPUs (catalog.PlanEngineMemory), and fails with
// the plan's one sentence when the model does not fit. The plan counts only
// the memory that is free: when other programs' share cost the engine
// context, note says so.
func planMemory(spec *hruntime.Spec, cfg Config, gpus []nodes.GPU) (note string, kvBytes float64, err error) {
	uses := nodes.PlannerUses(gpus)
	// Without a cache, the catalog's figures alone.
	layout := catalog.Layout{KVCacheDtype: spec.KVCacheDtype, RopeScaling: spec.ModelOverrides != "", MaxBatchedTokens: spec.MaxBatchedTokens}
	plan, ok, err := catalog.PlanEngineMemory(spec.ModelPath, cfg.hubDir(), uses, spec.MaxModelLen, layout)
	if err != nil {
		return "", 0, fmt.Errorf("up: engine %s: %w", spec.Name, err)
	}
	if !ok {
		return "", 0, nil
	}
	spec.GPUMemoryUtilization = spec.Engine.Descriptor().MemoryFraction(plan.Engine)
	spec.MaxModelLen = plan.MaxModelLen
	spec.MaxBatchedTokens = plan.MaxBatchedTokens
	return plan.Note, plan.KVCacheBytes, nil
}

// layoutOf is the engines' layout as cfg sets it.
func layoutOf(cfg Config) catalog.Layout {
	return catalog.Layout{TP: cfg.TP, KVCacheDtype: cfg.KVCacheDtype, RopeScaling: cfg.RopeScaling, MaxBatchedTokens: cfg.MaxBatchedTokens}
}

// kvCacheDtypeOf is the KV cache dtype the engines are told: none for the
// default, so that their command lines stay as they were.
func kvCacheDtypeOf(cfg Config) string {
	if cfg.KVCacheDtype == catalog.KVCacheAuto {
		return ""
	}
	return cfg.KVCacheDtype
}

// modelOverrides is the override of model's config.json that --rope-scaling
// asks for (its YaRN context), "" without the flag; a model without a
// longer context is a usage error.
func modelOverrides(cfg Config, model string) (string, error) {
	if !cfg.RopeScaling {
		return "", nil
	}
	m, ok := catalog.LookupModel(model)
	if !ok {
		return "", fmt.Errorf("%w: --rope-scaling: Hearth knows no longer context of %s", ErrUsage, model)
	}
	js := m.RopeScalingJSON()
	if js == "" {
		return "", fmt.Errorf("%w: --rope-scaling: %s has no longer context with rope scaling", ErrUsage, m.DisplayName())
	}
	return js, nil
}

// planHostRAM sizes the real engines' host-RAM KV tiers from the host's
// memory (catalog.PlanHostTiers: headroom for the system, never more than
// is free, and what an engine keeps free when it allocates its tier,
// EngineKind.HostTierKeepFree). A note says when a tier came out smaller than its GPU's KV
// cache, or none fitted. Under WSL2 the tiers together stay within what
// the host can pin (pinnedLimit; 0: no such limit). Memory that cannot be
// read leaves the flag's default.
func planHostRAM(specs []hruntime.Spec, kvBytes []float64, notes map[string]string, pinnedLimit uint64) {
	total, available, err := hostMemory()
	if err != nil {
		return
	}
	var keepFree uint64
	for _, s := range specs {
		if k, ok := hruntime.Lookup(s.Engine); ok {
			keepFree = max(keepFree, k.HostTierKeepFree)
		}
	}
	for i, tier := range catalog.CapHostTiers(catalog.PlanHostTiers(total, available, keepFree, kvBytes), pinnedLimit) {
		specs[i].KVOffloadingGiB = tier.GiB
		if tier.Note == "" {
			continue
		}
		if notes[specs[i].Name] != "" {
			notes[specs[i].Name] += "; "
		}
		notes[specs[i].Name] += tier.Note
	}
}

// wslEngineEnv gives real engines on a WSL2 host the environment their
// kind needs there (EngineKind.WSLEnv).
func wslEngineEnv(specs []hruntime.Spec, host wsl.Facts) {
	if !host.WSL2 {
		return
	}
	for i := range specs {
		if specs[i].Simulated {
			continue
		}
		if kind, ok := hruntime.Lookup(specs[i].Engine); ok {
			specs[i].Env = append(specs[i].Env, kind.WSLEnv...)
		}
	}
}

// hostMemory reads the host's total and available memory.
func hostMemory() (total, available uint64, err error) {
	var h doctor.HostSystem
	if total, err = h.MemTotal(); err != nil {
		return 0, 0, err
	}
	available, err = h.MemAvailable()
	return total, available, err
}

// estimateProfile is what the router assumes of an engine until the engine
// tells its KV capacity: the catalog's performance model of the GPU and
// model, which knows the boards and models Hearth knows.
func estimateProfile(spec hruntime.Spec) (catalog.Profile, error) {
	e := hruntime.EngineConfigOf(spec)
	if e.Model.KVBytesPerToken() == 0 {
		// A model Hearth has no figures for: the engine's own measurement
		// will say its capacity.
		return catalog.Profile{BlockSize: tokenizer.DefaultBlockSize, MaxModelLen: spec.MaxModelLen}, nil
	}
	if e.GPU.MemoryBytes == 0 {
		e.GPU, _ = catalog.LookupGPU("rtx4090") // an unknown board: size it as the common case
	}
	return catalog.ProfileOf(e)
}

// newLauncher picks the engines' runtime. In-process engines get their
// part of the node store (nil: none) from the daemon's handle on it.
func newLauncher(ctx context.Context, cfg Config, tok *tokenizer.Model, store *kvbm.NodeStore, progress func(string, docker.PullProgress), log *slog.Logger) (hruntime.Launcher, func(), error) {
	if cfg.EngineRuntime == "docker" {
		return newDockerLauncher(ctx, cfg, progress, log)
	}
	l, err := newLocalLauncher(cfg, tok, store, log)
	return l, func() {}, err
}

// engineEnv is the environment of engines run as child processes: the
// daemon's, with the Hugging Face cache pointed at --hf-cache, where the
// daemon read the models' tokenizers (HF_HUB_CACHE too, which would
// otherwise take precedence over HF_HOME).
func engineEnv(cfg Config, env []string) []string {
	if cfg.HFCache == "" {
		return env
	}
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "HF_HOME=") && !strings.HasPrefix(kv, "HF_HUB_CACHE=") {
			out = append(out, kv)
		}
	}
	return append(out, "HF_HOME="+cfg.HFCache, "HF_HUB_CACHE="+cfg.hubDir())
}

func newLocalLauncher(cfg Config, tok *tokenizer.Model, store *kvbm.NodeStore, log *slog.Logger) (hruntime.Launcher, error) {
	switch cfg.EngineRuntime {
	case "process":
		hearth := cfg.hearthBinary
		if hearth == "" {
			exe, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("up: the hearth binary, to run engines: %w", err)
			}
			hearth = exe
		}
		return &process.Launcher{Hearth: hearth, Env: engineEnv(cfg, os.Environ()), Logger: log.With("component", "engine")}, nil
	default:
		l := &sim.Launcher{Tokenizer: tok, Logger: log.With("component", "engine")}
		if cfg.simTokenizer != nil {
			l.Tokenizer = cfg.simTokenizer(tok)
		}
		if store != nil {
			l.NodeStore = nodeStoreSpace(store)
		}
		return l, nil
	}
}

// contextShortfall says when the shortest context the engines are planned
// with leaves the agent clients' first prompts too little room
// (catalog.ContextShortfall), "" when it does not or no engine's context
// is known.
func contextShortfall(specs []hruntime.Spec) string {
	shortest := 0
	for _, s := range specs {
		if n := s.Estimate.MaxModelLen; n > 0 && (shortest == 0 || n < shortest) {
			shortest = n
		}
	}
	if shortest == 0 {
		return ""
	}
	return catalog.ContextShortfall(shortest)
}

// engineArgs is what every engine's command line gets appended: --engine-arg's,
// and --pprof for a simulated engine of a daemon that serves its profiles.
func engineArgs(cfg Config, simulated bool) []string {
	if !cfg.Profile || !simulated || cfg.EngineRuntime != RuntimeProcess {
		return cfg.EngineArgs
	}
	return append(slices.Clip(cfg.EngineArgs), "--pprof")
}
