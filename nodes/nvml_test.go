//go:build linux && cgo

package nodes

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/hearth-llm/hearth/nodes/nvmltest"
)

const gib = uint64(1) << 30

// device is a fake board; lost, when set and true, makes it lost.
func device(b nvmltest.Board, lost func() bool) *mock.Device {
	return nvmltest.Device(func() nvmltest.Board {
		b := b
		b.Lost = lost != nil && lost()
		return b
	})
}

func TestNVMLTwoGPUsWithEveryField(t *testing.T) {
	lib := nvmltest.Library([]*mock.Device{device(nvmltest.RTX4090(), nil), device(nvmltest.RTX3090(), nil)}, nil)
	src := NewNVMLSource(lib, "rig", procRoot(t, map[int]string{4242: "vllm"}))
	inv, err := src.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (Host{Node: "rig", Source: "nvml", DriverVersion: "580.95.05", CUDADriverVersion: 12090}); inv.Host != want {
		t.Errorf("host = %+v, want %+v", inv.Host, want)
	}
	if len(inv.GPUs) != 2 {
		t.Fatalf("got %d GPUs, want 2", len(inv.GPUs))
	}
	want0 := GPU{
		Node: "rig", Index: 0, UUID: "GPU-4090-0000", Name: "NVIDIA GeForce RTX 4090", Kind: "rtx4090",
		MemoryTotal: 24 * gib, MemoryUsed: 20 * gib, MemoryFree: 4 * gib, MemoryUsageKnown: true,
		UtilizationPct: 87, TemperatureC: 71, PowerDrawW: 412.35, PowerLimitW: 450,
		PCIeGenCurrent: 4, PCIeGenMax: 4, PCIeWidthCurrent: 16, PCIeWidthMax: 16, ComputeMajor: 8, ComputeMinor: 9,
		Processes: []Process{{PID: 4242, UsedBytes: 19 * gib, Name: "vllm"}}, ProcessesKnown: true,
	}
	assertGPU(t, inv.GPUs[0], want0)
	g1 := inv.GPUs[1]
	if g1.Index != 1 || g1.Kind != "rtx3090" || g1.PCIeGenCurrent != 1 || g1.PCIeGenMax != 4 || g1.PowerDrawW != 31.2 ||
		g1.ComputeMajor != 8 || g1.ComputeMinor != 6 || !g1.ProcessesKnown || len(g1.Processes) != 0 || g1.Err != "" {
		t.Errorf("gpu 1 = %+v", g1)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(lib.InitCalls()); n != 1 {
		t.Errorf("Init called %d times, want once", n)
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times, want once", n)
	}
}

func assertGPU(t *testing.T, got, want GPU) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("gpu =\n%+v\nwant\n%+v", got, want)
	}
}

func TestNVMLForeignProcessNames(t *testing.T) {
	spec := nvmltest.RTX4090()
	// A game (graphics and compute, one PID), our engine, and a process in
	// another PID namespace that /proc does not show.
	spec.ComputeProcs = []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 10 * gib}, {Pid: 777, UsedGpuMemory: 2 * gib},
		{Pid: 9001, UsedGpuMemory: ^uint64(0)}}
	spec.GraphicsProcs = []nvml.ProcessInfo{{Pid: 777, UsedGpuMemory: 3 * gib}}
	lib := nvmltest.Library([]*mock.Device{device(spec, nil)}, nil)
	root := procRoot(t, map[int]string{4242: "vllm", 777: "Cyberpunk2077.e"})
	inv, err := NewNVMLSource(lib, "rig", root).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []Process{
		{PID: 4242, UsedBytes: 10 * gib, Name: "vllm"},
		{PID: 777, UsedBytes: 3 * gib, Name: "Cyberpunk2077.e"},
		{PID: 9001, UsedBytes: 0, Name: "driver-name-9001"},
	}
	got := inv.GPUs[0].Processes
	if len(got) != len(want) {
		t.Fatalf("processes = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("process %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestNVMLNotSupportedFieldsAreUnknown(t *testing.T) {
	spec := nvmltest.RTX3090()
	spec.Unsupported = map[string]bool{"util": true, "temp": true, "power": true, "limit": true,
		"gen": true, "genmax": true, "width": true, "widthmax": true, "cc": true, "memory": true,
		"compute": true, "graphics": true}
	lib := nvmltest.Library([]*mock.Device{device(spec, nil)}, nil)
	lib.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	inv, err := NewNVMLSource(lib, "rig", t.TempDir()).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := NewGPU("rig", 0)
	want.UUID, want.Name, want.Kind = "GPU-3090-0001", "NVIDIA GeForce RTX 3090", "rtx3090"
	assertGPU(t, inv.GPUs[0], want)
	if inv.Host.CUDADriverVersion != 0 {
		t.Errorf("CUDA version %d, want unknown (0)", inv.Host.CUDADriverVersion)
	}
}

func TestNVMLOtherFieldErrorIsNoted(t *testing.T) {
	d := device(nvmltest.RTX4090(), nil)
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NO_PERMISSION }
	inv, err := NewNVMLSource(nvmltest.Library([]*mock.Device{d}, nil), "rig", t.TempDir()).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g := inv.GPUs[0]
	if g.PowerDrawW != -1 || g.Lost || g.Err == "" || g.PowerLimitW != 450 {
		t.Errorf("gpu = %+v, want power draw unknown, the error noted, the rest read", g)
	}
}

func TestNVMLNoLibraryIsErrNoDriver(t *testing.T) {
	lib := nvmltest.Library(nil, nil)
	lib.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	src := NewNVMLSource(lib, "rig", "")
	_, err := src.Discover(context.Background())
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Discover = %v, want ErrNoDriver", err)
	}
	if err := src.Close(); err != nil || len(lib.ShutdownCalls()) != 0 {
		t.Errorf("Close after a failed Init = %v with %d Shutdown calls, want nil and none", err, len(lib.ShutdownCalls()))
	}
}

func TestNVMLRealLibraryMissing(t *testing.T) {
	_, err := openNVML(DiscoverConfig{Node: "rig", NVMLPath: filepath.Join(t.TempDir(), "libnvidia-ml.so.1")})
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("openNVML with a missing library = %v, want ErrNoDriver", err)
	}
}

func TestNVMLNoGPU(t *testing.T) {
	_, err := NewNVMLSource(nvmltest.Library(nil, nil), "rig", "").Discover(context.Background())
	if !errors.Is(err, ErrNoGPU) {
		t.Fatalf("Discover = %v, want ErrNoGPU", err)
	}
}

func TestNVMLGPULostAndBack(t *testing.T) {
	for _, how := range []string{"fields answer lost", "handle answers unknown"} {
		t.Run(how, func(t *testing.T) {
			call := 0 // which Discover this is, from 1
			lostNow := func() bool { return call == 2 }
			var d1 *mock.Device
			var handleErr func(int) nvml.Return
			if how == "fields answer lost" {
				d1 = device(nvmltest.RTX3090(), lostNow)
			} else {
				d1 = device(nvmltest.RTX3090(), nil)
				handleErr = func(i int) nvml.Return {
					if i == 1 && lostNow() {
						return nvml.ERROR_UNKNOWN
					}
					return nvml.SUCCESS
				}
			}
			lib := nvmltest.Library([]*mock.Device{device(nvmltest.RTX4090(), nil), d1}, handleErr)
			src := NewNVMLSource(lib, "rig", t.TempDir())
			for call = 1; call <= 3; call++ {
				inv, err := src.Discover(context.Background())
				if err != nil {
					t.Fatalf("discover %d: %v", call, err)
				}
				g0, g1 := inv.GPUs[0], inv.GPUs[1]
				if g0.Lost || g0.Err != "" || g0.UtilizationPct != 87 {
					t.Errorf("discover %d: gpu 0 = %+v, want read normally", call, g0)
				}
				if call == 2 {
					if !g1.Lost || g1.Err == "" || g1.Index != 1 {
						t.Errorf("discover 2: gpu 1 = %+v, want lost with the driver's words", g1)
					}
					if how == "fields answer lost" && g1.Err != "GPU is lost" {
						t.Errorf("discover 2: gpu 1 Err = %q, want the driver's words %q", g1.Err, "GPU is lost")
					}
					if g1.TemperatureC != -1 || g1.MemoryUsageKnown || g1.ProcessesKnown {
						t.Errorf("discover 2: a lost GPU reports %+v, want its fields unknown", g1)
					}
					continue
				}
				if g1.Lost || g1.Err != "" || g1.TemperatureC != 38 || g1.Kind != "rtx3090" {
					t.Errorf("discover %d: gpu 1 = %+v, want read normally", call, g1)
				}
			}
			if n := len(lib.InitCalls()); n != 1 {
				t.Errorf("Init called %d times, want once", n)
			}
		})
	}
}

func TestNVMLStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := NewNVMLSource(nvmltest.Library([]*mock.Device{device(nvmltest.RTX4090(), nil)}, nil), "rig", "").Discover(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Discover on a cancelled context = %v, want context.Canceled", err)
	}
}

// TestSamplerOverNVMLLostAndBack: through NVML, a lost GPU answers no
// UUID; the sampler still reports that GPU lost and then found, and never
// a second one.
func TestSamplerOverNVMLLostAndBack(t *testing.T) {
	var lost atomic.Bool
	board := nvmltest.RTX3090()
	lib := nvmltest.Machine(nvmltest.Fixed(nvmltest.RTX4090()), func() nvmltest.Board {
		b := board
		b.Lost = lost.Load()
		return b
	})
	var events []string
	s := NewSampler(SamplerConfig{
		Source:  NewNVMLSource(lib, "rig", t.TempDir()),
		OnLost:  func(g GPU) { events = append(events, "lost "+g.UUID+": "+g.Err) },
		OnFound: func(g GPU) { events = append(events, "found "+g.UUID) },
	})
	ctx := context.Background()
	for _, l := range []bool{false, true, true, false} {
		lost.Store(l)
		inv, err := s.Sample(ctx)
		if err != nil || len(inv.GPUs) != 2 {
			t.Fatalf("reading: %d GPUs, %v", len(inv.GPUs), err)
		}
	}
	want := "lost GPU-3090-0001: GPU is lost | found GPU-3090-0001"
	if got := strings.Join(events, " | "); got != want {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestNVMLReinitialisesAfterTheDriverGoes: when the driver stops answering
// (reloaded under the daemon), the next reading starts NVML again.
func TestNVMLReinitialisesAfterTheDriverGoes(t *testing.T) {
	lib := nvmltest.Machine(nvmltest.Fixed(nvmltest.RTX4090()))
	count := lib.DeviceGetCountFunc
	var gone atomic.Bool
	lib.DeviceGetCountFunc = func() (int, nvml.Return) {
		if gone.Load() {
			return 0, nvml.ERROR_DRIVER_NOT_LOADED
		}
		return count()
	}
	src := NewNVMLSource(lib, "rig", t.TempDir())
	ctx := context.Background()
	if _, err := src.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	gone.Store(true)
	if _, err := src.Discover(ctx); err == nil {
		t.Fatal("a driver that went away read fine")
	}
	gone.Store(false)
	if inv, err := src.Discover(ctx); err != nil || len(inv.GPUs) != 1 {
		t.Fatalf("after the driver came back: %+v, %v", inv, err)
	}
	if inits, shutdowns := len(lib.InitCalls()), len(lib.ShutdownCalls()); inits != 2 || shutdowns != 1 {
		t.Errorf("Init %d times, Shutdown %d times; want 2 and 1", inits, shutdowns)
	}
}
