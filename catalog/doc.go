// Package catalog holds the facts Hearth knows about GPUs and models: each
// board's memory, bandwidth, tensor-core peaks and host link, and each
// model's shape, weight size, Hugging Face repository and family; and the
// one performance model of an engine built on them: the memory model that
// fits models to GPUs, the roofline that times an engine's steps and loads,
// and the Profile of an engine's speed and capacity. The planner, the
// simulated engine, the benchmark and the daemon's router workers all use
// this one model; none keeps a copy.
//
// It is shared by GPU discovery (nodes: simulated lists and the marketing
// names NVML reports), the engine runtimes (the simulated engine's timing
// and memory budget, the launchers' model arguments, the profile an engine
// is assumed to have until it reports its own), the planner and the
// benchmark. It is a top-level package rather than part of nodes because
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
//	activations = (2 x Intermediate/TP + 4 x Hidden) x 2 B x max batched tokens
//	KV/token    = 2 x Layers x max(KVHeads/TP, 1) x HeadDim x 2 B (BF16; 1 B in FP8)
//
// where max batched tokens is the layout's step budget
// (Layout.MaxBatchedTokens: 8,192 by default, 4,096 in the agent layouts),
// which the plan carries (Plan.MaxBatchedTokens) and the engines are told
// (vLLM's --max-num-batched-tokens) rather than left to pick their own
// (vLLM: 2,048 on a 4090), so that the cache they profile is the one
// planned and their steps are the ones the simulation times;
// and the KV cache gets the rest of its share of the GPU (KVCacheBytes):
//
//	KV cache = total x fraction - weights - non-torch - activations
//
// counted in whole blocks of 16 tokens (KVCacheBlocks). The simulated
// engine sizes its cache with exactly this (EngineConfig.Sized).
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
// Models served on demand from one GPU group are planned together
// (PlanShares, share.go): the group's engines share a budget (the same
// rule, less one CUDA context per engine, since a sleeping engine keeps
// its own), each model needs the least fraction that holds one agent
// turn, and the smaller models keep fractions of their own beside the
// largest where their needs fit, so that such sets are resident at once.
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
//
// # Timing and profile
//
// RooflineOf prices one engine step (perf.go): the fixed cost of a step
// plus the longer of its FLOPs at half the tensor-core peak (FP8 for FP8
// checkpoints on boards that have it) and its bytes (all weights, the KV
// read and written) at 85% of DRAM bandwidth. Loads of KV blocks run at
// the board's host link (GPU.HostLoadSeconds) and, from a node's SSD store,
// at the disk's bandwidth before it (GPU.DiskLoadSeconds, DefaultDiskGBps).
// The simulated engine (runtime/sim) schedules its steps and caches its
// blocks itself and asks this model how long each takes.
//
// # Layouts
//
// A Layout is how engines spread one model over a node's GPUs: the tensor
// parallel size, the KV cache dtype (FP8 halves a token's KV bytes) and the
// model's YaRN context where it has one (Model.WithRopeScaling; Qwen3:
// 131,072 tokens). RooflineOfLayout prices an engine of TP ranks per rank
// (1/TP of the FLOPs and weights, its share of the KV heads) plus two
// all-reduces per layer (GPU.AllReduceSeconds: over NVLink, or through host
// memory on boards without it, as RTX 4090s have); docs/perf.md, "Engine
// layouts", gives the figures, and docs/perf-history.md, "The model", their
// sources. An engine over GPUs of
// several kinds (a 4090 with a 3090) runs as the weakest of them
// (WeakestGPU): its ranks step together and share one KV cache size.
// Candidates lists the
// layouts of the catalog's models that fit a node's GPUs, for a planner
// that compares them; ContextShortfall says when a planned context leaves
// the agent clients' first prompts (AgentClients) too little room.
//
// ProfileOf estimates an engine's Profile from an EngineConfig: its KV
// cache and host tier in blocks as the engine sizes them, and its prefill
// speed as one full-budget step on an empty engine. It is exactly what the
// simulated engine measures on itself, and what the router is told of a
// real engine until the engine reports its KV capacity (Profile.Measured).
// The calibration tests pin the figures to published ones for an RTX 4090
// serving Qwen3-14B-FP8 (docs/ARCHITECTURE.md, "Calibration targets").
package catalog
