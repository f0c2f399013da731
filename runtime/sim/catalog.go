package sim

import (
	"slices"
	"strings"
)

const gib = 1 << 30

// GPUSpec is what the timing model and the memory budget need to know about a
// GPU. Figures are the vendor's dense (no sparsity) peaks.
type GPUSpec struct {
	Name        string
	MemoryBytes float64
	// MemoryBandwidth is the peak DRAM bandwidth in bytes/s.
	MemoryBandwidth float64
	// BF16FLOPS is the dense BF16 tensor-core peak with FP32 accumulate.
	BF16FLOPS float64
	// FP8FLOPS is the dense FP8 tensor-core peak with FP32 accumulate, 0 when
	// the GPU has no FP8 tensor cores (FP8 checkpoints then run as
	// weight-only FP8 at the BF16 rate, as vLLM's Marlin kernels do).
	FP8FLOPS float64
	// PCIeGBps is the effective host-to-device bandwidth in GB/s (1e9
	// bytes/s) of pinned-memory copies, what loading offloaded KV blocks
	// from host RAM achieves: about 80% of the link's 32 GB/s (PCIe 4.0 x16)
	// or 64 GB/s (PCIe 5.0 x16) after protocol overhead, as cudaMemcpy
	// bandwidth tests measure.
	PCIeGBps float64
}

// ModelSpec is the shape of a model as far as KV size and cost go.
type ModelSpec struct {
	Name       string
	Layers     int
	QueryHeads int
	KVHeads    int
	HeadDim    int
	Hidden     int
	// Intermediate is the MLP width; it sizes the activation peak.
	Intermediate int
	// Params is the total parameter count; a forward pass costs 2*Params
	// FLOPs per token in its linear layers.
	Params float64
	// WeightBytes is the resident size of the weights on the GPU.
	WeightBytes float64
	// FP8 is set for FP8 checkpoints: linear layers run at the FP8 peak where
	// the GPU has one.
	FP8         bool
	MaxModelLen int
}

// KVBytesPerToken is the size of one token's K and V over all layers, in BF16
// (vLLM's default kv-cache dtype follows the activations, BF16, even for FP8
// weights).
func (m ModelSpec) KVBytesPerToken() int {
	const bf16 = 2
	return 2 * m.Layers * m.KVHeads * m.HeadDim * bf16
}

// gpuCatalog holds the GPUs the simulator knows. Sources: NVIDIA's Ada
// (AD102) and Ampere (GA102) whitepapers and the H100 SXM datasheet.
var gpuCatalog = map[string]GPUSpec{
	"rtx4090": {
		Name:            "rtx4090",
		MemoryBytes:     24 * gib,
		MemoryBandwidth: 1008e9,
		BF16FLOPS:       165.2e12,
		FP8FLOPS:        330.3e12,
		PCIeGBps:        25, // PCIe 4.0 x16
	},
	"rtx3090": {
		Name:            "rtx3090",
		MemoryBytes:     24 * gib,
		MemoryBandwidth: 936e9,
		BF16FLOPS:       71e12,
		FP8FLOPS:        0,
		PCIeGBps:        25, // PCIe 4.0 x16
	},
	"h100": {
		Name:            "h100",
		MemoryBytes:     80 * gib,
		MemoryBandwidth: 3.35e12,
		BF16FLOPS:       989e12,
		FP8FLOPS:        1979e12,
		PCIeGBps:        50, // PCIe 5.0 x16
	},
}

// modelCatalog holds the models the simulator knows. Shapes are from the
// models' config.json on Hugging Face; parameter counts from their model
// cards; the FP8 weight size is what vLLM reports after loading Qwen3-14B-FP8
// (15.7 GiB), the BF16 size is 2 bytes per parameter.
var modelCatalog = map[string]ModelSpec{
	"qwen3-14b-fp8": {
		Name: "qwen3-14b-fp8", Layers: 40, QueryHeads: 40, KVHeads: 8, HeadDim: 128,
		Hidden: 5120, Intermediate: 17408,
		Params: 14.8e9, WeightBytes: 15.7 * gib, FP8: true, MaxModelLen: 40960,
	},
	"qwen3-8b": {
		Name: "qwen3-8b", Layers: 36, QueryHeads: 32, KVHeads: 8, HeadDim: 128,
		Hidden: 4096, Intermediate: 12288,
		Params: 8.19e9, WeightBytes: 8.19e9 * 2, MaxModelLen: 40960,
	},
	"qwen3-8b-fp8": {
		Name: "qwen3-8b-fp8", Layers: 36, QueryHeads: 32, KVHeads: 8, HeadDim: 128,
		Hidden: 4096, Intermediate: 12288,
		// FP8 linear weights plus BF16 embedding and LM head (2 x 0.62e9).
		Params: 8.19e9, WeightBytes: 8.19e9 + 2*0.622e9, FP8: true, MaxModelLen: 40960,
	},
}

// GPUNames lists the GPUs the simulator models, sorted.
func GPUNames() []string { return sortedKeys(gpuCatalog) }

// ModelNames lists the models the simulator models, sorted.
func ModelNames() []string { return sortedKeys(modelCatalog) }

// LookupGPU returns the spec of a GPU by name (case-insensitive).
func LookupGPU(name string) (GPUSpec, bool) {
	g, ok := gpuCatalog[strings.ToLower(name)]
	return g, ok
}

// LookupModel returns the spec of a model by name (case-insensitive).
func LookupModel(name string) (ModelSpec, bool) {
	m, ok := modelCatalog[strings.ToLower(name)]
	return m, ok
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
