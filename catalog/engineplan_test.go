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
	free, ok, err := PlanEngineMemory("qwen3-14b-fp8", "", []GPUUse{idle}, 0)
	if err != nil || !ok || free.Note != "" || free.MaxModelLen == 0 || free.KVCacheBytes == 0 {
		t.Fatalf("idle 4090: %+v, %v, %v", free, ok, err)
	}
	busy := idle
	busy.UsedBytes = 2 << 30
	got, ok, err := PlanEngineMemory("qwen3-14b-fp8", "", []GPUUse{busy}, 0)
	if err != nil || !ok || !(got.Engine.GPUMemoryUtilization < free.Engine.GPUMemoryUtilization) || !strings.Contains(got.Note, "other programs hold 2.0 GiB") {
		t.Errorf("busy 4090: %+v, %v, %v; want a smaller share and a note", got, ok, err)
	}
	if _, ok, err := PlanEngineMemory("qwen3-14b-fp8", "", []GPUUse{{}}, 0); ok || err != nil {
		t.Errorf("a GPU of unknown size: planned %v, %v", ok, err)
	}
	if _, _, err := PlanEngineMemory("qwen3-32b-fp8", "", []GPUUse{idle}, 0); err == nil {
		t.Error("32B on one 4090: no error")
	}
	if ModelRepo("qwen3-14b-fp8") != "Qwen/Qwen3-14B-FP8" || ModelRepo("org/unknown") != "org/unknown" {
		t.Errorf("ModelRepo: %q, %q", ModelRepo("qwen3-14b-fp8"), ModelRepo("org/unknown"))
	}
}
