package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/console"
	"github.com/hearth-llm/hearth/installer/doctor"
	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// nowClock is a clock whose time the test sets; only Now is used.
type nowClock struct {
	clock.Real
	now time.Time
}

func (c *nowClock) Now() time.Time { return c.now }

// countingGPUs is a GPUSource that counts how often the checks ran.
type countingGPUs struct{ runs int }

func (c *countingGPUs) GPUs(context.Context) (doctor.GPUFacts, error) {
	c.runs++
	return doctor.GPUFacts{}, doctor.ErrNoDriver
}

func TestHealthSourceCachesForThirtySeconds(t *testing.T) {
	gpus := &countingGPUs{}
	dir := t.TempDir()
	clk := &nowClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	src := &healthSource{clock: clk, doctor: &doctor.Doctor{
		GPUs: gpus, HFCacheDir: dir, KVDir: dir, DataDir: dir, Addr: "127.0.0.1:0",
	}}
	ctx := context.Background()
	first, err := src.Checks(ctx)
	if err != nil || len(first) == 0 {
		t.Fatalf("Checks = %v, %v", first, err)
	}
	if first[0].Name != doctor.CheckDriver || first[0].Status != "fail" || first[0].Fix == "" {
		t.Errorf("first check %+v, want the failed driver check with its fix", first[0])
	}
	first[0].Status = "scribbled" // the caller's copy, not the cache
	clk.now = clk.now.Add(29 * time.Second)
	again, _ := src.Checks(ctx)
	if gpus.runs != 1 || again[0].Status != "fail" {
		t.Errorf("after 29 s: %d runs, status %q; want the cached run, unchanged", gpus.runs, again[0].Status)
	}
	clk.now = clk.now.Add(time.Second)
	if _, err := src.Checks(ctx); err != nil || gpus.runs != 2 {
		t.Errorf("after 30 s: %d runs (%v), want a second", gpus.runs, err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	clk.now = clk.now.Add(time.Minute)
	if _, err := src.Checks(cancelled); err == nil {
		t.Error("a cancelled run was answered as if complete")
	}
	if _, err := src.Checks(ctx); err != nil || gpus.runs != 4 {
		t.Errorf("after a cancelled run: %d runs (%v), want a fresh one", gpus.runs, err)
	}
}

func TestHealthSourceCountsHearthsEngines(t *testing.T) {
	gpus := nodes.SimSource{GPUs: []nodes.GPU{busyGPU()}}
	without := &doctor.Doctor{GPUs: nodeGPUSource{discoverer: gpus}, Fitter: planFitter{}}
	with := &doctor.Doctor{GPUs: nodeGPUSource{discoverer: gpus, engines: thisProcessIsTheEngine}, Fitter: planFitter{}}
	ctx := context.Background()
	memory := func(d *doctor.Doctor) doctor.Check {
		return findCheck(t, d.Check(ctx), doctor.GPUMemoryName(0))
	}
	if c := memory(without); c.Status != doctor.Fail {
		t.Errorf("22 GiB held by others: %+v, want fail", c)
	}
	if c := memory(with); c.Status == doctor.Fail || !strings.Contains(c.Evidence, "held by Hearth's engines") {
		t.Errorf("22 GiB held by Hearth's own engines: %+v, want them counted as available", c)
	}
}

// diskRecorder is the host as the doctor sees it, noting which paths it
// asked about the free disk of.
type diskRecorder struct {
	doctor.HostSystem
	asked []string
}

func (d *diskRecorder) DiskFree(path string) (uint64, error) {
	d.asked = append(d.asked, path)
	return 1 << 40, nil
}

// TestHealthPageWeighsTheKVStoresDisk: the Health page checks the free
// disk where the node's KV store is (--kv-store-dir), not a directory of
// the data directory the store may not be on.
func TestHealthPageWeighsTheKVStoresDisk(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), KVStoreDir: t.TempDir(), Model: "qwen3-14b-fp8"}
	src, closeDocker := newHealthSource(cfg, nodes.SimSource{}, nil, func() []hruntime.Status { return nil }, "127.0.0.1:0")
	defer closeDocker()
	disks := &diskRecorder{}
	src.doctor.System = disks
	src.doctor.Docker = nil // no Docker Engine needed
	checks, err := src.Checks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var kv console.HealthCheck
	for _, c := range checks {
		if c.Name == doctor.CheckKVDisk {
			kv = c
		}
	}
	if !strings.Contains(kv.Evidence, cfg.KVStoreDir) {
		t.Errorf("KV disk check %+v (disks asked: %q), want the KV store's, %s", kv, disks.asked, cfg.KVStoreDir)
	}
}
