package kvtier

import "github.com/hearth-llm/hearth/kvevents"

// Tier is a level of KV-cache storage, fastest first.
type Tier uint8

// The tiers a block can live in.
const (
	GPU   Tier = iota // device memory of the engine's GPU
	RAM               // host memory (vLLM's "CPU" medium)
	Disk              // local SSD
	Count = 3         // the number of tiers
)

// String returns the tier's name as the console shows it.
func (t Tier) String() string {
	switch t {
	case GPU:
		return "GPU"
	case RAM:
		return "RAM"
	case Disk:
		return "Disk"
	}
	return "Tier(" + string(rune('0'+t)) + ")"
}

// Of is the tier that holds the blocks of a KV event in medium m; ok is
// false for a medium no tier stands for: an unknown one, and SGLang's
// EXTERNAL pool, which lies outside the node and which Hearth cannot load
// from itself. Package kvevents reads the medium names engines write.
func Of(m kvevents.Medium) (t Tier, ok bool) {
	switch m {
	case kvevents.MediumGPU:
		return GPU, true
	case kvevents.MediumCPU:
		return RAM, true
	case kvevents.MediumDisk:
		return Disk, true
	}
	return GPU, false
}
