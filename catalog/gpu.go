package catalog

import (
	"slices"
	"strings"
)

const gib = 1 << 30

// Unknown is the kind of a board the catalog does not list.
const Unknown = "unknown"

// GPU is one model of board and the figures Hearth plans and simulates with.
// Peaks are the vendor's dense (no sparsity) figures; a zero figure means
// the catalog does not know it.
type GPU struct {
	// Kind is Hearth's short name for the board ("rtx4090"), the name a
	// simulated GPU list and the simulated engine use; Unknown for a board
	// the catalog does not list.
	Kind string
	// Name is the marketing name as NVML reports it
	// ("NVIDIA GeForce RTX 4090").
	Name string
	// Aliases are further names LookupGPU accepts for the kind ("4090").
	Aliases []string

	// MemoryBytes is the board's memory: the vendor's capacity read as GiB
	// for a catalog entry, what the driver reports for a board found by
	// GPUByName. NVML reports a little less than the vendor's figure (an
	// H200 sold as 141 GB reports 140.4 GiB).
	MemoryBytes uint64
	// MemoryBandwidth is the peak DRAM bandwidth in bytes/s.
	MemoryBandwidth float64
	// BF16FLOPS is the dense BF16 tensor-core peak with FP32 accumulate.
	BF16FLOPS float64
	// FP8FLOPS is the dense FP8 tensor-core peak with FP32 accumulate, 0
	// when the board has no FP8 tensor cores (FP8 checkpoints then run as
	// weight-only FP8 at the BF16 rate, as vLLM's Marlin kernels do).
	FP8FLOPS float64
	// PCIeGen and PCIeWidth describe the host link (generation, lanes).
	PCIeGen, PCIeWidth int
	// PCIeGBps is the effective host-to-device bandwidth in GB/s (1e9
	// bytes/s) of pinned-memory copies, what loading offloaded KV blocks
	// from host RAM achieves: about 80% of the link's 32 GB/s (PCIe 4.0 x16)
	// or 64 GB/s (PCIe 5.0 x16) after protocol overhead, as cudaMemcpy
	// bandwidth tests measure (an H200 on PCIe 5.0 x16 copies 54-55 GB/s
	// in large batches; 50 is kept for every 5.0 x16 board).
	PCIeGBps float64
	// NVLinkGBps is the board's NVLink bandwidth per direction in GB/s, 0
	// for a board without NVLink (every GeForce board since the 4090, which
	// also has no PCIe peer-to-peer: its tensor-parallel all-reduces go
	// through host memory, see AllReduceSeconds).
	NVLinkGBps float64
}

// gpus are the boards the catalog knows, consumer boards first. Figures are
// written from the vendors' public specifications:
//
//   - GeForce RTX 4090 and 4080: NVIDIA Ada GPU Architecture whitepaper,
//     appendix tables (dense BF16 and FP8 with FP32 accumulate, which
//     GeForce boards run at half the FP16-accumulate rate).
//   - GeForce RTX 3090 and 3080 (10 GB): NVIDIA Ampere GA102 GPU
//     Architecture whitepaper, appendix tables (dense BF16 with FP32
//     accumulate; no FP8).
//   - RTX A6000: NVIDIA RTX A6000 datasheet (309.7 TFLOPS tensor peak with
//     sparsity, so 154.8 dense; professional boards accumulate in FP32 at
//     full rate; no FP8).
//   - L40S: NVIDIA L40S datasheet.
//   - H100 SXM5 80 GB and H200 SXM 141 GB: the NVIDIA H100 and H200 Tensor
//     Core GPU datasheets (SXM columns; their tensor figures are with
//     sparsity, halved here). The PCIe and NVL variants have lower clocks
//     and bandwidth and report other names: they are not these kinds.
//
// Memory bandwidth is the data rate times the bus width (GDDR) or the
// datasheet figure (HBM).
var gpus = []GPU{
	{
		Kind: "rtx4090", Name: "NVIDIA GeForce RTX 4090", Aliases: []string{"4090"},
		MemoryBytes: 24 * gib, MemoryBandwidth: 1008e9, // 21 Gbps x 384 bit
		BF16FLOPS: 165.2e12, FP8FLOPS: 330.3e12,
		PCIeGen: 4, PCIeWidth: 16, PCIeGBps: 25,
	},
	{
		Kind: "rtx3090", Name: "NVIDIA GeForce RTX 3090", Aliases: []string{"3090"},
		MemoryBytes: 24 * gib, MemoryBandwidth: 936e9, // 19.5 Gbps x 384 bit
		BF16FLOPS: 71e12,
		PCIeGen:   4, PCIeWidth: 16, PCIeGBps: 25,
	},
	{
		Kind: "rtx4080", Name: "NVIDIA GeForce RTX 4080", Aliases: []string{"4080"},
		MemoryBytes: 16 * gib, MemoryBandwidth: 716.8e9, // 22.4 Gbps x 256 bit
		BF16FLOPS: 97.5e12, FP8FLOPS: 194.9e12,
		PCIeGen: 4, PCIeWidth: 16, PCIeGBps: 25,
	},
	{
		Kind: "rtx3080", Name: "NVIDIA GeForce RTX 3080", Aliases: []string{"3080"},
		MemoryBytes: 10 * gib, MemoryBandwidth: 760e9, // 19 Gbps x 320 bit
		BF16FLOPS: 59.5e12,
		PCIeGen:   4, PCIeWidth: 16, PCIeGBps: 25,
	},
	{
		Kind: "a6000", Name: "NVIDIA RTX A6000", Aliases: []string{"rtxa6000"},
		MemoryBytes: 48 * gib, MemoryBandwidth: 768e9, // 16 Gbps x 384 bit
		BF16FLOPS: 154.8e12,
		PCIeGen:   4, PCIeWidth: 16, PCIeGBps: 25,
	},
	{
		Kind: "l40s", Name: "NVIDIA L40S",
		MemoryBytes: 48 * gib, MemoryBandwidth: 864e9, // 18 Gbps x 384 bit
		BF16FLOPS: 362.05e12, FP8FLOPS: 733e12,
		PCIeGen: 4, PCIeWidth: 16, PCIeGBps: 25,
	},
	{
		Kind: "h100", Name: "NVIDIA H100 80GB HBM3", Aliases: []string{"h100-80gb"},
		MemoryBytes: 80 * gib, MemoryBandwidth: 3.35e12,
		BF16FLOPS: 989e12, FP8FLOPS: 1979e12,
		PCIeGen: 5, PCIeWidth: 16, PCIeGBps: 50, NVLinkGBps: 450,
	},
	{
		Kind: "h200", Name: "NVIDIA H200", Aliases: []string{"h200-141gb"},
		MemoryBytes: 141 * gib, MemoryBandwidth: 4.8e12,
		BF16FLOPS: 989e12, FP8FLOPS: 1979e12,
		PCIeGen: 5, PCIeWidth: 16, PCIeGBps: 50, NVLinkGBps: 450,
	},
}

// GPUKinds lists the kinds the catalog knows, consumer boards first.
func GPUKinds() []string {
	out := make([]string, len(gpus))
	for i, g := range gpus {
		out[i] = g.Kind
	}
	return out
}

// LookupGPU returns the board of a kind or one of its aliases, ignoring case
// and surrounding space ("rtx4090", "4090", "RTX4090").
func LookupGPU(kind string) (GPU, bool) {
	kind = strings.ToLower(strings.TrimSpace(kind))
	for _, g := range gpus {
		if kind == g.Kind || slices.Contains(g.Aliases, kind) {
			return g.clone(), true
		}
	}
	return GPU{}, false
}

// WeakestGPU returns, of the catalog kinds given, the one no larger and no
// faster than any other on every figure (memory, memory bandwidth, BF16 and
// FP8 peaks, host link): the board a tensor-parallel engine over these GPUs
// runs as, since its ranks step in lockstep at the slowest one's pace and
// size the KV cache to the smallest one's memory. False when a kind is
// unknown or none is weakest on every figure (a larger but slower board).
func WeakestGPU(kinds []string) (string, bool) {
	boards := make([]GPU, len(kinds))
	for i, k := range kinds {
		g, ok := LookupGPU(k)
		if !ok {
			return "", false
		}
		boards[i] = g
	}
	for _, w := range boards {
		weakest := true
		for _, g := range boards {
			if w.MemoryBytes > g.MemoryBytes || w.MemoryBandwidth > g.MemoryBandwidth || w.BF16FLOPS > g.BF16FLOPS ||
				w.FP8FLOPS > g.FP8FLOPS || w.PCIeGBps > g.PCIeGBps || w.NVLinkGBps > g.NVLinkGBps {
				weakest = false
				break
			}
		}
		if weakest {
			return w.Kind, true
		}
	}
	return "", false
}

// GPUByName describes the board NVML reports as name with memoryBytes of
// memory. A listed board is matched by its marketing name, ignoring case,
// repeated spaces and the "NVIDIA " prefix older drivers leave out; its
// memory is the reported one when memoryBytes is not 0, since one name can
// cover boards of two sizes (the RTX 3080 was sold with 10 and 12 GB). Any
// other board is the Unknown kind under its own name, sized by memoryBytes,
// with no peaks: a planner can still fit models by memory.
func GPUByName(name string, memoryBytes uint64) GPU {
	want := normalName(name)
	for _, g := range gpus {
		if normalName(g.Name) == want {
			g = g.clone()
			if memoryBytes != 0 {
				g.MemoryBytes = memoryBytes
			}
			return g
		}
	}
	return GPU{Kind: Unknown, Name: name, MemoryBytes: memoryBytes}
}

// normalName folds the differences between drivers' spellings of a name.
func normalName(s string) string {
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	return strings.TrimPrefix(s, "nvidia ")
}

// clone copies g so that callers cannot change the table through Aliases.
func (g GPU) clone() GPU {
	g.Aliases = slices.Clone(g.Aliases)
	return g
}
