package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hearth-llm/hearth/catalog"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

const gib = 1 << 30

// Scheduling policies, as vLLM's --scheduling-policy names them.
const (
	PolicyFCFS     = "fcfs"
	PolicyPriority = "priority"
)

// GPUNames lists the GPUs the simulator can model: every kind of the
// catalog (a board the catalog does not list has no peaks to time).
func GPUNames() []string { return catalog.GPUKinds() }

// ModelNames lists the models the simulator can model: every model of the
// catalog.
func ModelNames() []string { return catalog.ModelNames() }

// Config describes one simulated engine: the GPU and model it models and the
// vLLM engine arguments that shape its scheduler and cache. Zero fields take
// the defaults documented on each field (see withDefaults).
type Config struct {
	// GPU names the modelled GPU (GPUNames). Required.
	GPU string
	// Model names the modelled model (ModelNames). Required.
	Model string
	// NumGPUBlocks is the number of KV blocks; 0 derives it from GPU memory
	// the way vLLM (or SGLang) does (catalog.EngineConfig.Sized).
	NumGPUBlocks int
	// BlockSize is tokens per KV block; default 16, vLLM's default on CUDA.
	BlockSize int
	// MaxNumSeqs caps running requests; default 256, vLLM's default for the
	// OpenAI server.
	MaxNumSeqs int
	// MaxNumBatchedTokens is the token budget of one step; default 8192.
	// vLLM's own default for the OpenAI server is 2048 on GPUs under 70 GiB
	// and 8192 above; 8192 is chosen for all GPUs because agents send long
	// prompts and a homelab deployment raises it for that reason. Set 2048
	// to model vLLM's untuned default.
	MaxNumBatchedTokens int
	// MaxModelLen caps prompt plus output tokens; default the model's
	// context (40960 for Qwen3) or, when the KV cache holds fewer tokens,
	// the cache's capacity (vLLM refuses to start in that case; the
	// simulator fits the length instead, as vLLM's automatic max-model-len
	// does).
	MaxModelLen int
	// GPUMemoryUtilization is the engine's memory fraction: vLLM's
	// --gpu-memory-utilization, the share of all GPU memory it may use, or
	// in the SGLang flavour SGLang's --mem-fraction-static, the share of the
	// memory free at its start that weights and KV pool take
	// (catalog.Memory.SGLangKVCacheBytes); default 0.9.
	GPUMemoryUtilization float64
	// SchedulingPolicy is "fcfs" (default) or "priority".
	SchedulingPolicy string
	// PriorityHigherFirst runs higher Request.Priority values first under
	// the priority policy, as SGLang does unless
	// --schedule-low-priority-values-first; vLLM runs lower values first.
	PriorityHigherFirst bool
	// CPUOffloadGiB is the host memory of vLLM's native KV offloading tier
	// (--kv-offloading-size GiB --kv-offloading-backend native); 0, the
	// default, turns the tier off. See offload.go for what is modelled.
	CPUOffloadGiB float64
	// NumCPUBlocks is the host-RAM tier's size in blocks; 0 derives it from
	// CPUOffloadGiB: GiB divided by the bytes of one block (all layers' K
	// and V), as vLLM's CPU backend sizes its pool.
	NumCPUBlocks int
	// Store is the node-wide SSD tier below host RAM (NodeStore), shared
	// with the node's other engines; nil, the default, turns it off.
	// DiskGBps is its read bandwidth in GB/s (0: catalog.DefaultDiskGBps).
	Store    NodeStore
	DiskGBps float64
	// Seed seeds the engine's block hashes (like PYTHONHASHSEED for vLLM):
	// two engines with the same seed give a block the same hash. SGLang's
	// hashes have no seed; there it only seeds the answers' texts.
	Seed int64
	// Kind is the engine kind simulated (Plays): vLLM (the default) or
	// SGLang. It picks the block hashes and how KV events are split
	// (flavor.go).
	Kind hruntime.Kind
	// TP is the tensor parallel size (vLLM's --tensor-parallel-size,
	// SGLang's --tp-size): the engine models TP GPUs of kind GPU, each
	// holding 1/TP of the weights and its share of the KV heads, with the
	// all-reduces between them (catalog.RooflineOfLayout); default 1.
	TP int
	// KVCacheDtype is the KV cache's dtype (--kv-cache-dtype): "auto"
	// (default), a 16-bit dtype, or an FP8 one, which halves the bytes of a
	// token (KVCacheDtypes lists what each flavour takes).
	KVCacheDtype string
	// ModelOverrides is a JSON object overriding the model's config.json
	// (vLLM's --hf-overrides, SGLang's --json-model-override-args); of it
	// the simulator reads the rope scaling that stretches the model's
	// context (ModelContextOf). "": none.
	ModelOverrides string
	// Agent shapes the simulated model's tool use (AgentOptions): how many
	// tool calls a task makes and whether tools that write may be called.
	// It does not change the engine model.
	Agent AgentOptions
}

// KVCacheDtypes lists the --kv-cache-dtype values the simulated engine of
// kind takes: the 16-bit and FP8 choices of the real engine's argparse
// (vLLM: vllm/config/cache.py CacheDType; SGLang v0.5.19:
// python/sglang/srt/server_args.py, which has no bare "fp8"). The real
// engines' other choices (vLLM's fp8_inc, nvfp4, the turboquant and
// per-token-head formats; SGLang's fp4_e2m1) are not modelled and refused.
func KVCacheDtypes(kind hruntime.Kind) []string {
	if kind == hruntime.KindSGLang {
		return []string{"auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16"}
	}
	return []string{"auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"}
}

// Defaults, see Config. The memory figures are the catalog's, the
// performance model the planner sizes real engines with.
const (
	DefaultMaxNumSeqs = 256
)

var errConfig = errors.New("sim: invalid config")

// withDefaults returns c with zero fields filled in. NumGPUBlocks,
// MaxModelLen and NumCPUBlocks are derived (catalog.EngineConfig.Sized)
// only when GPU and model are known.
func (c Config) withDefaults() Config {
	if c.Kind == "" {
		c.Kind = hruntime.KindVLLM
	}
	if c.MaxNumSeqs == 0 {
		c.MaxNumSeqs = DefaultMaxNumSeqs
	}
	if c.DiskGBps == 0 {
		c.DiskGBps = catalog.DefaultDiskGBps
	}
	if c.SchedulingPolicy == "" {
		c.SchedulingPolicy = PolicyFCFS
	}
	if c.TP == 0 {
		c.TP = 1
	}
	if c.KVCacheDtype == "" {
		c.KVCacheDtype = catalog.KVCacheAuto
	}
	e := c.Perf()
	c.BlockSize, c.MaxNumBatchedTokens, c.GPUMemoryUtilization = e.BlockSize, e.MaxBatchedTokens, e.MemoryFraction
	c.NumGPUBlocks, c.MaxModelLen, c.NumCPUBlocks = e.NumGPUBlocks, e.MaxModelLen, e.NumCPUBlocks
	return c
}

// Perf is the engine as the catalog's performance model sees it, sized
// (catalog.EngineConfig.Sized): the GPU and model of the catalog (zero
// when it does not list them) and the arguments that size the KV cache and
// the steps. catalog.ProfileOf(c.Perf()) is the profile the engine
// measures.
func (c Config) Perf() catalog.EngineConfig {
	gpu, okG := catalog.LookupGPU(c.GPU)
	model, okM := catalog.LookupModel(c.Model)
	if !okG || !okM {
		gpu, model = catalog.GPU{}, catalog.Model{}
	} else if n, err := hruntime.ModelContextOf(c.ModelOverrides, model.MaxModelLen); err == nil && n > 0 {
		model.MaxModelLen = n
	}
	var share catalog.MemoryShare
	if k, ok := hruntime.Lookup(c.Kind); ok {
		share = k.MemoryShare
	}
	return catalog.EngineConfig{
		GPU: gpu, Model: model, Share: share,
		BlockSize: c.BlockSize, MaxBatchedTokens: c.MaxNumBatchedTokens, MemoryFraction: c.GPUMemoryUtilization,
		NumGPUBlocks: c.NumGPUBlocks, MaxModelLen: c.MaxModelLen,
		CPUOffloadGiB: c.CPUOffloadGiB, NumCPUBlocks: c.NumCPUBlocks,
		TP: c.TP, KVCacheDtype: c.KVCacheDtype,
	}.Sized()
}

// Validate reports whether the config, with defaults applied, describes an
// engine that can start.
func (c Config) Validate() error {
	d := c.withDefaults()
	if _, ok := catalog.LookupGPU(d.GPU); !ok {
		return fmt.Errorf("%w: unknown GPU %q (known: %v)", errConfig, c.GPU, GPUNames())
	}
	if _, ok := catalog.LookupModel(d.Model); !ok {
		return fmt.Errorf("%w: unknown model %q (known: %v)", errConfig, c.Model, ModelNames())
	}
	switch {
	case d.MaxNumSeqs < 1:
		return fmt.Errorf("%w: max_num_seqs %d < 1", errConfig, d.MaxNumSeqs)
	case !Plays(d.Kind):
		return fmt.Errorf("%w: engine kind %q is not one the simulator plays (vllm, sglang)", errConfig, d.Kind)
	case d.SchedulingPolicy != PolicyFCFS && d.SchedulingPolicy != PolicyPriority:
		return fmt.Errorf("%w: scheduling policy %q (want fcfs or priority)", errConfig, d.SchedulingPolicy)
	case !slices.Contains(KVCacheDtypes(d.Kind), d.KVCacheDtype):
		return fmt.Errorf("%w: kv cache dtype %q (the %s flavour models %s)", errConfig, d.KVCacheDtype, d.Kind, strings.Join(KVCacheDtypes(d.Kind), ", "))
	case !(c.DiskGBps >= 0 && c.DiskGBps <= 1000):
		return fmt.Errorf("%w: disk bandwidth %v GB/s not in [0, 1000]", errConfig, c.DiskGBps)
	}
	if _, err := hruntime.ModelContextOf(c.ModelOverrides, 0); err != nil {
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	if err := d.Perf().Validate(); err != nil {
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	return nil
}
