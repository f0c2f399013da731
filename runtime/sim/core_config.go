package sim

import (
	"errors"
	"fmt"
	"math"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/tokenizer"
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
	// the way vLLM does (see DeriveNumGPUBlocks).
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
	// DiskGBps is its read bandwidth in GB/s (0: DefaultDiskGBps).
	Store    NodeStore
	DiskGBps float64
	// Seed seeds the engine's block hashes (like PYTHONHASHSEED for vLLM):
	// two engines with the same seed give a block the same hash. SGLang's
	// hashes have no seed; there it only seeds the answers' texts.
	Seed int64
	// Flavor is the engine simulated: vLLM (the default) or SGLang. It
	// picks the block hashes and how KV events are split (see Flavor).
	Flavor Flavor
	// Agent shapes the simulated model's tool use (AgentOptions): how many
	// tool calls a task makes and whether tools that write may be called.
	// It does not change the engine model.
	Agent AgentOptions
}

// Defaults, see Config. The memory figures are the catalog's memory model,
// the one the planner sizes real engines with.
const (
	DefaultMaxNumSeqs           = 256
	DefaultMaxNumBatchedTokens  = catalog.DefaultMaxBatchedTokens
	DefaultGPUMemoryUtilization = catalog.DefaultMemoryFraction
)

var errConfig = errors.New("sim: invalid config")

// withDefaults returns c with zero fields filled in. NumGPUBlocks and
// MaxModelLen are derived only when GPU and model are known.
func (c Config) withDefaults() Config {
	if c.BlockSize == 0 {
		c.BlockSize = tokenizer.DefaultBlockSize
	}
	if c.MaxNumSeqs == 0 {
		c.MaxNumSeqs = DefaultMaxNumSeqs
	}
	if c.MaxNumBatchedTokens == 0 {
		c.MaxNumBatchedTokens = DefaultMaxNumBatchedTokens
	}
	if c.GPUMemoryUtilization == 0 {
		c.GPUMemoryUtilization = DefaultGPUMemoryUtilization
	}
	if c.DiskGBps == 0 {
		c.DiskGBps = DefaultDiskGBps
	}
	if c.SchedulingPolicy == "" {
		c.SchedulingPolicy = PolicyFCFS
	}
	gpu, okG := catalog.LookupGPU(c.GPU)
	model, okM := catalog.LookupModel(c.Model)
	if !okG || !okM {
		return c
	}
	if c.NumGPUBlocks == 0 && c.BlockSize > 0 && c.MaxNumBatchedTokens > 0 {
		c.NumGPUBlocks = DeriveNumGPUBlocks(gpu, model, c.BlockSize, c.MaxNumBatchedTokens, c.GPUMemoryUtilization)
		if c.Flavor == FlavorSGLang {
			mem := catalog.MemoryOf(model, 1, c.MaxNumBatchedTokens)
			c.NumGPUBlocks = mem.KVBlocks(mem.SGLangKVCacheBytes(gpu.MemoryBytes, c.GPUMemoryUtilization), c.BlockSize)
		}
	}
	if c.MaxModelLen == 0 {
		c.MaxModelLen = min(model.MaxModelLen, c.NumGPUBlocks*c.BlockSize)
	}
	if c.NumCPUBlocks == 0 && c.CPUOffloadGiB > 0 && c.BlockSize > 0 {
		c.NumCPUBlocks = int(math.Floor(c.CPUOffloadGiB * gib / float64(model.KVBytesPerToken()*c.BlockSize)))
	}
	return c
}

// DeriveNumGPUBlocks sizes the KV cache as vLLM does at start-up, with the
// catalog's memory model (catalog.Memory.KVCacheBytes): (memory x
// utilisation - weights - non-torch memory - activation peak) divided by the
// bytes of one block. It returns 0 when nothing is left.
func DeriveNumGPUBlocks(gpu catalog.GPU, model catalog.Model, blockSize, maxBatchedTokens int, util float64) int {
	mem := catalog.MemoryOf(model, 1, maxBatchedTokens)
	return mem.KVBlocks(mem.KVCacheBytes(gpu.MemoryBytes, util), blockSize)
}

// Validate reports whether the config, with defaults applied, describes an
// engine that can start.
func (c Config) Validate() error {
	d := c.withDefaults()
	if _, ok := catalog.LookupGPU(d.GPU); !ok {
		return fmt.Errorf("%w: unknown GPU %q (known: %v)", errConfig, c.GPU, GPUNames())
	}
	model, ok := catalog.LookupModel(d.Model)
	if !ok {
		return fmt.Errorf("%w: unknown model %q (known: %v)", errConfig, c.Model, ModelNames())
	}
	switch {
	case d.BlockSize < 1 || d.BlockSize > 1024:
		return fmt.Errorf("%w: block size %d out of range 1..1024", errConfig, d.BlockSize)
	case d.MaxNumSeqs < 1:
		return fmt.Errorf("%w: max_num_seqs %d < 1", errConfig, d.MaxNumSeqs)
	case d.MaxNumBatchedTokens < 1:
		return fmt.Errorf("%w: max_num_batched_tokens %d < 1", errConfig, d.MaxNumBatchedTokens)
	case !(d.GPUMemoryUtilization > 0 && d.GPUMemoryUtilization <= 1):
		return fmt.Errorf("%w: gpu_memory_utilization %v not in (0, 1]", errConfig, d.GPUMemoryUtilization)
	case d.Flavor != FlavorVLLM && d.Flavor != FlavorSGLang:
		return fmt.Errorf("%w: unknown flavor %d", errConfig, d.Flavor)
	case d.SchedulingPolicy != PolicyFCFS && d.SchedulingPolicy != PolicyPriority:
		return fmt.Errorf("%w: scheduling policy %q (want fcfs or priority)", errConfig, d.SchedulingPolicy)
	case !(c.DiskGBps >= 0 && c.DiskGBps <= 1000):
		return fmt.Errorf("%w: disk bandwidth %v GB/s not in [0, 1000]", errConfig, c.DiskGBps)
	case !(c.CPUOffloadGiB >= 0 && c.CPUOffloadGiB <= 1<<20):
		return fmt.Errorf("%w: kv offloading size %v GiB not in [0, 1 TiB]", errConfig, c.CPUOffloadGiB)
	case d.NumCPUBlocks < 0:
		return fmt.Errorf("%w: num_cpu_blocks %d < 0", errConfig, d.NumCPUBlocks)
	case d.NumGPUBlocks < 1:
		return fmt.Errorf("%w: no memory left for the KV cache (model %s on %s at utilisation %v)",
			errConfig, d.Model, d.GPU, d.GPUMemoryUtilization)
	case d.MaxModelLen < 1:
		return fmt.Errorf("%w: max_model_len %d < 1", errConfig, d.MaxModelLen)
	case d.MaxModelLen > model.MaxModelLen:
		return fmt.Errorf("%w: max_model_len %d exceeds the model's %d", errConfig, d.MaxModelLen, model.MaxModelLen)
	case d.MaxModelLen > d.NumGPUBlocks*d.BlockSize:
		return fmt.Errorf("%w: max_model_len %d exceeds the KV cache's %d tokens", errConfig,
			d.MaxModelLen, d.NumGPUBlocks*d.BlockSize)
	}
	return nil
}
