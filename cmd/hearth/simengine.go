package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/daemon"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/runtime/sim/simcli"
	"github.com/hearth-llm/hearth/tokenizer"
)

// runSimEngine runs one simulated vLLM (or SGLang) server: the OpenAI API
// and metrics over HTTP, KV events over ZMQ, a modelled GPU underneath. The
// engine's own lines, as the real engine prints them, go to stdout; the
// simulator's log to stderr.
func runSimEngine(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "sim-engine", "sim-engine [flags]")
	listen := fs.String("listen", "127.0.0.1:8100", "HTTP address of the OpenAI API, /metrics and /health")
	kvEvents := fs.String("kv-events", "", "ZMQ PUB address for KV events, e.g. tcp://127.0.0.1:5557 (empty: no events)")
	kvReplay := fs.String("kv-replay", "", "ZMQ ROUTER address answering KV-event replay requests (needs --kv-events)")
	kvFormat := fs.String("kv-events-format", "map", "KV event layout: map (map events in an array batch), array (older vLLM, SGLang) or map-batch (vLLM main: the batch a map too)")
	kvTopic := fs.String("kv-events-topic", "kv-events", "topic frame of every KV-event message")
	kvFault := fs.String("kv-events-fault", env.getenv(hruntime.EnvSimKVEvents), "publish KV events Hearth cannot match, for tests of its start-up KV-event self-check: "+
		strings.Join(hruntime.SimKVEventFaults, ", ")+" (default $"+hruntime.EnvSimKVEvents+"; empty: as the engine release does)")
	engineVersion := fs.String("engine-version", "", "engine release played, e.g. 0.20.0 (vLLM) or 0.5.19 (SGLang): its KV-event layout replaces --kv-events-format (vLLM positional before 0.23, SGLang up to 0.5.19; maps since)")
	gpu := fs.String("gpu", "rtx4090", "modelled GPU: "+strings.Join(sim.GPUNames(), ", "))
	model := fs.String("model", "qwen3-14b-fp8", "modelled model: "+strings.Join(sim.ModelNames(), ", "))
	servedName := fs.String("served-model-name", "", "model id clients use (default: --model)")
	numBlocks := fs.Int("num-gpu-blocks", 0, "KV cache blocks (0: derive from GPU memory like vLLM)")
	blockSize := fs.Int("block-size", tokenizer.DefaultBlockSize, "tokens per KV block")
	maxSeqs := fs.Int("max-num-seqs", sim.DefaultMaxNumSeqs, "most requests running at once")
	maxBatched := fs.Int("max-num-batched-tokens", catalog.DefaultMaxBatchedTokens, "token budget of one scheduler step")
	maxModelLen := fs.Int("max-model-len", 0, "prompt plus output limit (0: the model's, capped by the KV cache)")
	memUtil := fs.Float64("gpu-memory-utilization", catalog.DefaultMemoryFraction, "fraction of GPU memory the engine may use")
	policy := fs.String("scheduling-policy", sim.PolicyFCFS, "fcfs or priority")
	speedup := fs.Float64("speedup", 1, "run the modelled GPU this many times faster than real time")
	seed := fs.Int64("seed", 0, "seed of block hashes and answer texts")
	offloadGiB := fs.Float64("kv-offloading-size", 0, "host RAM for offloaded KV blocks in GiB, vLLM's native offloading (0: off)")
	storeDir := fs.String("kv-store-dir", "", "the node's SSD KV store, shared with the node's other engines: blocks are written through to it and loaded from it instead of recomputed (empty: none)")
	storeWriter := fs.String("kv-store-writer", "", "the engine's name in the node store's write grants (hearth up's engine name): writes wait for the daemon's grant (empty: writes unbounded)")
	diskGBps := fs.Float64("disk-gbps", catalog.DefaultDiskGBps, "read bandwidth of the KV store's disk in GB/s")
	flavorName := fs.String("flavor", "vllm", "engine simulated: vllm or sglang (SGLang's hashes, events, metrics and health endpoints)")
	startup := fs.Duration("simulate-startup", 0, "how long the simulated start-up (weights, KV cache, CUDA graphs) takes")
	failure := fs.String("simulate-failure", "", "make the start-up fail: oom or exit")
	tp := fs.Int("tensor-parallel-size", 1, "GPUs of kind --gpu the engine splits the model over (tensor parallelism)")
	kvDtype := fs.String("kv-cache-dtype", "auto", "KV cache dtype: auto, or fp8 to halve the bytes per token (the choices of the --flavor's engine)")
	overrides := fs.String("hf-overrides", "", "JSON overriding the model's config.json; its rope_scaling stretches the context (YaRN)")
	profile := fs.Bool("pprof", false, "serve Go's runtime profiles under /debug/pprof/ on --listen (the simulator's own memory and goroutines)")
	sleepMode := fs.Bool("enable-sleep-mode", false, "serve vLLM's sleep endpoints (POST /sleep, /wake_up, GET /is_sleeping), as vLLM does with VLLM_SERVER_DEV_MODE=1")
	memorySaver := fs.Bool("enable-memory-saver", false, "serve SGLang's POST /release_memory_occupation and /resume_memory_occupation (with --flavor sglang)")
	weightsBackup := fs.Bool("enable-weights-cpu-backup", false, "with --enable-memory-saver: keep a host copy of the released weights, so that a resume reloads nothing (a level-1 sleep)")
	var agent sim.AgentOptions
	fs.BoolVar(&agent.AllowWriteTools, "allow-write-tools", false, "let the simulated model call tools that write, edit or run commands (it only reads otherwise)")
	fs.Func("tool-calls", "tool calls the simulated model makes per task before answering, N or N-M (default 3-6)", agent.ParseToolCallRange)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	flavor, err := sim.ParseKind(*flavorName)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	fail, err := sim.ParseFailure(*failure)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *startup < 0 {
		return fmt.Errorf("%w: --simulate-startup must not be negative", errUsage)
	}
	format, err := sim.ParseEventFormat(*kvFormat)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *kvFault != "" && !slices.Contains(hruntime.SimKVEventFaults, *kvFault) {
		return fmt.Errorf("%w: --kv-events-fault %q: want one of %s", errUsage, *kvFault, strings.Join(hruntime.SimKVEventFaults, ", "))
	}
	if *kvReplay != "" && *kvEvents == "" {
		return fmt.Errorf("%w: --kv-replay needs --kv-events", errUsage)
	}
	if *tp < 1 {
		return fmt.Errorf("%w: --tensor-parallel-size must be at least 1", errUsage)
	}
	if !(*speedup > 0) {
		return fmt.Errorf("%w: --speedup must be positive", errUsage)
	}
	cfg := sim.Config{
		GPU: *gpu, Model: *model, NumGPUBlocks: *numBlocks, BlockSize: *blockSize,
		MaxNumSeqs: *maxSeqs, MaxNumBatchedTokens: *maxBatched, MaxModelLen: *maxModelLen,
		GPUMemoryUtilization: *memUtil, SchedulingPolicy: *policy, Seed: *seed,
		CPUOffloadGiB: *offloadGiB, Kind: flavor, Agent: agent, DiskGBps: *diskGBps,
		TP: *tp, KVCacheDtype: *kvDtype, ModelOverrides: *overrides,
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return simcli.Serve(ctx, simEngineEnv(env, *storeWriter), *storeDir, sim.InstanceOptions{
		Engine: cfg, Listen: *listen, KVEvents: *kvEvents, KVReplay: *kvReplay, Topic: *kvTopic,
		Format: format, EngineVersion: *engineVersion, KVEventFault: *kvFault, ServedModelName: *servedName, Speedup: *speedup,
		Logger:       newLogger(env.stderr, slog.LevelInfo, daemon.LogFormatText),
		StartupDelay: *startup, Failure: fail, Console: env.stdout, Profile: *profile,
		SleepMode: *sleepMode || *memorySaver, WeightsBackup: *weightsBackup,
	})
}

// simEngineEnv is what the simulated engine gets from the process: its
// output, its environment and the node store, written as writer.
func simEngineEnv(env *environment, writer string) simcli.Env {
	return simcli.Env{
		Stdout: env.stdout, Stderr: env.stderr, Getenv: env.getenv,
		OpenStore: func(dir string, cfg sim.Config, log *slog.Logger) (sim.NodeStore, io.Closer, error) {
			space, err := openEngineStore(dir, cfg, writer, log)
			if err != nil {
				return nil, nil, err
			}
			return sim.ByHash(space), io.NopCloser(nil), nil // it holds nothing open
		},
	}
}
