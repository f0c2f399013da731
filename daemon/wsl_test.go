//go:build linux && cgo

package daemon

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/installer/doctor"
	"github.com/hearth-llm/hearth/installer/wsl"
	"github.com/hearth-llm/hearth/installer/wsl/wsltest"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/nodes/nvmltest"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

func noEngines(context.Context) []hruntime.Identity { return nil }

type noSelfChecks struct{}

func (noSelfChecks) EngineTokenizers(context.Context) ([]doctor.EngineTokenizer, error) {
	return nil, nil
}

func (noSelfChecks) EngineKVEvents(context.Context) ([]doctor.EngineKVEvents, error) {
	return nil, nil
}

// TestDoctorInAFakeWSL2Root: hearth doctor's checks on a gaming rig under
// WSL2's default NAT. Discovery opens the Windows driver's NVML under
// /usr/lib/wsl/lib (here a stand-in read through nvmltest), the doctor
// says it is WSL2, and the networking check fails with the commands to run
// on Windows.
func TestDoctorInAFakeWSL2Root(t *testing.T) {
	t.Parallel()
	root := wsltest.Root{MemTotalGiB: 32}.Build(t)
	facts := wsl.Detect(context.Background(), root)

	cfg := discoverConfig("rig", "", facts)
	if want := filepath.Join(root, "/usr/lib/wsl/lib/libnvidia-ml.so.1"); cfg.NVMLPath != want {
		t.Fatalf("discovery opens NVML at %q, want %q", cfg.NVMLPath, want)
	}
	if want := filepath.Join(root, "/usr/lib/wsl/lib/nvidia-smi"); cfg.SMIPath != want {
		t.Errorf("discovery falls back to nvidia-smi at %q, want %q", cfg.SMIPath, want)
	}
	if sim := discoverConfig("rig", "2x4090", facts); sim.NVMLPath != "" {
		t.Errorf("simulated GPUs open NVML at %q", sim.NVMLPath)
	}
	idle := nvmltest.RTX4090()
	idle.MemUsed, idle.ComputeProcs = 1<<30, nil
	gpus := nodes.NewNVMLSource(nvmltest.Machine(nvmltest.Fixed(idle)), "rig", "") // the library at cfg.NVMLPath
	defer gpus.Close()

	dir := t.TempDir()
	doc, closeDocker := NewDoctor(DoctorConfig{
		GPUs: gpus, Engines: noEngines, Model: "Qwen/Qwen3-14B-FP8", HFCache: filepath.Join(dir, "hf"),
		DataDir: DataDir(filepath.Join(dir, "data")), Addr: "127.0.0.1:8000", Serving: true,
		SelfChecks: noSelfChecks{}, WSL: &facts,
	})
	defer closeDocker()
	doc.Docker = nil // the host's Docker Engine is not the rig's
	checks := doc.Check(context.Background())
	got := map[string]doctor.Check{}
	for _, c := range checks {
		got[c.Name] = c
	}
	want := []struct {
		name     string
		status   doctor.Status
		evidence string
		fix      []string
	}{
		{doctor.CheckWSL, doctor.Pass, "WSL2 (6.6.87.2-microsoft-standard-WSL2): NVML is the Windows driver's, in /usr/lib/wsl/lib", nil},
		{doctor.CheckNVML, doctor.Pass, "NVML loaded (nvml)", nil},
		{doctor.CheckWSLNetwork, doctor.Fail, "NAT networking", []string{
			"networkingMode=mirrored", "wsl --shutdown",
			"New-NetFirewallHyperVRule -Name Hearth -DisplayName Hearth -Direction Inbound -VMCreatorId '{40E0AC32-46A5-438A-A0B2-2B479E8F2E90}' -Protocol TCP -LocalPorts 8000,7443,7422",
			"netsh interface portproxy add v4tov4 listenport=7443 listenaddress=0.0.0.0 connectport=7443",
		}},
		{doctor.CheckWSLPinned, doctor.Pass, "16.0 GiB", nil},
		{doctor.CheckMulticast, doctor.Warn, "NAT", []string{"--peer"}},
	}
	for _, w := range want {
		c, ok := got[w.name]
		if !ok {
			t.Errorf("no %q check in %+v", w.name, checks)
			continue
		}
		if c.Status != w.status || !strings.Contains(c.Evidence, w.evidence) {
			t.Errorf("%s: %+v, want %s with %q", w.name, c, w.status, w.evidence)
		}
		for _, f := range w.fix {
			if !strings.Contains(c.Fix, f) {
				t.Errorf("%s: fix %q lacks %q", w.name, c.Fix, f)
			}
		}
	}
	if code := doctor.ExitCode(checks); code != 1 {
		t.Errorf("exit code %d, want 1 (a check failed)", code)
	}
}
