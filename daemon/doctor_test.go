package daemon

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/hearth-llm/hearth/installer/doctor"
	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

func TestNodeGPUSource(t *testing.T) {
	ctx := context.Background()
	_, err := nodeGPUSource{discoverer: failedDiscovery{nodes.ErrNoDriver}}.GPUs(ctx)
	if !errors.Is(err, doctor.ErrNoDriver) {
		t.Errorf("no driver: %v, want doctor.ErrNoDriver", err)
	}
	if facts, err := (nodeGPUSource{discoverer: failedDiscovery{nodes.ErrNoGPU}}).GPUs(ctx); err != nil || len(facts.GPUs) != 0 {
		t.Errorf("a driver without GPUs: %+v, %v; want no GPUs and no error", facts, err)
	}
	other := errors.New("nvml: Driver/library version mismatch")
	if _, err := (nodeGPUSource{discoverer: failedDiscovery{other}}).GPUs(ctx); !errors.Is(err, other) || errors.Is(err, doctor.ErrNoDriver) {
		t.Errorf("NVML failure: %v, want it passed on, not as no driver", err)
	}

	src := nodeGPUSource{discoverer: nodes.SimSource{Node: "box", GPUs: []nodes.GPU{busyGPU()}}, engines: thisProcessIsTheEngine}
	facts, err := src.GPUs(ctx)
	if err != nil || len(facts.GPUs) != 1 {
		t.Fatalf("GPUs = %+v, %v", facts, err)
	}
	if g := facts.GPUs[0]; g.HearthBytes != 20<<30 || g.Available() != 22<<30 {
		t.Errorf("hearth holds %d, available %d; want the engine's 20 GiB held by Hearth, 22 GiB available", g.HearthBytes, g.Available())
	}
}

// busyGPU is a 4090 with 2 GiB free: 20 GiB held by this test process
// (standing for an engine) and 2 GiB by a game.
func busyGPU() nodes.GPU {
	gpu := nodes.NewGPU("box", 0)
	gpu.Name, gpu.MemoryTotal, gpu.MemoryUsed, gpu.MemoryFree, gpu.MemoryUsageKnown = "NVIDIA GeForce RTX 4090", 24<<30, 22<<30, 2<<30, true
	gpu.Processes = []nodes.Process{{PID: os.Getpid(), UsedBytes: 20 << 30, Name: "python3"}, {PID: 1, UsedBytes: 2 << 30, Name: "game.exe"}}
	gpu.ProcessesKnown = true
	return gpu
}

func thisProcessIsTheEngine(context.Context) []hruntime.Identity {
	return []hruntime.Identity{{PID: os.Getpid()}}
}

func TestPlanFitter(t *testing.T) {
	g := doctor.GPUMemory{Index: 0, Name: "NVIDIA GeForce RTX 4090", MemoryTotal: 24 << 30, MemoryFree: 24 << 30, MemoryKnown: true}
	cases := []struct {
		name      string
		model     string
		available uint64
		fits      bool
		shorter   bool // a shorter context than on the idle GPU
	}{
		{"default model on a free board", "", 24 << 30, true, false},
		{"others hold some memory", "", 20 << 30, true, true},
		{"others hold most of it", "", 10 << 30, false, false},
		{"a small model named", "qwen3-8b-fp8", 24 << 30, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fit, err := planFitter{model: tc.model}.Fit(g, tc.available)
			if err != nil {
				t.Fatal(err)
			}
			if fit.Fits != tc.fits || (fit.Fits && (fit.Context < fit.IdleContext) != tc.shorter) {
				t.Errorf("%+v: want fits %v, shorter context %v", fit, tc.fits, tc.shorter)
			}
			if !fit.Fits && fit.Reason == "" {
				t.Error("no reason given for a model that does not fit")
			}
		})
	}
	if _, err := (planFitter{model: "no-such-model"}).Fit(g, 24<<30); err == nil {
		t.Error("an unknown model planned without error")
	}
}

func findCheck(t *testing.T, checks []doctor.Check, name string) doctor.Check {
	t.Helper()
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, checks)
	return doctor.Check{}
}

// TestEngineImageForPinnedReleases: hearth doctor weighs the driver
// against the image hearth up --engine vllm|sglang runs: the pinned
// release's (its -cu129 build below CUDA 13), or the --image named.
func TestEngineImageForPinnedReleases(t *testing.T) {
	for _, tc := range []struct {
		kind     hruntime.Kind
		image    string
		cuda     int
		want     string
		wantCUDA int
	}{
		{hruntime.KindVLLM, "", 13000, "vllm/vllm-openai:v0.33.0", 13000},
		{hruntime.KindVLLM, "", 12090, "vllm/vllm-openai:v0.33.0-cu129", 12090},
		{hruntime.KindSGLang, "", 13010, "lmsysorg/sglang:v0.5.23", 13000},
		{hruntime.KindSGLang, "", 12080, "lmsysorg/sglang:v0.5.23-cu129", 12090},
		{hruntime.KindVLLM, "vllm/vllm-openai:v0.20.0-cu129", 13000, "vllm/vllm-openai:v0.20.0-cu129", 12090},
		{hruntime.KindSGLang, "lmsysorg/sglang:v0.5.19", 12090, "lmsysorg/sglang:v0.5.19", 13000},
	} {
		f := EngineImageFor(tc.kind, tc.image)
		if f == nil {
			t.Fatalf("%s: no image", tc.kind)
		}
		if got, need := f(tc.cuda); got != tc.want || need != tc.wantCUDA {
			t.Errorf("%s --image %q on CUDA %d: %s needing %d, want %s needing %d", tc.kind, tc.image, tc.cuda, got, need, tc.want, tc.wantCUDA)
		}
	}
}
