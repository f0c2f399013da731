package daemon

import (
	"testing"

	"github.com/hearth-llm/hearth/catalog"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// TestEstimateProfileSizesAsTheSimulatorDoes: the router's estimate of an
// engine and the simulated engine's own size come from one translation of
// the spec (runtime.EngineConfigOf), so they agree on what the two used to
// read differently: a tensor-parallel engine over an H100 and an RTX 4090
// holds what the 4090 holds (not what the first GPU would), and a YaRN
// override of factor 2 doubles the context (not the model card's 4x).
func TestEstimateProfileSizesAsTheSimulatorDoes(t *testing.T) {
	gpu := func(i int, kind string) hruntime.GPU { return hruntime.GPU{Index: i, Kind: kind} }
	base := hruntime.Spec{Name: "n/gpu0", Engine: hruntime.KindVLLM, Simulated: true, Model: "qwen3-8b"}
	mixed := base
	mixed.GPU, mixed.TensorParallel = gpu(0, "h100"), []hruntime.GPU{gpu(1, "rtx4090")}
	two4090 := base
	two4090.GPU, two4090.TensorParallel = gpu(0, "rtx4090"), []hruntime.GPU{gpu(1, "rtx4090")}
	yarn2 := base
	yarn2.GPU = gpu(0, "h100")
	yarn2.ModelOverrides = `{"rope_scaling":{"rope_type":"yarn","factor":2.0,"original_max_position_embeddings":32768}}`

	profile := func(s hruntime.Spec) catalog.Profile {
		t.Helper()
		p, err := estimateProfile(s)
		if err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
		return p
	}
	if got, want := profile(mixed).GPUBlocks, profile(two4090).GPUBlocks; got != want {
		t.Errorf("h100+rtx4090 estimated at %d blocks, want the 4090 pair's %d", got, want)
	}
	if got := profile(yarn2).MaxModelLen; got != 65536 {
		t.Errorf("YaRN factor 2 gives a context of %d tokens, want 65536", got)
	}
	for _, s := range []hruntime.Spec{mixed, yarn2} {
		simulated, err := catalog.ProfileOf(sim.ConfigOf(s).Perf())
		if err != nil {
			t.Fatal(err)
		}
		if est := profile(s); est.GPUBlocks != simulated.GPUBlocks || est.MaxModelLen != simulated.MaxModelLen {
			t.Errorf("%s: estimated %d blocks, context %d; the simulated engine has %d, %d",
				s.GPUKind(), est.GPUBlocks, est.MaxModelLen, simulated.GPUBlocks, simulated.MaxModelLen)
		}
	}
}
