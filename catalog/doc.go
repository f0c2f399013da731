// Package catalog holds the facts Hearth knows about GPUs and models: each
// board's memory, bandwidth, tensor-core peaks and host link, and each
// model's shape, weight size, Hugging Face repository and family.
//
// It is one table with lookups and no behaviour, shared by GPU discovery
// (nodes: simulated lists and the marketing names NVML reports), the engine
// runtimes (the simulated engine's timing model and memory budget, the
// launchers' model arguments), the planner and the benchmark. It is a
// top-level package rather than part of nodes because runtime and bench may
// not import nodes, and a second copy of the figures would drift. It imports
// only the standard library, so anything may import it.
//
// Boards the catalog does not list still work: GPUByName describes them as
// the Unknown kind, sized by the memory the driver reports, with no peaks.
package catalog
