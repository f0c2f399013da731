package sim_test

import (
	"testing"

	"github.com/hearth-llm/hearth/kvevents"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// TestVLLMEventFormatByRelease: the simulated vLLM publishes what the
// release it plays publishes: v0.20.0's events are msgspec array_like
// structs, positional (vllm/distributed/kv_events.py at v0.20.0); map
// events tagged "type" from v0.23.0 on, v0.33.0 included; a version it
// cannot read is taken as a newer one. The simulated SGLang likewise:
// positional at v0.5.19, maps at v0.5.23.
func TestVLLMEventFormatByRelease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		version string
		want    kvevents.Format
	}{
		{"0.20.0", kvevents.FormatArray},
		{"v0.20.0", kvevents.FormatArray},
		{"0.22.1", kvevents.FormatArray},
		{"0.23.0", kvevents.FormatMap},
		{"v0.33.0", kvevents.FormatMap},
		{"0.40.0rc1", kvevents.FormatMap},
		{"nightly", kvevents.FormatMap},
	} {
		if got := sim.VLLMEventFormat(tc.version); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.version, got, tc.want)
		}
	}
	for _, tc := range []struct {
		version string
		want    kvevents.Format
		kind    hruntime.Kind
	}{
		{"0.20.0", kvevents.FormatArray, hruntime.KindVLLM}, {"0.33.0", kvevents.FormatMap, hruntime.KindVLLM},
		{"0.5.19", kvevents.FormatSGLang, hruntime.KindSGLang}, {"v0.5.23", kvevents.FormatSGLangMap, hruntime.KindSGLang},
		{"0.5.30", kvevents.FormatSGLangMap, hruntime.KindSGLang},
	} {
		inst, err := sim.NewInstance(sim.InstanceOptions{
			Engine: sim.Config{GPU: "rtx4090", Model: "qwen3-8b", NumGPUBlocks: 64, MaxModelLen: 1024, Kind: tc.kind},
			Listen: "127.0.0.1:0", KVEvents: "tcp://127.0.0.1:0", Tokenizer: byteTok{},
			EngineVersion: tc.version, Format: kvevents.FormatMapBatch,
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := inst.EventFormat(); got != tc.want {
			t.Errorf("%s instance at %s publishes %v, want %v", tc.kind, tc.version, got, tc.want)
		}
		inst.Close()
	}
}
