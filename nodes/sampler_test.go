package nodes

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// scriptedSource answers Discover with its readings in turn, repeating
// the last one.
type scriptedSource struct {
	mu       sync.Mutex
	readings []reading
	calls    int
}

type reading struct {
	gpus []GPU
	err  error
}

func (s *scriptedSource) Discover(context.Context) (Inventory, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.readings[min(s.calls, len(s.readings)-1)]
	s.calls++
	if r.err != nil {
		return Inventory{}, r.err
	}
	return Inventory{Host: Host{Node: "box", Source: "test", DriverVersion: "580.95.05", CUDADriverVersion: 13000}, GPUs: r.gpus}.Copy(), nil
}

func testGPU(index int, uuid string) GPU {
	g := NewGPU("box", index)
	g.UUID, g.Name, g.Kind = uuid, "NVIDIA GeForce RTX 4090", "rtx4090"
	g.MemoryTotal, g.MemoryUsed, g.MemoryFree, g.MemoryUsageKnown = 24<<30, 6<<30, 18<<30, true
	g.UtilizationPct, g.TemperatureC, g.PowerDrawW, g.PowerLimitW = 37, 61, 212.5, 450
	g.Processes, g.ProcessesKnown = []Process{{PID: 4242, UsedBytes: 6 << 30, Name: "game.exe"}}, true
	return g
}

func lostGPU(index int, uuid, why string) GPU {
	g := NewGPU("box", index)
	g.UUID, g.Lost, g.Err = uuid, true, why
	return g
}

// events records lost and found callbacks as "lost:UUID" and "found:UUID".
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(what string) func(GPU) {
	return func(g GPU) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.got = append(e.got, what+":"+g.UUID)
	}
}

func (e *events) take() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := strings.Join(e.got, " ")
	e.got = nil
	return s
}

func TestSamplerLostAndFound(t *testing.T) {
	a, b := testGPU(0, "GPU-a"), testGPU(1, "GPU-b")
	driverGone := errors.New("nvml: Driver Not Loaded")
	src := &scriptedSource{readings: []reading{
		{gpus: []GPU{a, b}},
		{gpus: []GPU{a, lostGPU(1, "GPU-b", "GPU is lost")}},
		{gpus: []GPU{a, lostGPU(1, "GPU-b", "GPU is lost")}},
		{gpus: []GPU{a, b}},
		{gpus: []GPU{b}}, // a drops out of the list
		{err: driverGone},
		{gpus: []GPU{a, b}},
	}}
	var ev events
	s := NewSampler(SamplerConfig{Source: src, OnLost: ev.add("lost"), OnFound: ev.add("found")})
	ctx := context.Background()

	steps := []struct {
		name      string
		events    string
		lost      map[string]string // UUID → error the reading must carry
		wantError bool
	}{
		{name: "first reading", events: ""},
		{name: "b lost", events: "lost:GPU-b", lost: map[string]string{"GPU-b": "GPU is lost"}},
		{name: "b still lost: no second event", events: "", lost: map[string]string{"GPU-b": "GPU is lost"}},
		{name: "b back", events: "found:GPU-b"},
		{name: "a no longer listed", events: "lost:GPU-a", lost: map[string]string{"GPU-a": "no longer lists"}},
		{name: "driver gone", events: "lost:GPU-b", lost: map[string]string{"GPU-a": "Driver Not Loaded", "GPU-b": "Driver Not Loaded"}, wantError: true},
		{name: "all back", events: "found:GPU-a found:GPU-b"},
	}
	for _, step := range steps {
		inv, err := s.Sample(ctx)
		if (err != nil) != step.wantError {
			t.Fatalf("%s: Sample error = %v, want error %v", step.name, err, step.wantError)
		}
		if got := ev.take(); got != step.events {
			t.Errorf("%s: events %q, want %q", step.name, got, step.events)
		}
		if len(inv.GPUs) != 2 {
			t.Fatalf("%s: %d GPUs in the reading, want both kept: %+v", step.name, len(inv.GPUs), inv.GPUs)
		}
		for _, g := range inv.GPUs {
			want, isLost := step.lost[g.UUID]
			if g.Lost != isLost || !strings.Contains(g.Err, want) {
				t.Errorf("%s: %s lost=%v err=%q, want lost=%v err containing %q", step.name, g.UUID, g.Lost, g.Err, isLost, want)
			}
			if g.Lost && (g.MemoryUsageKnown || g.UtilizationPct >= 0 || g.ProcessesKnown) {
				t.Errorf("%s: lost %s keeps stale readings: %+v", step.name, g.UUID, g)
			}
		}
		latest, at, lastErr := s.Latest()
		if at.IsZero() || len(latest.GPUs) != 2 || (lastErr != nil) != step.wantError {
			t.Errorf("%s: Latest = %d GPUs at %v err %v", step.name, len(latest.GPUs), at, lastErr)
		}
	}
}

// TestSamplerKeepsTheIdentityOfALostGPU: a lost GPU answers nothing, not
// even its UUID; it is still the GPU that was at its index, and coming
// back it is found, not a second GPU.
func TestSamplerKeepsTheIdentityOfALostGPU(t *testing.T) {
	a, b := testGPU(0, "GPU-a"), testGPU(1, "GPU-b")
	silent := NewGPU("box", 1)
	silent.Lost, silent.Err = true, "GPU is lost"
	src := &scriptedSource{readings: []reading{{gpus: []GPU{a, b}}, {gpus: []GPU{a, silent}}, {gpus: []GPU{a, b}}}}
	var ev events
	s := NewSampler(SamplerConfig{Source: src, OnLost: ev.add("lost"), OnFound: ev.add("found")})
	ctx := context.Background()
	for i, want := range []string{"", "lost:GPU-b", "found:GPU-b"} {
		inv, err := s.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := ev.take(); got != want {
			t.Errorf("reading %d: events %q, want %q", i, got, want)
		}
		if len(inv.GPUs) != 2 {
			t.Fatalf("reading %d: %d GPUs, want 2: %+v", i, len(inv.GPUs), inv.GPUs)
		}
		if g := inv.GPUs[1]; g.UUID != "GPU-b" || g.Name == "" || g.MemoryTotal == 0 {
			t.Errorf("reading %d: gpu 1 is %+v, want GPU-b with its name and size", i, g)
		}
	}
}

func TestSamplerLostAtFirstSight(t *testing.T) {
	src := &scriptedSource{readings: []reading{{gpus: []GPU{testGPU(0, "GPU-a"), lostGPU(1, "GPU-b", "GPU requires reset")}}}}
	var ev events
	s := NewSampler(SamplerConfig{Source: src, OnLost: ev.add("lost"), OnFound: ev.add("found")})
	if _, err := s.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ev.take(); got != "lost:GPU-b" {
		t.Errorf("events %q, want lost:GPU-b", got)
	}
}

func TestSamplerLatestIsACopy(t *testing.T) {
	src := &scriptedSource{readings: []reading{{gpus: []GPU{testGPU(0, "GPU-a")}}}}
	s := NewSampler(SamplerConfig{Source: src})
	if _, err := s.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	inv, _, _ := s.Latest()
	inv.GPUs[0].Processes[0].Name = "changed"
	inv.GPUs[0].MemoryUsed = 1
	again, ok := s.GPU("GPU-a")
	if !ok || again.Processes[0].Name != "game.exe" || again.MemoryUsed != 6<<30 {
		t.Errorf("a caller changed the sampler's reading: %+v", again)
	}
	if _, ok := s.GPU("GPU-none"); ok {
		t.Error("GPU found an unknown UUID")
	}
}

// tickClock is a clock whose ticker fires when the test sends.
type tickClock struct{ ticks chan time.Time }

func (c tickClock) Now() time.Time                       { return time.Unix(1_800_000_000, 0) }
func (c tickClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }
func (c tickClock) NewTicker(time.Duration) (<-chan time.Time, func()) {
	return c.ticks, func() {}
}

func TestSamplerRunSamplesOnEachTick(t *testing.T) {
	src := &scriptedSource{readings: []reading{{gpus: []GPU{testGPU(0, "GPU-a")}}, {gpus: []GPU{lostGPU(0, "GPU-a", "GPU is lost")}}}}
	lost := make(chan GPU, 1)
	clk := tickClock{ticks: make(chan time.Time)}
	s := NewSampler(SamplerConfig{Source: src, Clock: clk, OnLost: func(g GPU) { lost <- g }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	clk.ticks <- time.Time{}
	clk.ticks <- time.Time{} // the second tick is taken once the first sample is done
	select {
	case g := <-lost:
		if g.UUID != "GPU-a" {
			t.Errorf("lost %s", g.UUID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no lost event after two ticks")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestSamplerGauges(t *testing.T) {
	sim, err := ParseSimSpec("1x3090")
	if err != nil {
		t.Fatal(err)
	}
	sim[0].Node = "box"
	src := &scriptedSource{readings: []reading{{gpus: []GPU{testGPU(0, "GPU-a"), lostGPU(1, "GPU-b", "GPU is lost"), sim[0]}}}}
	s := NewSampler(SamplerConfig{Source: src})
	if _, err := s.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The lost GPU has only its lost series; the simulated one no
	// utilisation, temperature or power: unknown is absent, not zero.
	want := `
# HELP hearth_gpu_lost 1 while the driver reports the GPU lost or no longer lists it.
# TYPE hearth_gpu_lost gauge
hearth_gpu_lost{gpu="0",name="NVIDIA GeForce RTX 4090",node="box",uuid="GPU-a"} 0
hearth_gpu_lost{gpu="1",name="",node="box",uuid="GPU-b"} 1
hearth_gpu_lost{gpu="0",name="NVIDIA GeForce RTX 3090",node="box",uuid="GPU-sim-rtx3090-0"} 0
# HELP hearth_gpu_power_draw_watts Power the board draws.
# TYPE hearth_gpu_power_draw_watts gauge
hearth_gpu_power_draw_watts{gpu="0",name="NVIDIA GeForce RTX 4090",node="box",uuid="GPU-a"} 212.5
# HELP hearth_gpu_processes Processes holding memory on the GPU, Hearth's engines included.
# TYPE hearth_gpu_processes gauge
hearth_gpu_processes{gpu="0",name="NVIDIA GeForce RTX 4090",node="box",uuid="GPU-a"} 1
# HELP hearth_gpu_utilization_percent Share of the last sample period a kernel ran on the GPU.
# TYPE hearth_gpu_utilization_percent gauge
hearth_gpu_utilization_percent{gpu="0",name="NVIDIA GeForce RTX 4090",node="box",uuid="GPU-a"} 37
`
	if err := testutil.CollectAndCompare(s, strings.NewReader(want), "hearth_gpu_lost", "hearth_gpu_power_draw_watts", "hearth_gpu_processes", "hearth_gpu_utilization_percent"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(s, "hearth_gpu_memory_free_bytes"); n != 1 {
		t.Errorf("%d free-memory series, want 1 (the lost GPU and the simulated one have none)", n)
	}
}
