package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/smi")

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "smi", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkGolden compares v, as indented JSON, with testdata/smi/name.
func checkGolden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "smi", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if string(got) != string(want) {
		t.Errorf("%s differs (go test -run %s -update rewrites it):\n%s", path, t.Name(), got)
	}
}

// procRoot returns a /proc stand-in where each pid's comm holds its name.
func procRoot(t *testing.T, comms map[int]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, name := range comms {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "comm"), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestParseSMIGolden(t *testing.T) {
	for _, name := range []string{"gpus-4090-3090", "gpus-unsupported"} {
		t.Run(name, func(t *testing.T) {
			gpus, host, err := ParseSMIGPUs(readTestdata(t, name+".txt"), "rig")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, name+".golden.json", Inventory{Host: host, GPUs: gpus})
		})
	}
	t.Run("apps", func(t *testing.T) {
		apps, err := ParseSMIApps(readTestdata(t, "apps.txt"))
		if err != nil {
			t.Fatal(err)
		}
		checkGolden(t, "apps.golden.json", apps)
	})
}

func TestParseSMIGPUsFields(t *testing.T) {
	gpus, host, err := ParseSMIGPUs(readTestdata(t, "gpus-4090-3090.txt"), "rig")
	if err != nil {
		t.Fatal(err)
	}
	if host != (Host{Node: "rig", Source: "nvidia-smi", DriverVersion: "580.95.05"}) {
		t.Errorf("host = %+v", host)
	}
	if len(gpus) != 2 {
		t.Fatalf("%d GPUs, want 2", len(gpus))
	}
	g := gpus[0]
	if g.Kind != "rtx4090" || g.MemoryTotal != 24564<<20 || g.MemoryUsed != 21034<<20 || g.MemoryFree != 3068<<20 ||
		!g.MemoryUsageKnown || g.UtilizationPct != 87 || g.TemperatureC != 71 || g.PowerDrawW != 412.35 ||
		g.PowerLimitW != 450 || g.ComputeMajor != 8 || g.ComputeMinor != 9 || g.PCIeWidthMax != 16 || g.ProcessesKnown {
		t.Errorf("gpu 0 = %+v", g)
	}
	if g := gpus[1]; g.Index != 1 || g.Kind != "rtx3090" || g.PCIeGenCurrent != 1 || g.PCIeGenMax != 4 || g.UtilizationPct != 0 {
		t.Errorf("gpu 1 = %+v", g)
	}

	gpus, _, err = ParseSMIGPUs(readTestdata(t, "gpus-unsupported.txt"), "rig")
	if err != nil {
		t.Fatal(err)
	}
	laptop, a10 := gpus[0], gpus[1]
	if laptop.UtilizationPct != -1 || laptop.PowerDrawW != -1 || laptop.PowerLimitW != -1 || laptop.PCIeGenCurrent != -1 ||
		laptop.PCIeWidthMax != -1 || laptop.TemperatureC != 46 || !laptop.MemoryUsageKnown || laptop.Lost {
		t.Errorf("laptop = %+v, want utilization, power and PCIe unknown, the rest read", laptop)
	}
	if a10.MemoryUsageKnown || a10.MemoryTotal != 23028<<20 || a10.ComputeMajor != -1 || a10.ComputeMinor != -1 || a10.PCIeWidthCurrent != 8 {
		t.Errorf("a10 = %+v, want usage and compute capability unknown", a10)
	}
}

func TestParseSMIGPUsLostWords(t *testing.T) {
	line := "2, GPU-x, NVIDIA GeForce RTX 3090, 24576, [GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost], " +
		"[GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost], 8.6, 580.95.05\n"
	gpus, _, err := ParseSMIGPUs([]byte(line), "rig")
	if err != nil {
		t.Fatal(err)
	}
	if g := gpus[0]; !g.Lost || g.Err != "GPU is lost" || g.TemperatureC != -1 || g.MemoryUsageKnown || g.Index != 2 {
		t.Errorf("gpu = %+v, want lost with unknown fields", g)
	}
}

func TestParseSMIRejects(t *testing.T) {
	for name, out := range map[string]string{
		"too few fields": "0, GPU-x, NVIDIA GeForce RTX 4090, 24564\n",
		"bad index":      "zero, GPU-x, n, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 8.9, 580\n",
		"header line":    "index, uuid, name, memory.total [MiB]\n",
		"driver error":   string(readTestdata(t, "no-driver.txt")),
	} {
		if gpus, _, err := ParseSMIGPUs([]byte(out), "rig"); !errors.Is(err, ErrBadSMIOutput) {
			t.Errorf("%s: ParseSMIGPUs = %+v, %v; want ErrBadSMIOutput", name, gpus, err)
		}
	}
	if apps, err := ParseSMIApps([]byte("GPU-x, notapid, 1, x\n")); !errors.Is(err, ErrBadSMIOutput) {
		t.Errorf("ParseSMIApps = %+v, %v; want ErrBadSMIOutput", apps, err)
	}
}

func TestParseSMICUDAVersion(t *testing.T) {
	if v := ParseSMICUDAVersion(readTestdata(t, "header.txt")); v != 13000 {
		t.Errorf("CUDA version = %d, want 13000", v)
	}
	if v := ParseSMICUDAVersion([]byte("CUDA Version: 12.9")); v != 12090 {
		t.Errorf("CUDA version = %d, want 12090", v)
	}
	if v := ParseSMICUDAVersion([]byte("no version here")); v != 0 {
		t.Errorf("CUDA version = %d, want 0", v)
	}
}

// fakeSMI answers SMISource's three command lines from testdata and counts
// the runs of each.
type fakeSMI struct {
	gpus, apps, header string // testdata names; "" fails that run
	runs               map[string]int
}

func (f *fakeSMI) run(_ context.Context, path string, args ...string) ([]byte, error) {
	if f.runs == nil {
		f.runs = map[string]int{}
	}
	which, name := "header", f.header
	if len(args) > 0 && strings.HasPrefix(args[0], "--query-gpu=") {
		which, name = "gpus", f.gpus
	} else if len(args) > 0 && strings.HasPrefix(args[0], "--query-compute-apps=") {
		which, name = "apps", f.apps
	}
	f.runs[which]++
	if name == "" {
		return nil, fmt.Errorf("exit status 2: %s %s failed", path, which)
	}
	return os.ReadFile(filepath.Join("testdata", "smi", name))
}

func TestSMISourceDiscover(t *testing.T) {
	fake := &fakeSMI{gpus: "gpus-4090-3090.txt", apps: "apps.txt", header: "header.txt"}
	root := procRoot(t, map[int]string{77310: "Cyberpunk2077.e"})
	src := &SMISource{Path: "/usr/bin/nvidia-smi", Node: "rig", ProcRoot: root, Run: fake.run}
	for range 2 {
		inv, err := src.Discover(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if inv.Host.CUDADriverVersion != 13000 || inv.Host.DriverVersion != "580.95.05" || inv.Host.Source != "nvidia-smi" {
			t.Errorf("host = %+v", inv.Host)
		}
		want0 := []Process{{PID: 48211, UsedBytes: 20480 << 20, Name: "python3.12"}, {PID: 77310, UsedBytes: 552 << 20, Name: "Cyberpunk2077.e"}}
		if g := inv.GPUs[0]; !g.ProcessesKnown || fmt.Sprint(g.Processes) != fmt.Sprint(want0) {
			t.Errorf("gpu 0 processes = %+v, want %+v", g.Processes, want0)
		}
		want1 := []Process{{PID: 3121, UsedBytes: 6144 << 20, Name: "Game.x86_64"}}
		if g := inv.GPUs[1]; !g.ProcessesKnown || fmt.Sprint(g.Processes) != fmt.Sprint(want1) {
			t.Errorf("gpu 1 processes = %+v, want %+v", g.Processes, want1)
		}
	}
	if fake.runs["gpus"] != 2 || fake.runs["apps"] != 2 || fake.runs["header"] != 1 {
		t.Errorf("runs = %v, want the GPUs and processes read each time, the CUDA version once", fake.runs)
	}
}

func TestSMISourceAppsFailLeaveProcessesUnknown(t *testing.T) {
	fake := &fakeSMI{gpus: "gpus-4090-3090.txt"}
	inv, err := (&SMISource{Node: "rig", Run: fake.run}).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range inv.GPUs {
		if g.ProcessesKnown || g.Processes != nil {
			t.Errorf("gpu %d: processes %+v known=%v, want unknown", g.Index, g.Processes, g.ProcessesKnown)
		}
	}
	if inv.Host.CUDADriverVersion != 0 {
		t.Errorf("CUDA version = %d, want unknown", inv.Host.CUDADriverVersion)
	}
}

// writeScript writes an executable shell script standing in for nvidia-smi.
func writeScript(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSMISourceErrors(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("skipping: no /bin/sh to stand in for nvidia-smi")
	}
	noDriver, err := filepath.Abs(filepath.Join("testdata", "smi", "no-driver.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		path     string
		want     error
		contains string
	}{
		{"not there", filepath.Join(t.TempDir(), "nvidia-smi"), ErrNoDriver, "no such file"},
		{"no driver", writeScript(t, "cat '"+noDriver+"'\nexit 9\n"), ErrNoDriver, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"},
		{"no devices", writeScript(t, "echo 'No devices were found'\nexit 6\n"), ErrNoGPU, ""},
		{"empty list", writeScript(t, "exit 0\n"), ErrNoGPU, ""},
		{"garbled", writeScript(t, "echo 'what is this'\n"), ErrBadSMIOutput, ""},
		{"other failure", writeScript(t, "echo 'Insufficient Permissions' >&2\nexit 4\n"), nil, "Insufficient Permissions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := (&SMISource{Path: tt.path, Node: "rig"}).Discover(context.Background())
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || !strings.Contains(err.Error(), tt.contains) {
				t.Fatalf("Discover = %v, want %v containing %q", err, tt.want, tt.contains)
			}
		})
	}
}

func TestSMISourceRealCommand(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("skipping: no /bin/sh to stand in for nvidia-smi")
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "smi"))
	if err != nil {
		t.Fatal(err)
	}
	script := writeScript(t, `case "$1" in
--query-gpu=*) cat '`+dir+`/gpus-4090-3090.txt' ;;
--query-compute-apps=*) cat '`+dir+`/apps.txt' ;;
*) cat '`+dir+`/header.txt' ;;
esac
`)
	inv, err := (&SMISource{Path: script, Node: "rig"}).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs) != 2 || inv.Host.CUDADriverVersion != 13000 || len(inv.GPUs[0].Processes) != 2 {
		t.Errorf("inventory = %+v", inv)
	}
}

func TestSMIArgsNameDocumentedFields(t *testing.T) {
	want := "--query-gpu=index,uuid,name,memory.total,memory.used,memory.free,utilization.gpu,temperature.gpu," +
		"power.draw,power.limit,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max," +
		"compute_cap,driver_version"
	if SMIGPUArgs[0] != want || SMIGPUArgs[1] != "--format=csv,noheader,nounits" {
		t.Errorf("SMIGPUArgs = %q", SMIGPUArgs)
	}
	if SMIAppArgs[0] != "--query-compute-apps=gpu_uuid,pid,used_memory,process_name" {
		t.Errorf("SMIAppArgs = %q", SMIAppArgs)
	}
}

func FuzzParseSMIGPUs(f *testing.F) {
	for _, name := range []string{"gpus-4090-3090.txt", "gpus-unsupported.txt", "no-driver.txt"} {
		f.Add(readTestdata(f, name))
	}
	f.Add([]byte("0,,,,,,,,,,,,,,,\n"))
	f.Add([]byte("1, u, n, 99999999999999999999, 1, 2, NaN, -5, Inf, -1.5, 4, 4, 16, 16, 8., x\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		gpus, host, err := ParseSMIGPUs(out, "rig")
		if err != nil {
			if gpus != nil {
				t.Fatalf("error %v with %d GPUs", err, len(gpus))
			}
			return
		}
		if lines := strings.Count(string(out), "\n") + 1; len(gpus) > lines {
			t.Fatalf("%d GPUs from %d lines", len(gpus), lines)
		}
		if host.Node != "rig" || host.Source != "nvidia-smi" {
			t.Fatalf("host = %+v", host)
		}
		for _, g := range gpus {
			ints := map[string]int{"index": g.Index, "util": g.UtilizationPct, "temp": g.TemperatureC,
				"gen": g.PCIeGenCurrent, "genmax": g.PCIeGenMax, "width": g.PCIeWidthCurrent, "widthmax": g.PCIeWidthMax,
				"ccmajor": g.ComputeMajor, "ccminor": g.ComputeMinor}
			for name, v := range ints {
				if v < -1 || (name == "index" && v < 0) {
					t.Fatalf("%s = %d: unknown must be -1, known never negative", name, v)
				}
			}
			if (g.ComputeMajor < 0) != (g.ComputeMinor < 0) {
				t.Fatalf("compute capability half known: %d.%d", g.ComputeMajor, g.ComputeMinor)
			}
			for _, w := range []float64{g.PowerDrawW, g.PowerLimitW} {
				if math.IsNaN(w) || math.IsInf(w, 0) || (w < 0 && w != -1) {
					t.Fatalf("power figure %v", w)
				}
			}
			if !g.MemoryUsageKnown && (g.MemoryUsed != 0 || g.MemoryFree != 0) {
				t.Fatalf("usage unknown but used %d free %d", g.MemoryUsed, g.MemoryFree)
			}
			if g.MemoryTotal%(1<<20) != 0 || g.Node != "rig" || g.Kind == "" || g.ProcessesKnown || g.Simulated {
				t.Fatalf("gpu = %+v", g)
			}
			if g.Lost != (g.Err != "") {
				t.Fatalf("lost %v with error %q", g.Lost, g.Err)
			}
		}
	})
}
