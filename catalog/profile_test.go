package catalog

import (
	"github.com/hearth-llm/hearth/tokenizer"

	"errors"
	"testing"
)

// TestCalibrationKVBlocks holds the memory model to the KV cache vLLM
// reports for an RTX 4090 serving Qwen3-14B-FP8 at its default 0.9
// (docs/ARCHITECTURE.md, "Calibration targets").
func TestCalibrationKVBlocks(t *testing.T) {
	e := EngineConfig{GPU: gpu(t, "rtx4090"), Model: model(t, "qwen3-14b-fp8")}.Sized()
	t.Logf("rtx4090 + qwen3-14b-fp8: %d blocks, %d tokens, max_model_len %d", e.NumGPUBlocks, e.NumGPUBlocks*e.BlockSize, e.MaxModelLen)
	if e.NumGPUBlocks < 1800 || e.NumGPUBlocks > 2000 {
		t.Errorf("NumGPUBlocks = %d, want about 1,900 (1,800..2,000)", e.NumGPUBlocks)
	}
	if got := e.Model.KVBytesPerToken(); got != 160<<10 {
		t.Errorf("KV bytes per token = %d, want 160 KiB", got)
	}
}

func TestProfileOf(t *testing.T) {
	p4090, err := ProfileOf(EngineConfig{GPU: gpu(t, "rtx4090"), Model: model(t, "qwen3-14b-fp8"), CPUOffloadGiB: 32})
	if err != nil {
		t.Fatal(err)
	}
	if p4090.GPUBlocks != 1866 || p4090.CPUBlocks != 13107 || p4090.BlockBytes != 16*160*1024 {
		t.Errorf("rtx4090 profile %+v: want 1866 GPU blocks, 13107 CPU blocks of 2.5 MiB", p4090)
	}
	if p4090.LoadBytesPerSec != 25e9 {
		t.Errorf("load bandwidth %v, want PCIe 4.0's 25 GB/s", p4090.LoadBytesPerSec)
	}
	if p4090.BlockSize != tokenizer.DefaultBlockSize || p4090.MaxModelLen != 1866*tokenizer.DefaultBlockSize || p4090.Measured {
		t.Errorf("rtx4090 profile %+v: want blocks of %d, the context the cache holds, not measured", p4090, tokenizer.DefaultBlockSize)
	}
	p3090, err := ProfileOf(EngineConfig{GPU: gpu(t, "rtx3090"), Model: model(t, "qwen3-14b-fp8")})
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

func TestProfileOfSGLangSizesItsPool(t *testing.T) {
	// SGLang's fraction is a share of the free memory holding weights and
	// KV pool, with no activation peak: the same 0.9 leaves it more KV.
	base := EngineConfig{GPU: gpu(t, "rtx4090"), Model: model(t, "qwen3-14b-fp8")}
	sglang := base
	sglang.Share = ShareOfFreeStatic
	v, err := ProfileOf(base)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ProfileOf(sglang)
	if err != nil {
		t.Fatal(err)
	}
	mem := MemoryOf(base.Model, Layout{}, DefaultMaxBatchedTokens)
	if want := mem.KVBlocks(mem.SGLangKVCacheBytes(base.GPU.MemoryBytes, DefaultMemoryFraction), tokenizer.DefaultBlockSize); s.GPUBlocks != want {
		t.Errorf("SGLang pool %d blocks, want %d", s.GPUBlocks, want)
	}
	if s.GPUBlocks <= v.GPUBlocks {
		t.Errorf("SGLang pool %d blocks, vLLM cache %d: want SGLang's larger", s.GPUBlocks, v.GPUBlocks)
	}
}

func TestProfileOfRejects(t *testing.T) {
	tests := []struct {
		name string
		e    EngineConfig
	}{
		{"model larger than the GPU", EngineConfig{GPU: gpu(t, "rtx3080"), Model: model(t, "qwen3-32b-fp8")}},
		{"context beyond the model's", EngineConfig{GPU: gpu(t, "h200"), Model: model(t, "qwen3-8b"), MaxModelLen: 50_000}},
		{"context beyond the cache", EngineConfig{GPU: gpu(t, "rtx4090"), Model: model(t, "qwen3-14b-fp8"), MaxModelLen: 40_000}},
		{"fraction over 1", EngineConfig{GPU: gpu(t, "rtx4090"), Model: model(t, "qwen3-8b"), MemoryFraction: 1.5}},
		{"no room for a prompt", EngineConfig{GPU: gpu(t, "rtx4090"), Model: model(t, "qwen3-8b"), MaxModelLen: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p, err := ProfileOf(tt.e); !errors.Is(err, ErrInvalidEngine) {
				t.Errorf("ProfileOf = %+v, %v; want an ErrInvalidEngine", p, err)
			}
		})
	}
	if _, err := ProfileOf(EngineConfig{GPU: GPUByName("NVIDIA RTX 5000", 32<<30), Model: model(t, "qwen3-8b")}); err == nil {
		t.Error("a board without speed figures got a profile")
	}
}

func TestSizedKeepsWhatIsGiven(t *testing.T) {
	e := EngineConfig{GPU: gpu(t, "rtx4090"), Model: model(t, "qwen3-8b"), BlockSize: 32,
		NumGPUBlocks: 100, MaxModelLen: 1000, CPUOffloadGiB: 1, NumCPUBlocks: 7}.Sized()
	if e.NumGPUBlocks != 100 || e.MaxModelLen != 1000 || e.NumCPUBlocks != 7 || e.BlockSize != 32 {
		t.Errorf("Sized changed given sizes: %+v", e)
	}
	if e.MaxBatchedTokens != DefaultMaxBatchedTokens || e.MemoryFraction != DefaultMemoryFraction {
		t.Errorf("defaults not filled in: %+v", e)
	}
	if unknown := (EngineConfig{}).Sized(); unknown.NumGPUBlocks != 0 || unknown.MaxModelLen != 0 {
		t.Errorf("sizes derived without a GPU and model: %+v", unknown)
	}
}
