package daemon

import (
	"slices"
	"testing"

	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// TestPlanEnginesReleaseFromImage: an --image of the engine's own
// repository names the release the engines run, whose KV-event layout the
// router then decodes and which a simulated engine is told to play; no
// --image, or one of another repository, runs the pinned release.
func TestPlanEnginesReleaseFromImage(t *testing.T) {
	t.Parallel()
	gpus := []nodes.GPU{{Index: 0, Kind: "rtx4090", Node: "n", MemoryTotal: 24 << 30}}
	for _, tc := range []struct {
		engine, image string
		version       string
		release       string
		format        string // the layout's name (kvevents.Format.String)
	}{
		{"", "", "", "0.33.0", "map"},
		{"", "vllm/vllm-openai:v0.20.0", "0.20.0", "0.20.0", "array"},
		{"vllm", "vllm/vllm-openai:v0.20.0-cu129", "0.20.0", "0.20.0", "array"},
		{"vllm", "vllm/vllm-openai:v0.33.0", "0.33.0", "0.33.0", "map"},
		{"vllm", "example.org/my-vllm:v0.20.0", "", "0.33.0", "map"},
		{"sglang", "", "", "0.5.23", "sglang-map"},
		{"sglang", "lmsysorg/sglang:v0.5.19", "0.5.19", "0.5.19", "sglang"},
	} {
		cfg := Config{Models: []string{"qwen3-8b"}, EngineRuntime: RuntimeProcess, Engine: tc.engine, Image: tc.image}
		specs, _, err := planEngines(cfg, gpus)
		if err != nil {
			t.Fatalf("%s %q: %v", tc.engine, tc.image, err)
		}
		spec := specs[0]
		rel, known := spec.Release()
		if spec.EngineVersion != tc.version || rel.Version != tc.release || rel.EventFormat.String() != tc.format || !known {
			t.Errorf("%s %q: version %q, release %s %v known %v; want %q, %s %v", tc.engine, tc.image,
				spec.EngineVersion, rel.Version, rel.EventFormat, known, tc.version, tc.release, tc.format)
		}
		if !spec.Simulated {
			continue
		}
		args := hruntime.SimEngineArgs(spec, hruntime.Ports{Host: "127.0.0.1", HTTP: 8000})
		i := slices.Index(args, "--engine-version")
		if tc.version == "" && i >= 0 || tc.version != "" && (i < 0 || args[i+1] != tc.version) {
			t.Errorf("%q: simulated engine's arguments %q, want --engine-version %q", tc.image, args, tc.version)
		}
	}
}
