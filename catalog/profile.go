package catalog

import (
	"github.com/hearth-llm/hearth/tokenizer"

	"errors"
	"fmt"
	"math"
)

// Profile is what the router and the planner need to know of an engine's
// speed and capacity to weigh it against others: how much KV it holds in
// each tier and how fast it fills them. ProfileOf estimates it from the
// catalog's figures; a serving engine's own report of its KV capacity
// replaces the estimate's (Measured).
type Profile struct {
	GPUBlocks int // KV cache blocks on the GPU
	BlockSize int // tokens per block
	CPUBlocks int // blocks of the host-RAM tier (0: none)
	// BlockBytes is the KV bytes of one block on one GPU: under tensor
	// parallelism each GPU holds and reloads its share of a block over its
	// own host link, at the same time as the others.
	BlockBytes int
	// PrefillTokensPerSec is the prompt throughput of one full-budget
	// engine step on an empty engine: what a router would measure.
	// LoadBytesPerSec is the host-to-device bandwidth a reload from the
	// host-RAM tier runs at.
	PrefillTokensPerSec float64
	LoadBytesPerSec     float64
	MaxModelLen         int // the context the engine accepts
	// Measured says the KV capacity came from the engine itself, not from
	// the estimate.
	Measured bool
}

// EngineConfig is one engine as the performance model sees it: the GPU and
// model it serves and the engine arguments that size its KV cache and its
// steps. Zero fields take the defaults documented on each (Sized).
type EngineConfig struct {
	GPU   GPU
	Model Model
	// Share is how the engine's memory flag shares out the GPU, which
	// decides what MemoryFraction leaves the KV cache: the zero value is
	// vLLM's rule, a share of the GPU's total memory.
	Share MemoryShare
	// BlockSize is tokens per KV block; default tokenizer.DefaultBlockSize.
	BlockSize int
	// MaxBatchedTokens is the token budget of one step; default
	// DefaultMaxBatchedTokens.
	MaxBatchedTokens int
	// MemoryFraction is the engine's share of GPU memory (see Share);
	// default DefaultMemoryFraction.
	MemoryFraction float64
	// NumGPUBlocks is the KV cache in blocks; 0 derives it from GPU memory.
	NumGPUBlocks int
	// MaxModelLen caps prompt plus output tokens; 0 is the model's
	// context, or the KV cache's capacity when that holds fewer tokens
	// (as vLLM's automatic max-model-len does).
	MaxModelLen int
	// CPUOffloadGiB is the host RAM of the KV tier below the GPU (vLLM's
	// --kv-offloading-size); 0: no tier.
	CPUOffloadGiB float64
	// NumCPUBlocks is that tier in blocks; 0 derives it from CPUOffloadGiB:
	// GiB divided by the bytes of one block (all layers' K and V, over all
	// TP ranks: vLLM's --kv-offloading-size is the sum over the ranks), as
	// vLLM's CPU backend sizes its pool.
	NumCPUBlocks int
	// TP is the tensor parallel size: the engine runs on TP GPUs like GPU
	// (0 or 1: one), each holding 1/TP of the weights and its share of the
	// KV heads; the KV cache is each rank's, in blocks of the engine.
	TP int
	// KVCacheDtype is the KV cache's dtype (--kv-cache-dtype): "auto" ("")
	// or an FP8 dtype, which halves the bytes of a token.
	KVCacheDtype string
}

// Layout is the tensor parallel size and KV cache dtype of e.
func (e EngineConfig) Layout() Layout {
	return Layout{TP: e.TP, KVCacheDtype: e.KVCacheDtype}
}

// RankBlockBytes is the KV bytes of one block on one GPU of the engine;
// BlockBytes the block's bytes over all its GPUs.
func (e EngineConfig) RankBlockBytes() int {
	return kvBytesPerToken(e.Model, e.Layout()) * e.BlockSize
}

func (e EngineConfig) BlockBytes() int { return e.RankBlockBytes() * e.Layout().TPSize() }

// Roofline is the timing model of the engine.
func (e EngineConfig) Roofline() Roofline { return RooflineOfLayout(e.GPU, e.Model, e.Layout()) }

// ErrInvalidEngine is wrapped by ProfileOf's errors about its config.
var ErrInvalidEngine = errors.New("invalid engine config")

// Sized returns e with zero fields set to their defaults and the KV cache,
// context and host-RAM tier derived. The derived sizes need the GPU's
// memory and the model's shape: without them they stay as given.
func (e EngineConfig) Sized() EngineConfig {
	if e.BlockSize == 0 {
		e.BlockSize = tokenizer.DefaultBlockSize
	}
	if e.MaxBatchedTokens == 0 {
		e.MaxBatchedTokens = DefaultMaxBatchedTokens
	}
	if e.MemoryFraction == 0 {
		e.MemoryFraction = DefaultMemoryFraction
	}
	if e.GPU.MemoryBytes == 0 || e.Model.KVBytesPerToken() == 0 {
		return e
	}
	if e.NumGPUBlocks == 0 && e.BlockSize > 0 && e.MaxBatchedTokens > 0 {
		mem := MemoryOf(e.Model, e.Layout(), e.MaxBatchedTokens)
		e.NumGPUBlocks = mem.KVBlocks(e.Share.KVCacheBytes(mem, e.GPU.MemoryBytes, e.MemoryFraction), e.BlockSize)
	}
	if e.MaxModelLen == 0 {
		e.MaxModelLen = min(e.Model.MaxModelLen, e.NumGPUBlocks*e.BlockSize)
	}
	if e.NumCPUBlocks == 0 && e.CPUOffloadGiB > 0 && e.BlockSize > 0 {
		e.NumCPUBlocks = int(math.Floor(e.CPUOffloadGiB * gib / float64(e.BlockBytes())))
	}
	return e
}

// KVCacheBlocks sizes the KV cache as vLLM does at start-up, with the
// memory model (Memory.KVCacheBytes): (memory x fraction - weights -
// non-torch memory - activation peak) divided by the bytes of one block. It
// returns 0 when nothing is left.
func KVCacheBlocks(gpu GPU, model Model, blockSize, maxBatchedTokens int, fraction float64) int {
	mem := MemoryOf(model, Layout{}, maxBatchedTokens)
	return mem.KVBlocks(mem.KVCacheBytes(gpu.MemoryBytes, fraction), blockSize)
}

// Validate reports whether a sized config (Sized) describes an engine that
// can start. Its errors say what is wrong without a prefix of their own;
// callers add theirs.
func (e EngineConfig) Validate() error {
	switch {
	case e.BlockSize < 1 || e.BlockSize > 1024:
		return fmt.Errorf("block size %d out of range 1..1024", e.BlockSize)
	case e.MaxBatchedTokens < 1:
		return fmt.Errorf("max_num_batched_tokens %d < 1", e.MaxBatchedTokens)
	case !(e.MemoryFraction > 0 && e.MemoryFraction <= 1):
		return fmt.Errorf("gpu_memory_utilization %v not in (0, 1]", e.MemoryFraction)
	case e.TP < 0 || e.TP > 64:
		return fmt.Errorf("tensor parallel size %d out of range 1..64", e.TP)
	case e.Model.QueryHeads > 0 && (e.Model.QueryHeads%e.Layout().TPSize() != 0 ||
		(e.Model.KVHeads%e.Layout().TPSize() != 0 && e.Layout().TPSize()%max(e.Model.KVHeads, 1) != 0)):
		return fmt.Errorf("%d attention heads and %d KV heads are not divisible by tensor parallel size %d",
			e.Model.QueryHeads, e.Model.KVHeads, e.Layout().TPSize())
	case e.Layout().Validate() != nil:
		return e.Layout().Validate()
	case !(e.CPUOffloadGiB >= 0 && e.CPUOffloadGiB <= 1<<20):
		return fmt.Errorf("kv offloading size %v GiB not in [0, 1 TiB]", e.CPUOffloadGiB)
	case e.NumCPUBlocks < 0:
		return fmt.Errorf("num_cpu_blocks %d < 0", e.NumCPUBlocks)
	case e.NumGPUBlocks < 1:
		return fmt.Errorf("no memory left for the KV cache (model %s on %s at utilisation %v)",
			e.Model.Name, e.GPU.Kind, e.MemoryFraction)
	case e.MaxModelLen < 1:
		return fmt.Errorf("max_model_len %d < 1", e.MaxModelLen)
	case e.MaxModelLen > e.Model.MaxModelLen:
		return fmt.Errorf("max_model_len %d exceeds the model's %d", e.MaxModelLen, e.Model.MaxModelLen)
	case e.MaxModelLen > e.NumGPUBlocks*e.BlockSize:
		return fmt.Errorf("max_model_len %d exceeds the KV cache's %d tokens", e.MaxModelLen, e.NumGPUBlocks*e.BlockSize)
	}
	return nil
}

// ProfileOf estimates the profile of an engine configured as e: its KV
// capacity as the engine would size it, and the prefill speed of one
// full-budget step on an empty engine (a prompt of MaxBatchedTokens, or one
// token less than the context when that is shorter) priced by the roofline.
// The GPU must have speed figures (a board the catalog lists).
func ProfileOf(e EngineConfig) (Profile, error) {
	e = e.Sized()
	if err := e.Validate(); err != nil {
		return Profile{}, fmt.Errorf("%w: %w", ErrInvalidEngine, err)
	}
	if e.GPU.BF16FLOPS <= 0 || e.GPU.MemoryBandwidth <= 0 {
		return Profile{}, fmt.Errorf("profile: no speed figures for GPU %q", e.GPU.Name)
	}
	n := min(e.MaxBatchedTokens, e.MaxModelLen-1)
	if n < 1 {
		return Profile{}, fmt.Errorf("%w: max_model_len %d leaves no room for a prompt", ErrInvalidEngine, e.MaxModelLen)
	}
	var prefill StepLoad
	prefill.Add(0, n)
	roofline := e.Roofline()
	d := roofline.StepDuration(&prefill)
	if d <= 0 {
		return Profile{}, errors.New("profile: prefill step took no time")
	}
	return Profile{
		GPUBlocks:           e.NumGPUBlocks,
		BlockSize:           e.BlockSize,
		CPUBlocks:           e.NumCPUBlocks,
		BlockBytes:          e.RankBlockBytes(),
		PrefillTokensPerSec: float64(n) / d.Seconds(),
		LoadBytesPerSec:     e.GPU.HostLoadBytesPerSec(),
		MaxModelLen:         e.MaxModelLen,
	}, nil
}
