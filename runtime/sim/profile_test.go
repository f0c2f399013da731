package sim

import "testing"

func TestProfileOf(t *testing.T) {
	p4090, err := ProfileOf(Config{GPU: "rtx4090", Model: "qwen3-14b-fp8", CPUOffloadGiB: 32})
	if err != nil {
		t.Fatal(err)
	}
	if p4090.GPUBlocks != 1866 || p4090.CPUBlocks != 13107 || p4090.BlockBytes != 16*160*1024 {
		t.Errorf("rtx4090 profile %+v: want 1866 GPU blocks, 13107 CPU blocks of 2.5 MiB", p4090)
	}
	if p4090.LoadBytesPerSec != 25e9 {
		t.Errorf("load bandwidth %v, want PCIe 4.0's 25 GB/s", p4090.LoadBytesPerSec)
	}
	p3090, err := ProfileOf(Config{GPU: "rtx3090", Model: "qwen3-14b-fp8"})
	if err != nil {
		t.Fatal(err)
	}
	if p3090.CPUBlocks != 0 {
		t.Errorf("no tier configured, yet %d CPU blocks", p3090.CPUBlocks)
	}
	if !(p4090.PrefillTokensPerSec > 1.5*p3090.PrefillTokensPerSec) {
		t.Errorf("prefill rtx4090 %.0f tok/s vs rtx3090 %.0f: the 4090's FP8 tensor cores should be well ahead",
			p4090.PrefillTokensPerSec, p3090.PrefillTokensPerSec)
	}
}
