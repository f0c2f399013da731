package sim

import (
	"testing"

	"github.com/hearth-llm/hearth/catalog"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// TestTensorParallelAndFP8Engine: the simulated engine sizes and times a
// layout as the catalog's model does, and refuses what the real engines
// refuse.
func TestTensorParallelAndFP8Engine(t *testing.T) {
	base := Config{GPU: "rtx4090", Model: "qwen3-14b-fp8"}
	tokens := func(c Config) int {
		t.Helper()
		core, err := NewCore(c, nil)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		got := core.Config()
		return got.NumGPUBlocks * got.BlockSize
	}
	one, two := tokens(base), base
	two.TP = 2
	if got := tokens(two); got != 159536 || one != 29856 {
		t.Errorf("KV tokens: one GPU %d, TP 2 %d; want 29,856 and 159,536 (hearth plan's)", one, got)
	}
	fp8 := two
	fp8.KVCacheDtype = "fp8"
	if got := tokens(fp8); got < 2*159536-16 {
		t.Errorf("TP 2 with FP8 KV: %d tokens, want twice TP 2's", got)
	}
	long := fp8
	long.ModelOverrides = catalog.Model{RopeScaledMaxModelLen: 131072, RopeOriginalMaxLen: 32768}.RopeScalingJSON()
	core, err := NewCore(long, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := core.Config().MaxModelLen; got != 131072 {
		t.Errorf("YaRN context %d, want 131,072", got)
	}
	// One decode step of TP 2 is faster than on one GPU.
	var l catalog.StepLoad
	l.Add(1000, 1)
	r1, r2 := base.Perf().Roofline(), two.Perf().Roofline()
	if r2.StepDuration(&l) >= r1.StepDuration(&l) {
		t.Errorf("TP 2 decode step %v, one GPU %v", r2.StepDuration(&l), r1.StepDuration(&l))
	}

	for _, bad := range []Config{
		{GPU: "rtx4090", Model: "qwen3-14b-fp8", TP: 3},                                          // 40 heads
		{GPU: "rtx4090", Model: "qwen3-14b-fp8", TP: -1},                                         // no such size
		{GPU: "rtx4090", Model: "qwen3-14b-fp8", KVCacheDtype: "bf16"},                           // not vLLM's
		{GPU: "rtx4090", Model: "qwen3-14b-fp8", KVCacheDtype: "fp8", Kind: hruntime.KindSGLang}, // not SGLang's
		{GPU: "rtx4090", Model: "qwen3-14b-fp8", KVCacheDtype: "nvfp4"},                          // not modelled
		{GPU: "rtx4090", Model: "qwen3-14b-fp8", ModelOverrides: "{"},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	ok := Config{GPU: "rtx4090", Model: "qwen3-14b-fp8", KVCacheDtype: "fp8_e4m3", Kind: hruntime.KindSGLang}
	if err := ok.Validate(); err != nil {
		t.Errorf("SGLang fp8_e4m3: %v", err)
	}
}
