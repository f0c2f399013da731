package runtime

import (
	"testing"

	"github.com/hearth-llm/hearth/catalog"
)

func TestEngineConfigOf(t *testing.T) {
	gpu := func(i int, kind string) GPU { return GPU{Index: i, Kind: kind} }
	yarn2 := `{"rope_scaling":{"rope_type":"yarn","factor":2.0,"original_max_position_embeddings":32768}}`
	for _, tc := range []struct {
		name      string
		spec      Spec
		wantGPU   string
		wantCtx   int
		wantShare catalog.MemoryShare
	}{
		{"one GPU", Spec{Engine: KindVLLM, Model: "qwen3-8b", GPU: gpu(0, "rtx4090")}, "rtx4090", 40960, catalog.ShareOfTotal},
		{"the weakest of a TP group, not the first",
			Spec{Engine: KindVLLM, Model: "qwen3-8b", GPU: gpu(0, "h100"), TensorParallel: []GPU{gpu(1, "rtx4090")}}, "rtx4090", 40960, catalog.ShareOfTotal},
		{"none weakest on every figure: the first",
			Spec{Engine: KindVLLM, Model: "qwen3-8b", GPU: gpu(0, "rtx3090"), TensorParallel: []GPU{gpu(1, "rtx4080")}}, "rtx3090", 40960, catalog.ShareOfTotal},
		{"an unknown board keeps its name", Spec{Engine: KindVLLM, Model: "qwen3-8b", GPU: gpu(0, "b9000")}, "b9000", 40960, catalog.ShareOfTotal},
		{"YaRN factor 2", Spec{Engine: KindVLLM, Model: "qwen3-8b", GPU: gpu(0, "h100"), ModelOverrides: yarn2}, "h100", 65536, catalog.ShareOfTotal},
		{"an override that leaves the context", Spec{Engine: KindVLLM, Model: "qwen3-8b", GPU: gpu(0, "h100"), ModelOverrides: `{"torch_dtype":"bfloat16"}`}, "h100", 40960, catalog.ShareOfTotal},
		{"the kind's share", Spec{Engine: KindSGLang, Model: "qwen3-8b", GPU: gpu(0, "h100")}, "h100", 40960, catalog.ShareOfFreeStatic},
		{"a test kind's share", Spec{Engine: testKindNoEvents, Model: "qwen3-8b", GPU: gpu(0, "h100")}, "h100", 40960, catalog.ShareOfFreeStatic},
	} {
		e := EngineConfigOf(tc.spec)
		if e.GPU.Kind != tc.wantGPU || e.Model.MaxModelLen != tc.wantCtx || e.Share != tc.wantShare || e.TP != len(tc.spec.GPUs()) {
			t.Errorf("%s: GPU %s, context %d, share %d, TP %d; want %s, %d, %d, %d", tc.name,
				e.GPU.Kind, e.Model.MaxModelLen, e.Share, e.TP, tc.wantGPU, tc.wantCtx, tc.wantShare, len(tc.spec.GPUs()))
		}
	}
}

func TestKVCacheDtypeFlag(t *testing.T) {
	for _, tc := range []struct {
		kind        Kind
		dtype, want string
	}{
		{KindVLLM, "fp8", "fp8"},
		{KindSGLang, "fp8", "fp8_e4m3"}, // SGLang has no bare fp8
		{KindSGLang, "FP8", "fp8_e4m3"},
		{KindSGLang, "auto", "auto"},
		{KindSGLang, "fp8_e5m2", "fp8_e5m2"},
	} {
		if got := tc.kind.Descriptor().KVCacheDtypeFlag(tc.dtype); got != tc.want {
			t.Errorf("%s --kv-cache-dtype for %s = %q, want %q", tc.kind, tc.dtype, got, tc.want)
		}
	}
}
