package router

// WorkerID identifies one engine instance the router can send requests to.
// A data-parallel rank of an engine is a worker of its own. IDs are small
// integers handed out by the router's registry, so per-worker state can live
// in slices and bitsets instead of maps keyed by strings.
type WorkerID uint32
