package kvbm

import "github.com/hearth-llm/hearth/kvevents"

// Tier is a level of KV-cache storage, fastest first.
type Tier uint8

// The tiers a block can live in.
const (
	TierGPU  Tier = iota // device memory of the engine's GPU
	TierRAM              // host memory (vLLM's "CPU" medium)
	TierDisk             // local SSD
	NumTiers = 3
)

// String returns the tier's name as the console shows it.
func (t Tier) String() string {
	switch t {
	case TierGPU:
		return "GPU"
	case TierRAM:
		return "RAM"
	case TierDisk:
		return "Disk"
	}
	return "Tier(" + string(rune('0'+t)) + ")"
}

// TierOf is the tier that holds the blocks of a KV event in medium m; ok is
// false for a medium no tier stands for: an unknown one, and SGLang's
// EXTERNAL pool, which lies outside the node and which Hearth cannot load
// from itself. Package kvevents reads the medium names engines write.
func TierOf(m kvevents.Medium) (t Tier, ok bool) {
	switch m {
	case kvevents.MediumGPU:
		return TierGPU, true
	case kvevents.MediumCPU:
		return TierRAM, true
	case kvevents.MediumDisk:
		return TierDisk, true
	}
	return TierGPU, false
}
