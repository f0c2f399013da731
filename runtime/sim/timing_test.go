package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/catalog"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// The calibration targets for an RTX 4090 serving Qwen3-14B-FP8
// (docs/ARCHITECTURE.md, "Calibration targets"): they pin the timing
// model's constants to published figures.

func TestCalibrationTTFT(t *testing.T) {
	c := newCore(t, Config{GPU: "rtx4090", Model: "qwen3-14b-fp8"}, nil)
	d := newDriver(c)
	prompt := tokens(1, 6000)

	mustAdd(t, c, d.now, &Request{ID: "cold", Prompt: prompt, Output: tokens(900_000, 1)})
	d.run(t)
	cold := d.first["cold"]

	start := d.now
	mustAdd(t, c, start, &Request{ID: "warm", Prompt: prompt, Output: tokens(900_000, 1)})
	d.run(t)
	warm := d.first["warm"] - start

	t.Logf("6,000-token prompt: cold TTFT %v, cached TTFT %v (%.1f%%)", cold, warm, 100*float64(warm)/float64(cold))
	if cold < 800*time.Millisecond || cold > 2500*time.Millisecond {
		t.Errorf("cold TTFT %v, want 0.8..2.5 s", cold)
	}
	if float64(warm) >= 0.15*float64(cold) {
		t.Errorf("cached TTFT %v is not under 15%% of cold %v", warm, cold)
	}
	out := d.outputs["warm"][0]
	if out.CachedTokens != 5984 {
		t.Errorf("cached tokens = %d, want 5984 (the last block is recomputed)", out.CachedTokens)
	}
}

// decodeRate runs n identical-length streams with distinct prompts and
// returns the aggregate tokens/s during the phase when all n decode.
func decodeRate(t *testing.T, gpu, model string, n, promptLen, outputLen int) float64 {
	t.Helper()
	c := newCore(t, Config{GPU: gpu, Model: model}, nil)
	d := newDriver(c)
	for i := range n {
		mustAdd(t, c, 0, &Request{ID: fmt.Sprint(i), Prompt: tokens(i*100_000, promptLen), Output: tokens(7, outputLen)})
	}
	// Prefill (and first tokens) first, then measure pure decode steps.
	for len(d.first) < n {
		d.step(t)
	}
	start, generated := d.now, 0
	for c.HasWork() {
		res := d.step(t)
		if res.NumScheduled != n {
			break
		}
		generated += len(res.Outputs)
	}
	return float64(generated) / (d.now - start).Seconds()
}

func TestCalibrationDecode(t *testing.T) {
	single := decodeRate(t, "rtx4090", "qwen3-14b-fp8", 1, 1000, 400)
	batch := decodeRate(t, "rtx4090", "qwen3-14b-fp8", 32, 500, 300)
	t.Logf("decode: 1 stream %.1f tok/s; 32 streams %.0f tok/s aggregate (%.1fx)", single, batch, batch/single)
	if single < 40 || single > 60 {
		t.Errorf("single-stream decode %.1f tok/s, want 40..60", single)
	}
	if batch < 8*single {
		t.Errorf("32 streams give %.0f tok/s, want well over 8x single (%.0f)", batch, 8*single)
	}
}

// TestProfileIsWhatTheCoreMeasures holds the catalog's profile of an engine
// (what the router is told of simulated and real engines alike) to what the
// simulated engine does: its KV sizes, and the speed of its first
// full-budget prefill step.
func TestProfileIsWhatTheCoreMeasures(t *testing.T) {
	checked := 0
	for _, gpu := range GPUNames() {
		for _, model := range ModelNames() {
			for _, kind := range []hruntime.Kind{hruntime.KindVLLM, hruntime.KindSGLang} {
				// Defaults, and a short context from a smaller share of
				// memory (the prompt is then one token under the context).
				for _, shape := range []Config{{}, {GPUMemoryUtilization: 0.8, MaxModelLen: 4096, CPUOffloadGiB: 32}} {
					cfg := shape
					cfg.GPU, cfg.Model, cfg.Kind = gpu, model, kind
					if cfg.Validate() != nil {
						continue // the model does not fit the GPU
					}
					checked++
					want, err := catalog.ProfileOf(cfg.Perf())
					if err != nil {
						t.Fatalf("%+v: %v", cfg, err)
					}
					c := newCore(t, cfg, nil)
					eff := c.Config()
					n := min(eff.MaxNumBatchedTokens, eff.MaxModelLen-1)
					mustAdd(t, c, 0, &Request{ID: "profile", Prompt: tokens(0, n), Output: []uint32{0}})
					res := c.Step(0)
					got := catalog.Profile{
						GPUBlocks: eff.NumGPUBlocks, BlockSize: eff.BlockSize, CPUBlocks: eff.NumCPUBlocks,
						BlockBytes:          c.Model().KVBytesPerToken() * eff.BlockSize,
						PrefillTokensPerSec: float64(res.NumTokens) / res.Duration.Seconds(),
						LoadBytesPerSec:     c.GPU().PCIeGBps * 1e9, MaxModelLen: eff.MaxModelLen,
					}
					if got != want {
						t.Errorf("%s on %s (%v, %+v): engine %+v, catalog %+v", model, gpu, kind, shape, got, want)
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d engines start", checked)
	}
}
