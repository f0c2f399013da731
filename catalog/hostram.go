package catalog

import (
	"fmt"
	"math"
)

// Figures of host-RAM sizing (PlanHostTiers).
const (
	// hostHeadroomMinBytes and hostHeadroomShare make the RAM no KV tier
	// may take, the larger of the two: the kernel, the desktop and its
	// programs, Docker, the Hearth daemon, and the page cache that loading
	// weights (safetensors are read through it) and the node's SSD store
	// (its files are read through it too) depend on. A tier is pinned
	// memory the kernel can neither swap nor reclaim, so running short
	// means the OOM killer, not a slow machine. 8 GiB keeps a small box
	// usable; a quarter scales with machines whose other programs and
	// page cache grow with them.
	hostHeadroomMinBytes = 8 * gib
	hostHeadroomShare    = 0.25
	// hostSlackMinBytes and hostSlackShare make what is kept free of the
	// memory available now (MemAvailable), the larger of the two: the
	// programs running now grow, and weights still have to pass through
	// the page cache when the engines start.
	hostSlackMinBytes = 4 * gib
	hostSlackShare    = 0.10
	// engineProcessBytes is the RAM each engine's own processes hold
	// outside its tier: the API server, the engine core and one worker per
	// GPU, each with Python, PyTorch and CUDA's host-side state. An
	// allowance of a few GiB, not a measurement.
	engineProcessBytes = 4 * gib
	// minHostTierBytes is the smallest tier worth pinning: below it the
	// tier holds too few blocks to outlive the GPU's own evictions.
	minHostTierBytes = 1 * gib
)

// HostTier is one engine's host-RAM KV tier as PlanHostTiers sizes it.
type HostTier struct {
	// GiB is the tier's size (vLLM's --kv-offloading-size, SGLang's
	// --hicache-size, runtime.Spec.KVOffloadingGiB), whole GiB; 0: none.
	GiB float64
	// Note says, in one sentence, why the tier is smaller than the
	// engine's GPU KV cache or absent; "" when it is at least that.
	Note string
}

// PlanHostTiers sizes the host-RAM KV tier of each engine of a node from
// the node's total RAM and the RAM available now (MemAvailable), both in
// bytes, the most RAM any of the engines keeps free when it allocates its
// tier (keepFree, bytes: an engine that refuses to start otherwise, as
// SGLang keeps 10 GiB; 0: none), and each engine's KV cache on its GPUs in
// bytes (all its ranks together: EnginePlan.KVCacheBytes). The result has
// one HostTier per engine, in order.
//
// The tiers share what is left once the OS and page cache keep their
// headroom (the larger of 8 GiB and a quarter of the total), what is
// available now keeps some slack (the larger of 4 GiB, a tenth of the
// total and keepFree), and each engine's processes have their allowance
// (4 GiB):
//
//	budget = min(total − headroom, available − slack) − engines × 4 GiB
//
// so their sum never exceeds either the RAM Hearth may take or the RAM that
// is free. Each engine's share is proportional to its GPU KV cache. Dynamo's
// rule is that a host tier should hold at least the GPU's KV cache, or blocks
// the GPU evicts push out the ones the tier holds before they are used again;
// a tier the budget cannot make that large is sized all the same, with a Note
// saying so. A share under 1 GiB is 0, with a Note.
func PlanHostTiers(totalBytes, availableBytes, keepFree uint64, gpuKVBytes []float64) []HostTier {
	tiers := make([]HostTier, len(gpuKVBytes))
	if len(gpuKVBytes) == 0 {
		return tiers
	}
	total, available := float64(totalBytes), float64(availableBytes)
	headroom := max(hostHeadroomMinBytes, hostHeadroomShare*total)
	// The last engine to allocate sees every other tier taken: with its
	// own, they must leave keepFree of what is available now.
	slack := max(hostSlackMinBytes, hostSlackShare*total, float64(keepFree))
	budget := min(total-headroom, available-slack) - float64(len(gpuKVBytes))*engineProcessBytes

	var kvSum float64
	for _, kv := range gpuKVBytes {
		kvSum += max(kv, 0)
	}
	for i, kv := range gpuKVBytes {
		kv = max(kv, 0)
		var share float64
		switch {
		case kvSum > 0:
			share = budget * kv / kvSum
		default:
			// No engine knows its GPU KV cache: an even split.
			share = budget / float64(len(gpuKVBytes))
		}
		share = math.Floor(max(share, 0)/gib) * gib
		switch {
		case kvSum > 0 && kv == 0:
			tiers[i].Note = "no host-RAM KV tier: the engine has no KV cache on its GPUs to offload"
		case share < minHostTierBytes:
			tiers[i].Note = fmt.Sprintf("no host-RAM KV tier: %s of RAM (%s available) leaves too little once the system keeps its %s and each engine its %s",
				gbString(total), gbString(available), gbString(headroom), gbString(engineProcessBytes))
		default:
			tiers[i].GiB = share / gib
			if share < kv {
				tiers[i].Note = fmt.Sprintf("host-RAM KV tier of %s is smaller than the GPU KV cache of %s: blocks will churn through it; more RAM, or fewer engines on this node, would fix that",
					gbString(share), gbString(kv))
			}
		}
	}
	return tiers
}

// KVCacheBytes is the engine's KV cache on all its GPUs together: its
// KVTokens on each rank, at each rank's share of a token's K and V. It is
// what the engine's host-RAM tier should at least hold (PlanHostTiers).
func (e EnginePlan) KVCacheBytes() float64 {
	var perToken int
	for _, g := range e.GPUs {
		perToken += g.KVBytesPerToken
	}
	return float64(e.KVTokens) * float64(perToken)
}

// gbString writes bytes as GiB to one decimal, "GB" as the package's
// sentences do.
func gbString(bytes float64) string {
	return fmt.Sprintf("%.1f GB", bytes/gib)
}

// CapHostTiers shrinks host-RAM KV tiers whose sum exceeds limit bytes,
// the host memory that can be pinned (under WSL2 about half the VM's:
// vLLM and SGLang keep their host tiers in pinned memory), each in
// proportion to its size, whole GiB, with a Note saying why. limit 0
// leaves the tiers as they are.
func CapHostTiers(tiers []HostTier, limit uint64) []HostTier {
	var sum float64
	for _, t := range tiers {
		sum += t.GiB
	}
	capGiB := float64(limit) / gib
	if limit == 0 || sum <= capGiB {
		return tiers
	}
	out := make([]HostTier, len(tiers))
	for i, t := range tiers {
		out[i] = t
		if t.GiB == 0 {
			continue
		}
		out[i].GiB = math.Floor(t.GiB * capGiB / sum)
		note := fmt.Sprintf("host-RAM KV tier capped at %s of the %s this host can pin (WSL2 pins about half its memory)",
			gbString(out[i].GiB*gib), gbString(float64(limit)))
		if out[i].GiB < minHostTierBytes/gib {
			out[i].GiB = 0
			note = "no host-RAM KV tier: " + gbString(float64(limit)) + " of pinnable memory (WSL2 pins about half its memory) leaves too little"
		}
		out[i].Note = note
	}
	return out
}
