// Package catalog holds the facts Hearth knows about GPUs and models: each
// board's memory, bandwidth, tensor-core peaks and host link, and each
// model's shape, weight size, Hugging Face repository and family; and the
// one memory model that fits models to GPUs, for the planner and for the
// simulated engine alike.
//
// It is shared by GPU discovery (nodes: simulated lists and the marketing
// names NVML reports), the engine runtimes (the simulated engine's timing
// model and memory budget, the launchers' model arguments), the planner and
// the benchmark. It is a top-level package rather than part of nodes because
// runtime and bench may not import nodes, and a second copy of the figures
// would drift. It imports only the standard library, so anything may import
// it.
//
// Boards the catalog does not list still work: GPUByName describes them as
// the Unknown kind, sized by the memory the driver reports, with no peaks.
// Models it does not list work when the Hugging Face cache holds them:
// ResolveModel reads config.json and the safetensors index there, and those
// figures override the catalog's for a model it does list.
//
// # Memory model
//
// An engine rank (one GPU of an engine; tensor parallelism over TP GPUs
// splits the weights and KV heads, at least one head per GPU) holds, as
// vLLM's start-up profiling measures it (MemoryOf):
//
//	weights     = WeightBytes / TP                    (every MoE expert)
//	non-torch   = 0.5 GiB (+0.5 GiB under TP)         (workspaces, CUDA graphs, NCCL)
//	activations = (2 x Intermediate/TP + 4 x Hidden) x 2 B x max batched tokens (8192)
//	KV/token    = 2 x Layers x max(KVHeads/TP, 1) x HeadDim x 2 B (BF16)
//
// and the KV cache gets the rest of its share of the GPU (KVCacheBytes):
//
//	KV cache = total x fraction - weights - non-torch - activations
//
// counted in whole blocks of 16 tokens. The simulated engine sizes its cache
// with exactly this (runtime/sim.DeriveNumGPUBlocks).
//
// The planner (PlanEngines) gives each engine the fraction (MemoryFraction)
//
//	fraction = min(0.9, (total - used by other programs - 1 GiB) / total)
//
// rounded down to hundredths, the smallest over a TP group: vLLM's
// --gpu-memory-utilization, a share of the total that vLLM refuses when less
// is free; the 1 GiB covers the engine's own CUDA context and growth of the
// other programs. SGLang's --mem-fraction-static is a share of the memory
// free when it starts (total - used - CUDA context) holding weights and KV
// cache, so the plan gives it (weights + KV cache) / that free memory for
// the same cache. A model fits when the cache holds one agent turn
// (AgentTurnTokens, or a shorter requested context); the context is the
// requested one or the most every engine holds, up to the model's maximum.
// What does not fit is a *NotFitError or *ContextTooLongError whose text is
// one sentence with the fix; sizes in those sentences are GiB written "GB",
// as boards are sold ("an RTX 4090 has 24 GB").
//
// # Host RAM
//
// PlanHostTiers sizes the engines' host-RAM KV tiers on one node: pinned
// memory the kernel cannot reclaim, so the tiers share only what is left
// after the OS and page cache keep max(8 GiB, 25% of the RAM), what is
// available now keeps max(4 GiB, 10%), and each engine's processes 4 GiB;
// each gets a share proportional to its GPU KV cache (EnginePlan.KVCacheBytes).
// A tier smaller than its GPU KV cache (Dynamo's rule: it churns) carries a
// note; one under 1 GiB is none.
package catalog
