package sim

import (
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/catalog"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

func TestModelContextOf(t *testing.T) {
	tests := []struct {
		overrides string
		want      int
		err       string
	}{
		{"", 0, ""},
		{`{}`, 0, ""},
		{`{"rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}}`, 131072, ""},
		// Old configs name the type "type".
		{`{"rope_scaling":{"type":"yarn","factor":2,"original_max_position_embeddings":32768}}`, 65536, ""},
		// Without the original length the factor scales the native context.
		{`{"rope_scaling":{"rope_type":"dynamic","factor":2}}`, 81920, ""},
		{`{"max_position_embeddings":65536}`, 65536, ""},
		{`{"torch_dtype":"bfloat16"}`, 0, ""},
		{`{"rope_scaling":{"rope_type":"yarn","factor":0}}`, 0, "factor must be a positive number"},
		{`{"rope_scaling":{"rope_type":"yarn","factor":4,"original_max_position_embeddings":-1}}`, 0, "original_max_position_embeddings"},
		{`{"max_position_embeddings":"long"}`, 0, "model overrides"},
		{`{"rope_scaling":{"factor":1e300}}`, 0, "factor must be a positive number"},
		{`not json`, 0, "model overrides"},
	}
	for _, tt := range tests {
		got, err := ModelContextOf(tt.overrides, 40960)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %v, want an error with %q", tt.overrides, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: %d, %v; want %d", tt.overrides, got, err, tt.want)
		}
	}
}

func FuzzModelContextOf(f *testing.F) {
	f.Add(`{"rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}}`, 40960)
	f.Add(`{"max_position_embeddings":1e9}`, 1)
	f.Add(`{"rope_scaling":null}`, 0)
	f.Fuzz(func(t *testing.T, overrides string, native int) {
		n, err := ModelContextOf(overrides, native)
		if err == nil && n < 0 {
			t.Errorf("%q: negative context %d", overrides, n)
		}
	})
}

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
