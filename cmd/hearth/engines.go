package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/dustin/go-humanize"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/installer/doctor"
	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
	"github.com/hearth-llm/hearth/runtime/process"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// planEngines turns the command line and the GPUs it picked into one
// engine per GPU (per --tp GPUs). notes holds, by engine name, why an
// engine got less than its GPUs could give it (other programs hold memory).
func planEngines(cfg upConfig, gpus []nodes.GPU) (specs []hruntime.Spec, notes map[string]string, err error) {
	// Without --engine the simulated engine runs from the spec (sim and
	// process runtimes), playing vLLM.
	engine, simulated := hruntime.KindVLLM, cfg.engine == ""
	if !simulated {
		engine = hruntime.Kind(cfg.engine)
	}
	tp := max(cfg.tp, 1)
	if len(gpus) == 0 {
		return nil, nil, errors.New("up: no GPU to serve from")
	}
	if len(gpus)%tp != 0 {
		return nil, nil, fmt.Errorf("%w: --tp %d splits each engine over %d GPUs, and %d GPUs do not divide by it", errUsage, tp, tp, len(gpus))
	}
	toSpec := func(g nodes.GPU) hruntime.GPU {
		return hruntime.GPU{Index: g.Index, UUID: g.UUID, Kind: g.Kind, Name: g.Name, Node: g.Node}
	}
	specs = make([]hruntime.Spec, len(gpus)/tp)
	notes = map[string]string{}
	var kvBytes []float64 // each real engine's GPU KV cache, when planned
	for i := range specs {
		gpu := gpus[i*tp]
		var peers []hruntime.GPU
		for _, g := range gpus[i*tp+1 : (i+1)*tp] {
			peers = append(peers, toSpec(g))
		}
		spec := hruntime.Spec{
			Name:      fmt.Sprintf("%s/gpu%d", gpu.Node, gpu.Index),
			Engine:    engine,
			Simulated: simulated,
			Model:     cfg.models[i%len(cfg.models)],
			// The engine loads the model's repository; clients ask for
			// Hearth's name of it.
			ModelPath:       modelRepo(cfg.models[i%len(cfg.models)]),
			ExtraArgs:       cfg.engineArgs,
			GPU:             toSpec(gpu),
			TensorParallel:  peers,
			MaxModelLen:     cfg.maxModelLen,
			KVOffloadingGiB: cfg.kvOffloadGiB,
			KVStoreDir:      cfg.kvStoreDir,
			Speedup:         cfg.speedup,
			Seed:            cfg.seed, // equal content hashes equally in every engine, as vLLM's sha256 does
			AllowWriteTools: cfg.simAgent.AllowWriteTools,
			MinToolCalls:    cfg.simAgent.MinToolCalls,
			MaxToolCalls:    cfg.simAgent.MaxToolCalls,
		}
		if !simulated {
			note, kv, err := planMemory(&spec, cfg, gpus[i*tp:(i+1)*tp])
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
	if cfg.kvOffloadAuto && len(kvBytes) == len(specs) && !slices.Contains(kvBytes, 0) {
		planHostRAM(cfg, specs, kvBytes, notes)
	}
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
// the plan of what fits its GPUs (catalog.PlanEngines), and fails with the
// plan's one sentence when the model does not fit. GPUs of unknown size
// (named by index, without discovery) and models Hearth has no shape for
// keep the engine's own defaults. The plan counts only the memory that is
// free: when other programs' share cost the engine context, note says so.
func planMemory(spec *hruntime.Spec, cfg upConfig, gpus []nodes.GPU) (note string, kvBytes float64, err error) {
	uses := make([]catalog.GPUUse, len(gpus))
	for i, g := range gpus {
		if uses[i] = gpuUseOf(g); uses[i].GPU.MemoryBytes == 0 {
			return "", 0, nil
		}
	}
	hub := "" // the catalog's figures alone
	if cfg.hfCache != "" {
		hub = filepath.Join(cfg.hfCache, "hub")
	}
	model, err := catalog.ResolveModel(spec.ModelPath, hub)
	if err != nil {
		return "", 0, nil // the engine reads the model itself
	}
	req := catalog.PlanRequest{GPUs: uses, Model: model, TP: len(gpus), MaxModelLen: spec.MaxModelLen}
	plan, err := catalog.PlanEngines(req)
	if err != nil {
		return "", 0, fmt.Errorf("up: engine %s: %w", spec.Name, err)
	}
	e := plan.Engines[0]
	spec.GPUMemoryUtilization = spec.Engine.Descriptor().MemoryFraction(e)
	spec.MaxModelLen = e.MaxModelLen
	return planNote(req, e), e.KVCacheBytes(), nil
}

// planHostRAM sizes the real engines' host-RAM KV tiers from the host's
// memory (catalog.PlanHostTiers: headroom for the system, never more than
// is free). A note says when a tier came out smaller than its GPU's KV
// cache, or none fitted. Memory that cannot be read leaves the flag's
// default.
func planHostRAM(cfg upConfig, specs []hruntime.Spec, kvBytes []float64, notes map[string]string) {
	total, available, err := cfg.hostMemory()
	if err != nil {
		return
	}
	for i, tier := range catalog.PlanHostTiers(total, available, kvBytes) {
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

// hostMemory reads the host's total and available memory.
func hostMemory() (total, available uint64, err error) {
	var h doctor.HostSystem
	if total, err = h.MemTotal(); err != nil {
		return 0, 0, err
	}
	available, err = h.MemAvailable()
	return total, available, err
}

// planNote says what other programs' memory cost an engine, "" when they
// hold none or it cost nothing.
func planNote(req catalog.PlanRequest, got catalog.EnginePlan) string {
	var other uint64
	for i, u := range req.GPUs {
		other += u.UsedBytes
		req.GPUs[i].UsedBytes = 0
	}
	if other == 0 {
		return ""
	}
	whole, err := catalog.PlanEngines(req)
	if err != nil || whole.Engines[0].KVTokens <= got.KVTokens {
		return ""
	}
	note := fmt.Sprintf("other programs hold %.1f GiB of this GPU: KV cache for %s tokens instead of %s", float64(other)/(1<<30), humanize.Comma(int64(got.KVTokens)), humanize.Comma(int64(whole.Engines[0].KVTokens)))
	if got.MaxModelLen < whole.Engines[0].MaxModelLen {
		note += fmt.Sprintf(", context cut to %s", humanize.Comma(int64(got.MaxModelLen)))
	}
	return note
}

// estimateProfile is what the router assumes of an engine until the engine
// tells its KV capacity: the catalog's performance model of the GPU and
// model, which knows the boards and models Hearth knows.
func estimateProfile(spec hruntime.Spec) (catalog.Profile, error) {
	gpu, known := catalog.LookupGPU(spec.GPU.Kind)
	if !known {
		gpu, _ = catalog.LookupGPU("rtx4090") // an unknown board: size it as the common case
	}
	model, ok := catalog.LookupModel(spec.Model)
	if !ok {
		// A model Hearth has no figures for: the engine's own measurement
		// will say its capacity.
		return catalog.Profile{BlockSize: tokenizer.DefaultBlockSize, MaxModelLen: spec.MaxModelLen}, nil
	}
	return catalog.ProfileOf(catalog.EngineConfig{
		GPU: gpu, Model: model, SGLang: spec.Engine == hruntime.KindSGLang,
		NumGPUBlocks: spec.NumGPUBlocks, MaxModelLen: spec.MaxModelLen,
		MemoryFraction: spec.GPUMemoryUtilization, CPUOffloadGiB: spec.KVOffloadingGiB,
	})
}

// modelRepo is the Hugging Face repository of a catalog model, or the name
// itself.
func modelRepo(name string) string {
	if m, ok := catalog.LookupModel(name); ok {
		return m.Repo
	}
	return name
}

// newLauncher builds the runtime --engine-runtime names, and what closes
// it.
// newLauncher picks the engines' runtime. In-process engines get their
// part of the node store (nil: none) from the daemon's handle on it.
func newLauncher(ctx context.Context, cfg upConfig, tok *tokenizer.Model, store *nodeStore, progress func(string, docker.PullProgress), log *slog.Logger) (hruntime.Launcher, func(), error) {
	if cfg.engineRuntime == "docker" {
		return newDockerLauncher(ctx, cfg, progress, log)
	}
	l, err := newLocalLauncher(cfg, tok, store, log)
	return l, func() {}, err
}

func newLocalLauncher(cfg upConfig, tok *tokenizer.Model, store *nodeStore, log *slog.Logger) (hruntime.Launcher, error) {
	switch cfg.engineRuntime {
	case "process":
		hearth := cfg.hearthBinary
		if hearth == "" {
			exe, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("up: the hearth binary, to run engines: %w", err)
			}
			hearth = exe
		}
		return &process.Launcher{Hearth: hearth, Env: os.Environ(), Logger: log.With("component", "engine")}, nil
	default:
		l := &sim.Launcher{Tokenizer: tok, Logger: log.With("component", "engine")}
		if store != nil {
			l.NodeStore = store.space
		}
		return l, nil
	}
}
