//go:build linux && cgo

package nodes

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/hearth-llm/hearth/catalog"
)

// NVMLSource is a Discoverer that reads the GPUs through NVML, the library
// the NVIDIA driver installs (libnvidia-ml.so.1, opened at run time).
//
// It initialises NVML once, on Open or on the first Discover, and shuts it
// down on Close. Each Discover reads every GPU afresh, so a GPU that was lost
// and answers again reads normally again.
type NVMLSource struct {
	lib      nvml.Interface
	node     string
	procRoot string

	mu     sync.Mutex
	opened bool
}

var (
	_ Discoverer                 = (*NVMLSource)(nil)
	_ interface{ Close() error } = (*NVMLSource)(nil)
)

// NewNVMLSource returns a source reading GPUs through lib (nvml.New() for
// the driver's library; go-nvml's mock package in tests). node names this
// machine; procRoot is where process names are read from (procRoot/<pid>/comm),
// "/proc" when empty.
func NewNVMLSource(lib nvml.Interface, node, procRoot string) *NVMLSource {
	if lib == nil {
		lib = nvml.New()
	}
	if procRoot == "" {
		procRoot = "/proc"
	}
	return &NVMLSource{lib: lib, node: node, procRoot: procRoot}
}

// openNVML opens NVML from the library at path ("" for the driver's
// libnvidia-ml.so.1 found by the dynamic loader).
func openNVML(cfg DiscoverConfig) (Discoverer, error) {
	var opts []nvml.LibraryOption
	if cfg.NVMLPath != "" {
		opts = append(opts, nvml.WithLibraryPath(cfg.NVMLPath))
	}
	s := NewNVMLSource(nvml.New(opts...), cfg.Node, cfg.ProcRoot)
	if err := s.Open(); err != nil {
		return nil, err
	}
	return s, nil
}

// Open initialises NVML. A missing library or driver is an error that
// errors.Is ErrNoDriver. Open is called by Discover when it has not been.
func (s *NVMLSource) Open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.openLocked()
}

func (s *NVMLSource) openLocked() error {
	if s.opened {
		return nil
	}
	switch ret := s.lib.Init(); ret {
	case nvml.SUCCESS:
		s.opened = true
		return nil
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
		return fmt.Errorf("%w (nvml: %s)", ErrNoDriver, s.words(ret))
	default:
		return fmt.Errorf("nvml: init: %s", s.words(ret))
	}
}

// Close shuts NVML down if it was initialised.
func (s *NVMLSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.opened {
		return nil
	}
	s.opened = false
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml: shutdown: %s", s.words(ret))
	}
	return nil
}

// Discover reads the host and every GPU. A GPU that cannot be read is
// returned with Err (and Lost when the driver says it is gone); the others
// still read.
func (s *NVMLSource) Discover(ctx context.Context) (Inventory, error) {
	s.mu.Lock()
	err := s.openLocked()
	s.mu.Unlock()
	if err != nil {
		return Inventory{}, err
	}
	inv := Inventory{Host: Host{Node: s.node, Source: "nvml"}}
	if v, ret := s.lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		inv.Host.DriverVersion = v
	}
	if v, ret := s.lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS && v > 0 {
		inv.Host.CUDADriverVersion = v
	}
	count, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		// A driver reloaded or reset under a running daemon leaves this
		// NVML session dead: start a new one at the next reading.
		s.mu.Lock()
		s.lib.Shutdown()
		s.opened = false
		s.mu.Unlock()
		return Inventory{}, fmt.Errorf("nvml: counting GPUs: %s", s.words(ret))
	}
	if count == 0 {
		return Inventory{}, ErrNoGPU
	}
	inv.GPUs = make([]GPU, 0, count)
	for i := range count {
		if err := ctx.Err(); err != nil {
			return Inventory{}, err
		}
		inv.GPUs = append(inv.GPUs, s.readGPU(i))
	}
	return inv, nil
}

// lostReturn reports whether ret says the GPU itself is gone or unusable
// until reset, rather than that one field cannot be read.
func lostReturn(ret nvml.Return) bool {
	return ret == nvml.ERROR_GPU_IS_LOST || ret == nvml.ERROR_RESET_REQUIRED
}

// words is the driver's sentence for ret.
func (s *NVMLSource) words(ret nvml.Return) string {
	return s.lib.ErrorString(ret)
}

// gpuReader reads the fields of one GPU, remembering the first error that
// is more than "not supported" and stopping at one that says the GPU is lost.
type gpuReader struct {
	s    *NVMLSource
	g    *GPU
	lost bool
}

// ok reports whether a field's answer can be used; a failure other than
// ERROR_NOT_SUPPORTED is noted on the GPU.
func (r *gpuReader) ok(field string, ret nvml.Return) bool {
	switch {
	case ret == nvml.SUCCESS:
		return true
	case lostReturn(ret):
		r.lost = true
		r.g.Lost, r.g.Err = true, r.s.words(ret)
	case ret != nvml.ERROR_NOT_SUPPORTED && r.g.Err == "":
		r.g.Err = field + ": " + r.s.words(ret)
	}
	return false
}

func (s *NVMLSource) readGPU(index int) GPU {
	g := NewGPU(s.node, index)
	dev, ret := s.lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		// A handle that cannot be had for a GPU the driver counted is a GPU
		// that has fallen off the bus or needs a reset.
		g.Lost = lostReturn(ret) || ret == nvml.ERROR_UNKNOWN
		g.Err = s.words(ret)
		return g
	}
	r := &gpuReader{s: s, g: &g}
	// Each step reads one field; after a lost answer the rest are not asked.
	steps := []func(){
		func() {
			if v, ret := dev.GetUUID(); r.ok("uuid", ret) {
				g.UUID = v
			}
		},
		func() {
			if v, ret := dev.GetName(); r.ok("name", ret) {
				g.Name = v
			}
		},
		func() {
			if m, ret := dev.GetMemoryInfo(); r.ok("memory", ret) {
				g.MemoryTotal, g.MemoryUsed, g.MemoryFree, g.MemoryUsageKnown = m.Total, m.Used, m.Free, true
			}
		},
		func() {
			if u, ret := dev.GetUtilizationRates(); r.ok("utilization", ret) {
				g.UtilizationPct = int(u.Gpu)
			}
		},
		func() {
			if t, ret := dev.GetTemperature(nvml.TEMPERATURE_GPU); r.ok("temperature", ret) {
				g.TemperatureC = int(t)
			}
		},
		func() {
			if p, ret := dev.GetPowerUsage(); r.ok("power draw", ret) {
				g.PowerDrawW = float64(p) / 1000
			}
		},
		func() {
			if p, ret := dev.GetEnforcedPowerLimit(); r.ok("power limit", ret) {
				g.PowerLimitW = float64(p) / 1000
			}
		},
		func() {
			if v, ret := dev.GetCurrPcieLinkGeneration(); r.ok("pcie generation", ret) {
				g.PCIeGenCurrent = v
			}
		},
		func() {
			if v, ret := dev.GetMaxPcieLinkGeneration(); r.ok("pcie max generation", ret) {
				g.PCIeGenMax = v
			}
		},
		func() {
			if v, ret := dev.GetCurrPcieLinkWidth(); r.ok("pcie width", ret) {
				g.PCIeWidthCurrent = v
			}
		},
		func() {
			if v, ret := dev.GetMaxPcieLinkWidth(); r.ok("pcie max width", ret) {
				g.PCIeWidthMax = v
			}
		},
		func() {
			if major, minor, ret := dev.GetCudaComputeCapability(); r.ok("compute capability", ret) {
				g.ComputeMajor, g.ComputeMinor = major, minor
			}
		},
		func() { s.readProcesses(dev, r) },
	}
	for _, step := range steps {
		if r.lost {
			break
		}
		step()
	}
	if g.Name != "" || g.MemoryTotal != 0 {
		g.Kind = catalog.GPUByName(g.Name, g.MemoryTotal).Kind
	}
	return g
}

// readProcesses lists the compute and graphics processes of dev, one entry
// per PID. The list is known when either kind could be listed.
func (s *NVMLSource) readProcesses(dev nvml.Device, r *gpuReader) {
	byPID := map[int]int{} // pid → index in g.Processes
	add := func(infos []nvml.ProcessInfo) {
		for _, info := range infos {
			used := info.UsedGpuMemory
			if used == ^uint64(0) { // NVML_VALUE_NOT_AVAILABLE
				used = 0
			}
			pid := int(info.Pid)
			if i, seen := byPID[pid]; seen {
				r.g.Processes[i].UsedBytes = max(r.g.Processes[i].UsedBytes, used)
				continue
			}
			byPID[pid] = len(r.g.Processes)
			r.g.Processes = append(r.g.Processes, Process{PID: pid, UsedBytes: used})
		}
	}
	if infos, ret := dev.GetComputeRunningProcesses(); r.ok("compute processes", ret) {
		add(infos)
		r.g.ProcessesKnown = true
	}
	if r.lost {
		return
	}
	if infos, ret := dev.GetGraphicsRunningProcesses(); r.ok("graphics processes", ret) {
		add(infos)
		r.g.ProcessesKnown = true
	}
	for i := range r.g.Processes {
		r.g.Processes[i].Name = s.processName(r.g.Processes[i].PID)
	}
}

// processName is the executable name of pid: /proc's comm when this
// machine's /proc shows the process, else the driver's word, else "".
func (s *NVMLSource) processName(pid int) string {
	if name := readComm(s.procRoot, pid); name != "" {
		return name
	}
	if name, ret := s.lib.SystemGetProcessName(pid); ret == nvml.SUCCESS && name != "" {
		return filepath.Base(name)
	}
	return ""
}
