package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/router"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/tokenizer"
)

// kindWithoutKVEvents is an engine kind registered by this test alone: one
// that publishes no KV events, as a third engine might.
const kindWithoutKVEvents hruntime.Kind = "test-noevents"

func init() {
	hruntime.Register(&hruntime.EngineKind{
		Name:         kindWithoutKVEvents,
		Program:      []string{"test-engine"},
		Args:         func(hruntime.Spec, hruntime.Ports) []string { return nil },
		LivenessPath: "/health",
		MeasureProfile: func(_ context.Context, _ *http.Client, _ string, p catalog.Profile) (catalog.Profile, bool) {
			return p, false
		},
		Stats:          func(map[string]*dto.MetricFamily) (hruntime.Stats, bool) { return hruntime.Stats{}, false },
		MemoryFlag:     "--memory-share",
		MemoryFraction: func(e catalog.EnginePlan) float64 { return e.GPUMemoryUtilization },
	})
}

// TestKindWithoutKVEventsIsRoutedOnPredictedCache: an engine of a kind that
// publishes no KV events gets no KV-event endpoints, so the fleet adds it
// to the router in approximate mode, and the router predicts its cache from
// the prompts it routed there.
func TestKindWithoutKVEventsIsRoutedOnPredictedCache(t *testing.T) {
	rt, err := router.New(router.Config{Policy: router.PolicyKV})
	if err != nil {
		t.Fatal(err)
	}
	f := newFleet(rt, slog.New(slog.DiscardHandler))
	ports := hruntime.Ports{Host: "127.0.0.1", HTTP: 8100, KVEvents: 5557, Replay: 5558}
	if ep := ports.Endpoints(hruntime.KindVLLM); ep.KVEvents == "" {
		t.Fatalf("a vLLM engine has no KV-event endpoint: %+v", ep)
	}
	spec := hruntime.Spec{Name: "node/gpu0", Engine: kindWithoutKVEvents, Model: "m"}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	detach, err := f.Attach(ctx, hruntime.ReadyEngine{
		Spec: spec, Runtime: "process", Endpoints: ports.Endpoints(spec.Engine),
		Profile: catalog.Profile{GPUBlocks: 1000, BlockSize: 16},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); detach() }()

	workers := rt.Workers()
	if len(workers) != 1 || !workers[0].Info.Approximate {
		t.Fatalf("workers %+v, want one in approximate mode", workers)
	}
	prompt := []tokenizer.SeqHash{11, 12, 13, 14}
	d, err := rt.Route(ctx, &router.Request{ID: "r1", Hashes: prompt, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	rt.Free("r1")
	var cached [router.MaxWorkers]int
	rt.Index().Match(prompt, kvtier.GPU, &cached)
	if cached[d.WorkerID] != len(prompt) {
		t.Errorf("predicted %d cached blocks for the routed prompt, want %d", cached[d.WorkerID], len(prompt))
	}
}

// TestKindJSONKeepsSim: the engines API names an engine the simulator
// plays from its spec "sim", as before kinds were descriptors.
func TestKindJSONKeepsSim(t *testing.T) {
	for _, tc := range []struct {
		st   hruntime.Status
		want string
	}{
		{hruntime.Status{Engine: hruntime.KindVLLM, Simulated: true}, "sim"},
		{hruntime.Status{Engine: hruntime.KindVLLM}, "vllm"},
		{hruntime.Status{Engine: hruntime.KindSGLang}, "sglang"},
	} {
		if got := kindJSON(tc.st); got != tc.want {
			t.Errorf("kindJSON(%+v) = %q, want %q", tc.st, got, tc.want)
		}
	}
}

// TestEngineWithDifferingTokenizerIsRoutedOnPredictedCache: a vLLM engine
// whose self-check found its tokenization differing from Hearth's is added
// in approximate mode and its KV events are not followed: their token ids
// would index blocks no request finds.
func TestEngineWithDifferingTokenizerIsRoutedOnPredictedCache(t *testing.T) {
	for _, tc := range []struct {
		state           hruntime.TokenizerState
		wantApproximate bool
	}{
		{hruntime.TokenizerAgrees, false},
		{hruntime.TokenizerNotChecked, false},
		{hruntime.TokenizerUnchecked, false},
		{hruntime.TokenizerDiffers, true},
	} {
		rt, err := router.New(router.Config{Policy: router.PolicyKV})
		if err != nil {
			t.Fatal(err)
		}
		f := newFleet(rt, slog.New(slog.DiscardHandler))
		spec := hruntime.Spec{Name: "node/gpu0", Engine: hruntime.KindVLLM, Model: "m"}
		if err := spec.Validate(); err != nil {
			t.Fatal(err)
		}
		ports := hruntime.Ports{Host: "127.0.0.1", HTTP: 8100, KVEvents: 5557, Replay: 5558}
		ctx, cancel := context.WithCancel(context.Background())
		detach, err := f.Attach(ctx, hruntime.ReadyEngine{
			Spec: spec, Runtime: "process", Endpoints: ports.Endpoints(spec.Engine),
			Profile:   catalog.Profile{GPUBlocks: 1000, BlockSize: 16},
			Tokenizer: hruntime.TokenizerCheck{State: tc.state},
		})
		if err != nil {
			t.Fatal(err)
		}
		workers := rt.Workers()
		followed := len(f.ingestStats()) > 0
		cancel()
		detach()
		if len(workers) != 1 || workers[0].Info.Approximate != tc.wantApproximate || followed == tc.wantApproximate {
			t.Errorf("tokenizer %q: workers %+v, events followed %v; want approximate %v", tc.state, workers, followed, tc.wantApproximate)
		}
	}
}
