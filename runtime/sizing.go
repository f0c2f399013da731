package runtime

import "github.com/hearth-llm/hearth/catalog"

// EngineConfigOf is the engine a spec describes as the catalog's
// performance model sees it, unsized (catalog.ProfileOf and
// EngineConfig.Sized derive the KV cache from it): the one translation of
// a Spec into sizes, which the daemon's estimate and the simulated engine
// both use.
//
//   - The GPU is the weakest of the spec's GPUs (catalog.WeakestGPU): the
//     ranks of a tensor-parallel engine step at the slowest one's pace,
//     and the engine sizes its KV cache to the smallest one's memory (vLLM
//     and SGLang both take the minimum over their ranks). Where none is
//     weakest on every figure, or a kind is unknown, it is the first GPU.
//   - The model's context is the one its overrides give it
//     (ModelContextOf), so a YaRN factor of 2 doubles it and an override
//     that leaves the context alone leaves it alone.
//   - The memory share is the kind's (EngineKind.MemoryShare), so each
//     engine's memory flag is read as that engine reads it.
//
// A GPU or model the catalog does not list stays zero but for its name
// (GPU.Kind, Model.Name): Sized then derives nothing from it, and the
// caller decides what to assume.
func EngineConfigOf(spec Spec) catalog.EngineConfig {
	e := catalog.EngineConfig{
		NumGPUBlocks: spec.NumGPUBlocks, MaxModelLen: spec.MaxModelLen, MaxBatchedTokens: spec.MaxBatchedTokens,
		MemoryFraction: spec.GPUMemoryUtilization, CPUOffloadGiB: spec.KVOffloadingGiB,
		TP: len(spec.GPUs()), KVCacheDtype: spec.KVCacheDtype,
	}
	if k, ok := Lookup(spec.Engine); ok {
		e.Share = k.MemoryShare
	}
	kind := spec.GPUKind()
	if g, ok := catalog.LookupGPU(kind); ok {
		e.GPU = g
	} else {
		e.GPU = catalog.GPU{Kind: kind}
	}
	if m, ok := catalog.LookupModel(spec.Model); ok {
		if n, err := ModelContextOf(spec.ModelOverrides, m.MaxModelLen); err == nil && n > 0 {
			m.MaxModelLen = n
		}
		e.Model = m
	} else {
		e.Model = catalog.Model{Name: spec.Model}
	}
	return e
}

// GPUKind is the kind of GPU the engine runs as: the weakest of its GPUs
// (catalog.WeakestGPU), else the first one's (see EngineConfigOf).
func (s Spec) GPUKind() string {
	gpus := s.GPUs()
	kinds := make([]string, len(gpus))
	for i, g := range gpus {
		kinds[i] = g.Kind
	}
	if weakest, ok := catalog.WeakestGPU(kinds); ok {
		return weakest
	}
	return s.GPU.Kind
}
