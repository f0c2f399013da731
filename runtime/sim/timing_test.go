package sim

import (
	"fmt"
	"testing"
	"time"
)

// The calibration targets for an RTX 4090 serving Qwen3-14B-FP8
// (docs/ARCHITECTURE.md, "Calibration targets"): they pin the timing
// model's constants to published figures.

func TestCalibrationKVBlocks(t *testing.T) {
	c := newCore(t, Config{GPU: "rtx4090", Model: "qwen3-14b-fp8"}, nil)
	cfg := c.Config()
	t.Logf("rtx4090 + qwen3-14b-fp8: %d blocks, %d tokens, max_model_len %d", cfg.NumGPUBlocks, cfg.NumGPUBlocks*cfg.BlockSize, cfg.MaxModelLen)
	if cfg.NumGPUBlocks < 1800 || cfg.NumGPUBlocks > 2000 {
		t.Errorf("NumGPUBlocks = %d, want about 1,900 (1,800..2,000)", cfg.NumGPUBlocks)
	}
	if got := c.Model().KVBytesPerToken(); got != 160<<10 {
		t.Errorf("KV bytes per token = %d, want 160 KiB", got)
	}
}

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

func TestTimingScalesWithHardware(t *testing.T) {
	// The same prompt is slower on a GPU with less compute and faster on one
	// with more; an FP8 model on a GPU without FP8 runs at the BF16 rate.
	ttft := func(gpu, model string) time.Duration {
		c := newCore(t, Config{GPU: gpu, Model: model}, nil)
		d := newDriver(c)
		mustAdd(t, c, 0, &Request{ID: "r", Prompt: tokens(1, 4000), Output: tokens(1, 1)})
		d.run(t)
		return d.first["r"]
	}
	tests := []struct {
		name       string
		slow, fast [2]string
	}{
		{"3090 slower than 4090", [2]string{"rtx3090", "qwen3-8b"}, [2]string{"rtx4090", "qwen3-8b"}},
		{"4090 slower than h100", [2]string{"rtx4090", "qwen3-14b-fp8"}, [2]string{"h100", "qwen3-14b-fp8"}},
		{"bf16 slower than fp8 on 4090", [2]string{"rtx4090", "qwen3-8b"}, [2]string{"rtx4090", "qwen3-8b-fp8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slow, fast := ttft(tt.slow[0], tt.slow[1]), ttft(tt.fast[0], tt.fast[1])
			if slow <= fast {
				t.Errorf("%v: %v, %v: %v", tt.slow, slow, tt.fast, fast)
			}
		})
	}
}

func TestStepLoadAttention(t *testing.T) {
	// A chunk of k tokens after c computed ones sees Σ (c+i) for i in 1..k.
	var l stepLoad
	l.add(10, 3)
	if want := 11.0 + 12 + 13; l.attnCtx != want {
		t.Errorf("attnCtx = %v, want %v", l.attnCtx, want)
	}
	if l.kvTokens != 13 || l.tokens != 3 || l.seqs != 1 {
		t.Errorf("load = %+v", l)
	}
}
