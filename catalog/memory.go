package catalog

import "math"

// Figures of the memory model (see the package documentation).
const (
	// DefaultMemoryFraction is the share of a GPU's memory an engine takes
	// when nothing else uses the GPU: vLLM's --gpu-memory-utilization
	// default before 0.20 (0.92 since), kept lower because a desktop's
	// compositor and browser grow into what is left.
	DefaultMemoryFraction = 0.9
	// DefaultMaxBatchedTokens is the token budget of one engine step
	// Hearth plans when the layout names none (Layout.MaxBatchedTokens):
	// the activation peak is sized for it and every vLLM engine, real or
	// simulated, is told it (--max-num-batched-tokens), so that the engine
	// runs what the plan sized and the simulation timed. vLLM left to
	// itself picks 2,048 on a GPU under 70 GiB such as a 4090 and 8,192 on
	// larger ones (vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults).
	DefaultMaxBatchedTokens = 8192
	// AgentMaxBatchedTokens is the step budget of the layouts for coding
	// agents (Candidates, DefaultAgentLayout): on two 4090s it gave a lower
	// TTFT p90 at 16 Claude Code sessions than 8,192 or 2,048 and kept the
	// 8-session figures (docs/perf.md, "The engine's step budget").
	AgentMaxBatchedTokens = 4096
	// AgentTurnTokens is the context of one coding-agent turn the plan
	// counts in: a system prompt, tool definitions and some files. A
	// model fits a GPU only when one such turn fits its KV cache.
	AgentTurnTokens = 12 * 1024

	// nonTorchReserveBytes is memory an engine rank uses outside PyTorch's
	// allocator as vLLM's profiling finds it: cuBLAS and NCCL workspaces
	// and CUDA graphs, measured at 0.4-0.7 GiB on a single consumer GPU.
	nonTorchReserveBytes = 0.5 * gib
	// tpReserveBytes is a further allowance per rank under tensor
	// parallelism, for NCCL communicators and the custom all-reduce's
	// shared buffers.
	tpReserveBytes = 0.5 * gib
	// cudaContextBytes is the engine's own CUDA context (0.3-0.6 GiB),
	// which holds memory outside the budget vLLM profiles and before
	// SGLang measures what is free.
	cudaContextBytes = 0.5 * gib
	// marginBytes is what the plan leaves free beyond what other programs
	// use: the engine's CUDA context and as much again for those programs
	// to grow into.
	marginBytes = cudaContextBytes + 0.5*gib
)

// Memory is how one engine rank (one GPU of a tensor-parallel group) spends
// GPU memory besides its KV cache, the figures vLLM's start-up profiling
// measures: weights, memory outside PyTorch, and the activation peak of one
// full-budget step. All are bytes on one GPU.
type Memory struct {
	// WeightBytes is the rank's share of the weights: all of them split
	// over the TP ranks (MoE experts all resident).
	WeightBytes float64
	// NonTorchBytes is memory outside PyTorch's allocator: workspaces,
	// CUDA graphs and, under TP, communication buffers.
	NonTorchBytes float64
	// ActivationBytes is the activation peak of a forward pass over
	// max-batched-tokens tokens.
	ActivationBytes float64
	// KVBytesPerToken is the rank's K and V of one token over all layers:
	// its share of the KV heads (at least one; heads are replicated when
	// TP exceeds their number).
	KVBytesPerToken int
}

// MemoryOf is the memory one rank of an engine serving m in layout l (its
// tensor parallel size and KV cache dtype) spends besides its KV cache, with
// the activation peak sized for steps of maxBatchedTokens tokens. A dtype
// the memory model does not know counts as BF16 (Layout.Validate rejects
// it first).
func MemoryOf(m Model, l Layout, maxBatchedTokens int) Memory {
	tp := l.TPSize()
	nonTorch := nonTorchReserveBytes
	if tp > 1 {
		nonTorch += tpReserveBytes
	}
	return Memory{
		WeightBytes:     m.WeightBytes / float64(tp),
		NonTorchBytes:   nonTorch,
		ActivationBytes: activationBytesPerToken(m, tp) * float64(maxBatchedTokens),
		KVBytesPerToken: kvBytesPerToken(m, l),
	}
}

// activationBytesPerToken estimates the activation peak per batched token:
// the MLP's gate and up projections (2 x intermediate, split over TP ranks)
// plus about four hidden vectors (residual, norm output, attention output,
// QKV), all BF16.
func activationBytesPerToken(m Model, tp int) float64 {
	return float64(2*m.Intermediate/tp+4*m.Hidden) * 2
}

// kvBytesPerToken is one rank's share of a token's K and V in layout l:
// KVHeads/TP heads, at least one (vLLM replicates a KV head on the ranks
// that share it when TP exceeds the heads), of one byte per element in FP8
// and two otherwise.
func kvBytesPerToken(m Model, l Layout) int {
	elem, ok := kvElementBytes(l.KVCacheDtype)
	if !ok {
		elem = 2
	}
	return 2 * m.Layers * max(m.KVHeads/l.TPSize(), 1) * m.HeadDim * elem
}

// ReservedBytes is all the rank holds besides its KV cache.
func (mem Memory) ReservedBytes() float64 {
	return mem.WeightBytes + mem.NonTorchBytes + mem.ActivationBytes
}

// KVCacheBytes is the memory vLLM gives the KV cache on a GPU of
// totalBytes at utilization (--gpu-memory-utilization): its share of the
// GPU less weights, memory outside PyTorch and the activation peak,
//
//	total x utilization - weights - non-torch - activation peak.
//
// It is negative when nothing is left. SGLang sizes its pool the same way
// from its --mem-fraction-static (see EnginePlan.MemFractionStatic).
func (mem Memory) KVCacheBytes(totalBytes uint64, utilization float64) float64 {
	return float64(totalBytes)*utilization - mem.WeightBytes - mem.NonTorchBytes - mem.ActivationBytes
}

// SGLangKVCacheBytes is the memory SGLang gives its KV pool at
// --mem-fraction-static fraction on a GPU with freeBytes free when it
// starts: its fraction of what is free after its CUDA context, less the
// weights (SGLang reserves no activation peak inside the fraction).
// EnginePlan.MemFractionStatic is this function's inverse.
func (mem Memory) SGLangKVCacheBytes(freeBytes uint64, fraction float64) float64 {
	return (float64(freeBytes)-cudaContextBytes)*fraction - mem.WeightBytes
}

// MemoryShare is how an engine's memory flag shares out a GPU: what its
// fraction covers, and so what it leaves the KV cache. An engine kind
// names its rule (runtime's descriptor); the planner and the performance
// model size the cache by it.
type MemoryShare uint8

const (
	// ShareOfTotal is vLLM's --gpu-memory-utilization: a share of the
	// GPU's total memory holding everything the engine allocates
	// (Memory.KVCacheBytes).
	ShareOfTotal MemoryShare = iota
	// ShareOfFreeStatic is SGLang's --mem-fraction-static: a share of the
	// memory free after the CUDA context, holding the weights and the KV
	// pool only (Memory.SGLangKVCacheBytes).
	ShareOfFreeStatic
)

// KVCacheBytes is the memory an engine sharing the GPU by s gives its KV
// cache on a GPU of gpuBytes at fraction.
func (s MemoryShare) KVCacheBytes(mem Memory, gpuBytes uint64, fraction float64) float64 {
	if s == ShareOfFreeStatic {
		return mem.SGLangKVCacheBytes(gpuBytes, fraction)
	}
	return mem.KVCacheBytes(gpuBytes, fraction)
}

// KVBlocks is how many KV blocks of blockSize tokens fit in kvCacheBytes,
// 0 when none do.
func (mem Memory) KVBlocks(kvCacheBytes float64, blockSize int) int {
	perBlock := float64(mem.KVBytesPerToken * blockSize)
	if kvCacheBytes <= 0 || perBlock <= 0 {
		return 0
	}
	return int(math.Floor(kvCacheBytes / perBlock))
}

// MemoryFraction is the share of a GPU of totalBytes an engine may take
// (vLLM's --gpu-memory-utilization) while other programs use usedBytes of
// it: DefaultMemoryFraction, or less to leave what they use plus a margin,
// rounded down to hundredths. vLLM refuses to start when less memory is
// free than the share asks for. It is 0 or less when nothing is left.
func MemoryFraction(totalBytes, usedBytes uint64) float64 {
	if totalBytes == 0 {
		return 0
	}
	f := (float64(totalBytes) - float64(usedBytes) - marginBytes) / float64(totalBytes)
	return floorTo(min(f, DefaultMemoryFraction), 100)
}

// floorTo rounds x down to a multiple of 1/per, forgiving the binary error
// of decimal fractions (0.58*100 is 57.99999999999999).
func floorTo(x, per float64) float64 {
	return math.Floor(x*per+1e-9) / per
}

// ceilTo rounds x up to a multiple of 1/per, likewise.
func ceilTo(x, per float64) float64 {
	return math.Ceil(x*per-1e-9) / per
}
