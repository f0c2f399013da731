//go:build linux

package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/installer/doctor"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/process"
)

// kindToy is an engine kind that exists only in this test file, written as
// a new kind is written in its own engine_<kind>.go: its program (this test
// binary playing hearth's simulated engine, which speaks vLLM's HTTP API),
// its arguments, memory flag and rule, dtype spelling and image. Nothing
// else in Hearth names it: the process runtime launches it, the sizing
// (runtime.EngineConfigOf) sizes it by its own rule, and hearth doctor
// checks its image, each through the registry alone.
const kindToy hruntime.Kind = "toyllm"

const toyImage = "hearth-test/toyllm:v1"

func init() {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	vllm := hruntime.KindVLLM.Descriptor()
	toy := &hruntime.EngineKind{
		Name:    kindToy,
		Program: []string{exe, "sim-engine"},
		// This binary is hearth only with asHearthEnv set.
		Env:            func(hruntime.Spec) []string { return []string{asHearthEnv + "=1"} },
		LivenessPath:   "/health",
		MeasureProfile: vllm.MeasureProfile,
		Stats:          vllm.Stats,
		Images:         []hruntime.Image{{Ref: toyImage, MinCUDA: 12090}},
		ImageHTTPPort:  8000,
		MemoryFlag:     "--gpu-memory-utilization",
		MemoryFraction: func(e catalog.EnginePlan) float64 { return e.GPUMemoryUtilization },
		MemoryShare:    catalog.ShareOfTotal,
		// The simulated engine takes fp8_e5m2 but, as this kind is told,
		// not the catalog's bare "fp8".
		KVCacheDtypeNames: map[string]string{catalog.KVCacheFP8: "fp8_e5m2"},
	}
	toy.Args = func(spec hruntime.Spec, p hruntime.Ports) []string {
		args := []string{"--listen", net.JoinHostPort(p.Host, strconv.Itoa(p.HTTP)),
			"--model", spec.Model, "--gpu", spec.GPUKind()}
		if spec.GPUMemoryUtilization > 0 {
			args = append(args, toy.MemoryFlag, strconv.FormatFloat(spec.GPUMemoryUtilization, 'g', -1, 64))
		}
		if spec.KVCacheDtype != "" {
			args = append(args, "--kv-cache-dtype", toy.KVCacheDtypeFlag(spec.KVCacheDtype))
		}
		return args
	}
	hruntime.Register(toy)
}

// TestNewEngineKindNeedsNoOtherEdit launches, sizes and checks the kind
// registered above.
func TestNewEngineKindNeedsNoOtherEdit(t *testing.T) {
	t.Parallel()
	spec := hruntime.Spec{
		Name: "toy/gpu0", Engine: kindToy, Model: "qwen3-8b",
		GPU:                  hruntime.GPU{Index: 0, Kind: "rtx4090"},
		GPUMemoryUtilization: 0.8, KVCacheDtype: catalog.KVCacheFP8,
	}
	estimate, err := catalog.ProfileOf(hruntime.EngineConfigOf(spec))
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := (&process.Launcher{}).Launch(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	if err := h.Ready(ctx); err != nil {
		t.Fatalf("ready: %v\n%s", err, strings.Join(h.Logs(), "\n"))
	}
	if ep := h.Endpoints(); ep.KVEvents != "" {
		t.Errorf("endpoints %+v: the kind publishes no KV events, yet has their address", ep)
	}
	measured := hruntime.MeasureProfile(ctx, http.DefaultClient, h.Endpoints().BaseURL, kindToy, catalog.Profile{})
	if !measured.Measured || measured.GPUBlocks != estimate.GPUBlocks {
		t.Errorf("the engine holds %d blocks (measured %v), the sizing says %d", measured.GPUBlocks, measured.Measured, estimate.GPUBlocks)
	}

	// --deep looks for the engine image: the kind's own, which no one
	// has pulled.
	out, stderr, err := runHearth(t, "", doctorArgs(t, "--json", "--deep", "--sim", "1x4090", "--engine", string(kindToy))...)
	if exitCode(err) == 2 {
		t.Fatalf("hearth doctor --engine %s: %v\n%s", kindToy, err, stderr)
	}
	deep := findCheck(t, decodeDoctorJSON(t, out), doctor.CheckDeepGPU)
	if _, ok := dockerAnswers(t); ok && !strings.Contains(deep.Evidence, toyImage) {
		t.Errorf("deep check %+v does not look for the kind's image %s", deep, toyImage)
	}
}

// TestDoctorEngineNamesTheKinds: an engine doctor does not know is a usage
// error that lists the registered kinds, the test's own among them.
func TestDoctorEngineNamesTheKinds(t *testing.T) {
	_, _, err := runHearth(t, "", doctorArgs(t, "--engine", "tgi")...)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), hruntime.KindNames()) || !strings.Contains(err.Error(), string(kindToy)) {
		t.Errorf("hearth doctor --engine tgi: %v; want a usage error listing %s", err, hruntime.KindNames())
	}
}
