package catalog

import (
	"strings"
	"testing"
)

// TestPlanEngineMemory: an idle 4090 gets its plan without a note; one
// where other programs hold 2 GiB gets a smaller share and a note saying
// what it cost; a GPU of unknown size plans nothing; a model too large is
// the plan's sentence.
func TestPlanEngineMemory(t *testing.T) {
	idle := GPUUseOf("4090", "NVIDIA GeForce RTX 4090", 0, 0)
	if idle.GPU.MemoryBytes == 0 {
		t.Fatalf("GPUUseOf(4090) has no size: %+v", idle)
	}
	free, ok, err := PlanEngineMemory("qwen3-14b-fp8", "", []GPUUse{idle}, 0, Layout{})
	if err != nil || !ok || free.Note != "" || free.MaxModelLen == 0 || free.KVCacheBytes == 0 {
		t.Fatalf("idle 4090: %+v, %v, %v", free, ok, err)
	}
	busy := idle
	busy.UsedBytes = 2 << 30
	got, ok, err := PlanEngineMemory("qwen3-14b-fp8", "", []GPUUse{busy}, 0, Layout{})
	if err != nil || !ok || !(got.Engine.GPUMemoryUtilization < free.Engine.GPUMemoryUtilization) || !strings.Contains(got.Note, "other programs hold 2.0 GiB") {
		t.Errorf("busy 4090: %+v, %v, %v; want a smaller share and a note", got, ok, err)
	}
	if _, ok, err := PlanEngineMemory("qwen3-14b-fp8", "", []GPUUse{{}}, 0, Layout{}); ok || err != nil {
		t.Errorf("a GPU of unknown size: planned %v, %v", ok, err)
	}
	if _, _, err := PlanEngineMemory("qwen3-32b-fp8", "", []GPUUse{idle}, 0, Layout{}); err == nil {
		t.Error("32B on one 4090: no error")
	}
	if ModelRepo("qwen3-14b-fp8") != "Qwen/Qwen3-14B-FP8" || ModelRepo("org/unknown") != "org/unknown" {
		t.Errorf("ModelRepo: %q, %q", ModelRepo("qwen3-14b-fp8"), ModelRepo("org/unknown"))
	}
}

// TestPlanEngineMemoryLayout: the layout's KV dtype and rope scaling reach
// the plan of a real engine.
func TestPlanEngineMemoryLayout(t *testing.T) {
	idle := GPUUseOf("4090", "NVIDIA GeForce RTX 4090", 0, 0)
	two := []GPUUse{idle, idle}
	plain, _, err := PlanEngineMemory("qwen3-14b-fp8", "", two, 0, Layout{})
	if err != nil || plain.MaxModelLen != 40960 {
		t.Fatalf("tp2: %+v, %v", plain, err)
	}
	long, _, err := PlanEngineMemory("qwen3-14b-fp8", "", two, 0, Layout{KVCacheDtype: KVCacheFP8, RopeScaling: true})
	if err != nil || long.MaxModelLen != 131072 || long.KVCacheBytes != plain.KVCacheBytes {
		t.Errorf("tp2 fp8 yarn: context %d (want 131,072), KV cache %v bytes (want tp2's %v), %v", long.MaxModelLen, long.KVCacheBytes, plain.KVCacheBytes, err)
	}
	if long.Engine.KVTokens < 2*plain.Engine.KVTokens-16 {
		t.Errorf("fp8 KV holds %d tokens, bf16 %d", long.Engine.KVTokens, plain.Engine.KVTokens)
	}
	if _, _, err := PlanEngineMemory("qwen3-coder-30b-a3b-fp8", "", two, 0, Layout{RopeScaling: true}); err == nil {
		t.Error("rope scaling for a model without a scaled context: no error")
	}
}

func TestContextShortfall(t *testing.T) {
	tests := []struct {
		ctx  int
		want string
	}{
		{29856, "the planned context of 29,856 tokens leaves Claude Code under 12,288 tokens after its 19.8k-token first prompt"},
		{16384, "shorter than the first prompt of Claude Code's (19.8k tokens)"},
		{7000, "Claude Code's (19.8k tokens), Codex's (8.6k tokens), OpenCode's (7.2k tokens)"},
		{40960, ""},
	}
	for _, tt := range tests {
		got := ContextShortfall(tt.ctx)
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("%d: %q, want %q", tt.ctx, got, tt.want)
		}
	}
}
