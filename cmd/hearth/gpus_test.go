package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/nodes"
)

func TestGPUsSim(t *testing.T) {
	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"sim-4090-3090.txt", []string{"--sim", "1x4090+1x3090", "--node", "desk"}},
		{"sim-4090-3090.json", []string{"--sim", "1x4090+1x3090", "--node", "desk", "--json"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			out, errOut, err := runHearth(t, "", append([]string{"gpus"}, tt.args...)...)
			if err != nil {
				t.Fatalf("gpus %v: %v\n%s", tt.args, err, errOut)
			}
			checkGolden(t, filepath.Join("testdata", "gpus", tt.golden), out)
		})
	}
}

// rigInventory is what a 4090 + 3090 box reports, with one board that
// reports little and one that is lost.
func rigInventory() nodes.Inventory {
	g0 := nodes.NewGPU("rig", 0)
	g0.UUID, g0.Name, g0.Kind = "GPU-5f2a", "NVIDIA GeForce RTX 4090", "rtx4090"
	g0.MemoryTotal, g0.MemoryUsed, g0.MemoryFree, g0.MemoryUsageKnown = 24<<30, 20<<30, 4<<30, true
	g0.UtilizationPct, g0.TemperatureC, g0.PowerDrawW, g0.PowerLimitW = 87, 71, 412.35, 450
	g0.PCIeGenCurrent, g0.PCIeGenMax, g0.PCIeWidthCurrent, g0.PCIeWidthMax = 4, 4, 16, 16
	g0.ComputeMajor, g0.ComputeMinor = 8, 9
	g0.Processes = []nodes.Process{{PID: 4242, UsedBytes: 19 << 30, Name: "vllm"}, {PID: 777, UsedBytes: 1 << 30}}
	g0.ProcessesKnown = true

	g1 := nodes.NewGPU("rig", 1)
	g1.UUID, g1.Name, g1.Kind = "GPU-a1b2", "NVIDIA GeForce RTX 3090", "rtx3090"
	g1.MemoryTotal, g1.TemperatureC, g1.PCIeGenCurrent, g1.PCIeGenMax = 24<<30, 38, 1, 4
	g1.ProcessesKnown = true

	g2 := nodes.NewGPU("rig", 2)
	g2.Lost, g2.Err = true, "GPU is lost"
	return nodes.Inventory{
		Host: nodes.Host{Node: "rig", Source: "nvml", DriverVersion: "580.95.05", CUDADriverVersion: 12090},
		GPUs: []nodes.GPU{g0, g1, g2},
	}
}

func TestGPUsText(t *testing.T) {
	var out bytes.Buffer
	if err := nodes.WriteText(&out, rigInventory()); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, filepath.Join("testdata", "gpus", "rig.txt"), out.String())
}

// TestGPUsJSONSchema checks the keys of each GPU: what is known is there,
// what is not is left out rather than written as 0.
func TestGPUsJSONSchema(t *testing.T) {
	b, err := json.Marshal(nodes.ReportOf(rigInventory()))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Host map[string]any   `json:"host"`
		GPUs []map[string]any `json:"gpus"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	wantHost := map[string]any{"node": "rig", "source": "nvml", "driver_version": "580.95.05", "cuda_driver_version": "12.9"}
	if !reflect.DeepEqual(doc.Host, wantHost) {
		t.Errorf("host = %v, want %v", doc.Host, wantHost)
	}
	keysOf := func(m map[string]any) []string {
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return keys
	}
	wantKeys := [][]string{
		{"compute_capability", "index", "kind", "lost", "memory_free_bytes", "memory_total_bytes", "memory_used_bytes",
			"name", "pcie_gen_current", "pcie_gen_max", "pcie_width_current", "pcie_width_max", "power_draw_w",
			"power_limit_w", "processes", "simulated", "temperature_c", "utilization_pct", "uuid"},
		{"index", "kind", "lost", "memory_total_bytes", "name", "pcie_gen_current", "pcie_gen_max", "processes",
			"simulated", "temperature_c", "uuid"},
		{"error", "index", "kind", "lost", "simulated"},
	}
	for i, g := range doc.GPUs {
		if got := keysOf(g); !slices.Equal(got, wantKeys[i]) {
			t.Errorf("gpu %d keys = %v, want %v", i, got, wantKeys[i])
		}
	}
	if p := doc.GPUs[1]["processes"]; !reflect.DeepEqual(p, []any{}) {
		t.Errorf("gpu 1 processes = %#v, want [] (known, none)", p)
	}
	procs := doc.GPUs[0]["processes"].([]any)
	if first := procs[0].(map[string]any); first["name"] != "vllm" || first["pid"] != float64(4242) {
		t.Errorf("process = %v", first)
	}
	if second := procs[1].(map[string]any); second["name"] != nil {
		t.Errorf("unnamed process = %v, want no name key", second)
	}
	if doc.GPUs[2]["lost"] != true || doc.GPUs[2]["error"] != "GPU is lost" {
		t.Errorf("lost gpu = %v", doc.GPUs[2])
	}
}

func TestGPUsNoDriverInProcess(t *testing.T) {
	var out, errOut bytes.Buffer
	env := &environment{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
	cfg, err := parseGPUsFlags(env, []string{"--json"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg.discover.SMIPath = filepath.Join(dir, "nvidia-smi")
	cfg.discover.NVMLPath = filepath.Join(dir, "libnvidia-ml.so.1")
	err = listGPUs(context.Background(), env, cfg)
	if !errors.Is(err, nodes.ErrNoDriver) || err.Error() != nodes.ErrNoDriver.Error() {
		t.Fatalf("gpus = %v, want exactly %q", err, nodes.ErrNoDriver)
	}
	if out.Len() != 0 {
		t.Errorf("printed %q before failing", out.String())
	}
	if exitCode(err) == 0 {
		t.Error("exit code 0")
	}
}

// TestGPUsNoDriverBinary runs this test binary as hearth on a machine
// without a driver, the way a user meets it.
func TestGPUsNoDriverBinary(t *testing.T) {
	if path, err := exec.LookPath("nvidia-smi"); err == nil {
		t.Skipf("skipping: this machine has %s, so hearth gpus finds a driver", path)
	}
	if _, err := os.Stat("/proc/driver/nvidia"); err == nil {
		t.Skip("skipping: this machine has the NVIDIA kernel driver loaded")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("skipping: no path to this test binary: %v", err)
	}
	cmd := exec.Command(exe, "gpus")
	cmd.Env = append(os.Environ(), asHearthEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("hearth gpus = %v, want exit status 1\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if want := "hearth: " + nodes.ErrNoDriver.Error() + "\n"; stderr.String() != want || stdout.Len() != 0 {
		t.Errorf("stderr %q, stdout %q; want stderr %q and nothing on stdout", stderr.String(), stdout.String(), want)
	}
}

func TestGPUsHelpDocumentsTheSchema(t *testing.T) {
	_, errOut, err := runHearth(t, "", "gpus", "--help")
	if err == nil {
		t.Fatal("gpus --help returned no error, want flag.ErrHelp")
	}
	keys := []string{"--json", "--sim", "--node"}
	for _, v := range []any{nodes.Report{}, nodes.ReportHost{}, nodes.ReportGPU{}, nodes.ReportProcess{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			keys = append(keys, `"`+name+`"`)
		}
	}
	for _, key := range keys {
		if !strings.Contains(errOut, key) {
			t.Errorf("help lacks %s", key)
		}
	}
}
