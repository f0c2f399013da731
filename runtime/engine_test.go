package runtime

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/kvevents"
)

// testKindNoEvents is a kind registered by the tests alone: an engine that
// publishes no KV events and has no images or file tier.
const testKindNoEvents Kind = "test-noevents"

func init() {
	Register(&EngineKind{
		Name:         testKindNoEvents,
		Program:      []string{"test-engine"},
		Args:         func(spec Spec, p Ports) []string { return []string{"--model", spec.Model} },
		LivenessPath: "/ping",
		MeasureProfile: func(context.Context, *http.Client, string, catalog.Profile) (catalog.Profile, bool) {
			return catalog.Profile{}, false
		},
		Stats:          func(map[string]*dto.MetricFamily) (Stats, bool) { return Stats{}, false },
		MemoryFlag:     "--memory",
		MemoryFraction: func(e catalog.EnginePlan) float64 { return e.GPUMemoryUtilization },
		MemoryShare:    catalog.ShareOfFreeStatic,
	})
}

func TestRegistry(t *testing.T) {
	for _, name := range []string{"vllm", "SGLang", "test-noevents"} {
		k, err := KindOf(name)
		if err != nil || string(k.Name) != strings.ToLower(name) {
			t.Errorf("KindOf(%q) = %v, %v", name, k, err)
		}
	}
	if _, err := KindOf("sim"); err == nil || !strings.Contains(err.Error(), "known: sglang, test-noevents, vllm") {
		t.Errorf(`KindOf("sim"): %v; "simulated" is a runtime, not a kind`, err)
	}
	var names []Kind
	for _, k := range Kinds() {
		names = append(names, k.Name)
	}
	if want := []Kind{KindSGLang, testKindNoEvents, KindVLLM}; !slices.Equal(names, want) {
		t.Errorf("Kinds() = %v, want %v", names, want)
	}
	for _, bad := range []*EngineKind{
		{Name: KindVLLM}, // taken
		{Name: "Upper"},
		{Name: "bare"}, // no functions
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", bad.Name)
				}
			}()
			Register(bad)
		}()
	}
	if err := (Spec{Name: "e", Engine: "llamacpp", Model: "m"}).Validate(); err == nil {
		t.Error("a spec of an unregistered kind validates")
	}
}

// TestEndpointsFollowKVEvents: only a kind that publishes KV events gets
// KV-event addresses, so that a kind without them is routed on predicted
// caches.
func TestEndpointsFollowKVEvents(t *testing.T) {
	p := Ports{Host: "0.0.0.0", HTTP: 8100, KVEvents: 5557, Replay: 5558}
	for _, k := range []Kind{KindVLLM, KindSGLang} {
		ep := p.Endpoints(k)
		if ep.BaseURL != "http://127.0.0.1:8100" || ep.KVEvents != "tcp://127.0.0.1:5557" || ep.KVReplay != "tcp://127.0.0.1:5558" || ep.Topic != KVEventsTopic {
			t.Errorf("%s: %+v", k, ep)
		}
	}
	if ep := p.Endpoints(testKindNoEvents); ep != (Endpoints{BaseURL: "http://127.0.0.1:8100"}) {
		t.Errorf("kind without KV events: %+v", ep)
	}
	spec := Spec{Name: "e", Engine: testKindNoEvents, Model: "m", Simulated: false}
	if got := strings.Join(EngineArgs(spec, p, ""), " "); got != "test-engine --model m" {
		t.Errorf("command line %q", got)
	}
}

// TestImages: the newest image the driver runs, else the one for most
// drivers; a kind without images has none.
func TestImages(t *testing.T) {
	vllm := KindVLLM.Descriptor()
	for cuda, want := range map[int]string{
		0: "vllm/vllm-openai:v0.33.0-cu129", 12080: "vllm/vllm-openai:v0.33.0-cu129",
		12090: "vllm/vllm-openai:v0.33.0-cu129", 13000: "vllm/vllm-openai:v0.33.0", 13010: "vllm/vllm-openai:v0.33.0",
	} {
		if got, ok := vllm.Image(cuda); !ok || got != want {
			t.Errorf("Image(%d) = %q, want %q", cuda, got, want)
		}
	}
	sglang := KindSGLang.Descriptor()
	for cuda, want := range map[int]string{0: "lmsysorg/sglang:v0.5.23-cu129", 13000: "lmsysorg/sglang:v0.5.23"} {
		if got, ok := sglang.Image(cuda); !ok || got != want {
			t.Errorf("sglang Image(%d) = %q, want %q", cuda, got, want)
		}
	}
	if _, ok := testKindNoEvents.Descriptor().Image(13000); ok {
		t.Error("a kind without images has one")
	}
}

// TestReleaseFor: a version gets the facts of the newest listed release
// not newer than it; a newer or unreadable one the pinned release's, and
// known false, so that the caller logs it.
func TestReleaseFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind    Kind
		version string
		release string
		format  kvevents.Format
		known   bool
	}{
		{KindVLLM, "", "0.33.0", kvevents.FormatMap, true},
		{KindVLLM, "0.33.0", "0.33.0", kvevents.FormatMap, true},
		{KindVLLM, "v0.20.0", "0.20.0", kvevents.FormatArray, true},
		{KindVLLM, "0.22.1", "0.20.0", kvevents.FormatArray, true},
		{KindVLLM, "0.23.0", "0.23.0", kvevents.FormatMap, true},
		{KindVLLM, "0.28.2", "0.23.0", kvevents.FormatMap, true},
		{KindVLLM, "0.18.0", "0.20.0", kvevents.FormatArray, true},
		{KindVLLM, "0.34.0", "0.33.0", kvevents.FormatMap, false},
		{KindVLLM, "1.0.0rc1", "0.33.0", kvevents.FormatMap, false},
		{KindVLLM, "nightly", "0.33.0", kvevents.FormatMap, false},
		{KindSGLang, "", "0.5.23", kvevents.FormatSGLangMap, true},
		{KindSGLang, "0.5.19", "0.5.19", kvevents.FormatSGLang, true},
		{KindSGLang, "0.5.21", "0.5.19", kvevents.FormatSGLang, true},
		{KindSGLang, "v0.5.23.post1", "0.5.23", kvevents.FormatSGLangMap, true},
		{KindSGLang, "0.6.0", "0.5.23", kvevents.FormatSGLangMap, false},
	} {
		rel, known := tc.kind.Descriptor().ReleaseFor(tc.version)
		if rel.Version != tc.release || rel.EventFormat != tc.format || known != tc.known {
			t.Errorf("%s ReleaseFor(%q) = %s %v known %v; want %s %v known %v",
				tc.kind, tc.version, rel.Version, rel.EventFormat, known, tc.release, tc.format, tc.known)
		}
	}
}

// TestImageVersion: the release is read from the tag of the kind's own
// repository (a registry mirror included); another repository's tag, a
// digest or "latest" names none.
func TestImageVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind  Kind
		image string
		want  string
	}{
		{KindVLLM, "vllm/vllm-openai:v0.20.0", "0.20.0"},
		{KindVLLM, "vllm/vllm-openai:v0.20.0-cu129", "0.20.0"},
		{KindVLLM, "docker.io/vllm/vllm-openai:v0.33.0", "0.33.0"},
		{KindVLLM, "registry.lan:5000/vllm/vllm-openai:v0.22.1", "0.22.1"},
		{KindVLLM, "vllm/vllm-openai:latest", ""},
		{KindVLLM, "vllm/vllm-openai", ""},
		{KindVLLM, "vllm/vllm-openai@sha256:0123", ""},
		{KindVLLM, "hearth/sim-vllm:0.4.0", ""},
		{KindVLLM, "lmsysorg/sglang:v0.5.19", ""},
		{KindSGLang, "lmsysorg/sglang:v0.5.19-cu129", "0.5.19"},
		{KindSGLang, "lmsysorg/sglang:v0.5.23", "0.5.23"},
		{KindSGLang, "registry.lan:5000/lmsysorg/sglang", ""},
	} {
		if got := tc.kind.Descriptor().ImageVersion(tc.image); got != tc.want {
			t.Errorf("%s ImageVersion(%q) = %q, want %q", tc.kind, tc.image, got, tc.want)
		}
	}
}

// TestMemoryFraction: each kind passes the plan's figure in its own flag's
// meaning.
func TestMemoryFraction(t *testing.T) {
	e := catalog.EnginePlan{GPUMemoryUtilization: 0.9, MemFractionStatic: 0.862}
	for k, want := range map[Kind]float64{KindVLLM: 0.9, KindSGLang: 0.862} {
		d := k.Descriptor()
		if got := d.MemoryFraction(e); got != want {
			t.Errorf("%s: MemoryFraction = %v, want %v", k, got, want)
		}
		spec := Spec{Name: "e", Engine: k, Model: "m", GPUMemoryUtilization: d.MemoryFraction(e)}
		if args := d.Args(spec, testPorts); !slices.Contains(args, d.MemoryFlag) {
			t.Errorf("%s: %s not in %q", k, d.MemoryFlag, args)
		}
	}
}
