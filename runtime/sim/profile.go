package sim

import (
	"errors"
	"fmt"
)

// Profile is what a router needs to know of an engine to weigh it against
// others: how much KV it holds in each tier and how fast it fills it.
type Profile struct {
	GPUBlocks  int // KV cache blocks on the GPU
	CPUBlocks  int // blocks of the host-RAM tier (0: no tier)
	BlockBytes int // KV bytes of one block
	// PrefillTokensPerSec is the prompt throughput of one full-budget
	// scheduler step on an empty engine: what a router would measure.
	PrefillTokensPerSec float64
	// LoadBytesPerSec is the host-to-device bandwidth a reload from the
	// host-RAM tier runs at.
	LoadBytesPerSec float64
	BlockSize       int // tokens per block
	MaxModelLen     int // the context an engine so configured accepts
}

// ProfileOf models an engine configured as cfg on a scratch core and
// returns its profile.
func ProfileOf(cfg Config) (Profile, error) {
	core, err := NewCore(cfg, nil)
	if err != nil {
		return Profile{}, err
	}
	eff := core.Config()
	n := min(eff.MaxNumBatchedTokens, eff.MaxModelLen-1)
	prompt := make([]uint32, n)
	for i := range prompt {
		prompt[i] = uint32(i)
	}
	if err := core.Add(0, &Request{ID: "profile", Prompt: prompt, Output: []uint32{0}}); err != nil {
		return Profile{}, fmt.Errorf("profile: %w", err)
	}
	res := core.Step(0)
	if res.Duration <= 0 || res.NumTokens <= 0 {
		return Profile{}, errors.New("profile: prefill step took no time")
	}
	return Profile{
		GPUBlocks:           eff.NumGPUBlocks,
		CPUBlocks:           eff.NumCPUBlocks,
		BlockBytes:          core.Model().KVBytesPerToken() * eff.BlockSize,
		PrefillTokensPerSec: float64(res.NumTokens) / res.Duration.Seconds(),
		LoadBytesPerSec:     core.GPU().PCIeGBps * 1e9,
		BlockSize:           eff.BlockSize,
		MaxModelLen:         eff.MaxModelLen,
	}, nil
}
