package catalog

import (
	"testing"
	"time"
)

func TestStepLoadAttention(t *testing.T) {
	// A chunk of k tokens after c computed ones sees Σ (c+i) for i in 1..k.
	var l StepLoad
	l.Add(10, 3)
	if want := 11.0 + 12 + 13; l.attnCtx != want {
		t.Errorf("attnCtx = %v, want %v", l.attnCtx, want)
	}
	if l.kvTokens != 13 || l.tokens != 3 || l.seqs != 1 {
		t.Errorf("load = %+v", l)
	}
}

func TestStepDuration(t *testing.T) {
	r := RooflineOf(gpu(t, "rtx4090"), model(t, "qwen3-14b-fp8"))
	var empty StepLoad
	if d := r.StepDuration(&empty); d != 0 {
		t.Errorf("an empty step takes %v", d)
	}
	// One decode token streams the weights once: memory-bound, about
	// 15.7 GiB / (1008 GB/s x 0.85) = 19.7 ms plus the step's fixed cost.
	var decode StepLoad
	decode.Add(1000, 1)
	if d := r.StepDuration(&decode); d < 20*time.Millisecond || d > 23*time.Millisecond {
		t.Errorf("one decode step %v, want about 21.7 ms", d)
	}
	// 8192 prefill tokens are compute-bound and take far longer.
	var prefill StepLoad
	prefill.Add(0, 8192)
	if d := r.StepDuration(&prefill); d < 10*r.StepDuration(&decode) {
		t.Errorf("an 8192-token prefill step %v is not compute-bound", d)
	}
}

func TestRooflineScalesWithHardware(t *testing.T) {
	// The same prompt is slower on a GPU with less compute and faster on
	// one with more; an FP8 model on a GPU without FP8 runs at the BF16
	// rate.
	prefill := func(kind, name string) time.Duration {
		var l StepLoad
		l.Add(0, 4000)
		r := RooflineOf(gpu(t, kind), model(t, name))
		return r.StepDuration(&l)
	}
	tests := []struct {
		name       string
		slow, fast [2]string
	}{
		{"3090 slower than 4090", [2]string{"rtx3090", "qwen3-8b"}, [2]string{"rtx4090", "qwen3-8b"}},
		{"4090 slower than h100", [2]string{"rtx4090", "qwen3-14b-fp8"}, [2]string{"h100", "qwen3-14b-fp8"}},
		{"bf16 slower than fp8 on 4090", [2]string{"rtx4090", "qwen3-8b"}, [2]string{"rtx4090", "qwen3-8b-fp8"}},
		{"fp8 at the bf16 rate on 3090", [2]string{"rtx3090", "qwen3-8b-fp8"}, [2]string{"rtx4090", "qwen3-8b-fp8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slow, fast := prefill(tt.slow[0], tt.slow[1]), prefill(tt.fast[0], tt.fast[1])
			if slow <= fast {
				t.Errorf("%v: %v, %v: %v", tt.slow, slow, tt.fast, fast)
			}
		})
	}
}

func TestLoadSeconds(t *testing.T) {
	const block = 16 * 160 << 10 // one 2.5 MiB block of Qwen3-14B
	g := gpu(t, "rtx4090")
	if got, want := g.HostLoadSeconds(block), block/25e9; got != want {
		t.Errorf("host load %v s, want %v (PCIe 4.0 at 25 GB/s)", got, want)
	}
	if got, want := g.DiskLoadSeconds(block, DefaultDiskGBps), block/5e9+block/25e9; got != want {
		t.Errorf("disk load %v s, want %v (disk, then PCIe)", got, want)
	}
	if g.HostLoadBytesPerSec() != 25e9 {
		t.Errorf("host load bandwidth %v, want 25e9", g.HostLoadBytesPerSec())
	}
	unknown := GPUByName("NVIDIA RTX 5000", 32<<30)
	if unknown.HostLoadSeconds(block) != 0 || unknown.DiskLoadSeconds(block, 5) != block/5e9 {
		t.Errorf("a board of unknown link: host %v s, disk %v s", unknown.HostLoadSeconds(block), unknown.DiskLoadSeconds(block, 5))
	}
}
