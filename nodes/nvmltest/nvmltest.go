//go:build linux && cgo

// Package nvmltest builds fake NVML libraries from go-nvml's mock package:
// boards that answer as a real driver does, including the errors a driver
// gives for fields a board does not support and for a GPU that is lost.
package nvmltest

import (
	"strconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

const gib = uint64(1) << 30

// Board is what a fake GPU answers. A field named in Unsupported answers
// ERROR_NOT_SUPPORTED; a Lost board answers ERROR_GPU_IS_LOST to every
// call. Field names: uuid, name, memory, util, temp, power, limit, gen,
// genmax, width, widthmax, cc, compute, graphics.
type Board struct {
	UUID, Name                   string
	MemTotal, MemUsed            uint64
	Util, TempC                  uint32
	PowerMW, LimitMW             uint32
	Gen, GenMax, Width, WidthMax int
	ComputeMajor, ComputeMinor   int
	ComputeProcs, GraphicsProcs  []nvml.ProcessInfo
	Unsupported                  map[string]bool
	Lost                         bool
}

// RTX4090 is a busy RTX 4090: 20 GiB in use, 19 GiB of it by PID 4242.
func RTX4090() Board {
	return Board{
		UUID: "GPU-4090-0000", Name: "NVIDIA GeForce RTX 4090",
		MemTotal: 24 * gib, MemUsed: 20 * gib, Util: 87, TempC: 71, PowerMW: 412350, LimitMW: 450000,
		Gen: 4, GenMax: 4, Width: 16, WidthMax: 16, ComputeMajor: 8, ComputeMinor: 9,
		ComputeProcs: []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 19 * gib}},
	}
}

// RTX3090 is an idle RTX 3090 whose link has dropped to PCIe 1 to save
// power.
func RTX3090() Board {
	return Board{
		UUID: "GPU-3090-0001", Name: "NVIDIA GeForce RTX 3090",
		MemTotal: 24 * gib, MemUsed: 512 << 20, Util: 0, TempC: 38, PowerMW: 31200, LimitMW: 350000,
		Gen: 1, GenMax: 4, Width: 16, WidthMax: 16, ComputeMajor: 8, ComputeMinor: 6,
	}
}

// Fixed is a board that never changes.
func Fixed(b Board) func() Board { return func() Board { return b } }

// Device is a mock device answering as read says at the time of each
// call, so that a test can change a board while it is being read (read
// must be safe for concurrent use then).
func Device(read func() Board) *mock.Device {
	ret := func(b Board, field string) nvml.Return {
		switch {
		case b.Lost:
			return nvml.ERROR_GPU_IS_LOST
		case b.Unsupported[field]:
			return nvml.ERROR_NOT_SUPPORTED
		}
		return nvml.SUCCESS
	}
	return &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { b := read(); return b.UUID, ret(b, "uuid") },
		GetNameFunc: func() (string, nvml.Return) { b := read(); return b.Name, ret(b, "name") },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			b := read()
			return nvml.Memory{Total: b.MemTotal, Used: b.MemUsed, Free: b.MemTotal - b.MemUsed}, ret(b, "memory")
		},
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			b := read()
			return nvml.Utilization{Gpu: b.Util}, ret(b, "util")
		},
		GetTemperatureFunc: func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			if s != nvml.TEMPERATURE_GPU {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			b := read()
			return b.TempC, ret(b, "temp")
		},
		GetPowerUsageFunc:             func() (uint32, nvml.Return) { b := read(); return b.PowerMW, ret(b, "power") },
		GetEnforcedPowerLimitFunc:     func() (uint32, nvml.Return) { b := read(); return b.LimitMW, ret(b, "limit") },
		GetCurrPcieLinkGenerationFunc: func() (int, nvml.Return) { b := read(); return b.Gen, ret(b, "gen") },
		GetMaxPcieLinkGenerationFunc:  func() (int, nvml.Return) { b := read(); return b.GenMax, ret(b, "genmax") },
		GetCurrPcieLinkWidthFunc:      func() (int, nvml.Return) { b := read(); return b.Width, ret(b, "width") },
		GetMaxPcieLinkWidthFunc:       func() (int, nvml.Return) { b := read(); return b.WidthMax, ret(b, "widthmax") },
		GetCudaComputeCapabilityFunc: func() (int, int, nvml.Return) {
			b := read()
			return b.ComputeMajor, b.ComputeMinor, ret(b, "cc")
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			b := read()
			return b.ComputeProcs, ret(b, "compute")
		},
		GetGraphicsRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			b := read()
			return b.GraphicsProcs, ret(b, "graphics")
		},
	}
}

// Library is a mock NVML over devices, with driver 580.95.05 (CUDA 12.9);
// handleErr, when set, is what DeviceGetHandleByIndex answers for an index
// instead of its device.
func Library(devices []*mock.Device, handleErr func(int) nvml.Return) *mock.Interface {
	return &mock.Interface{
		InitFunc:                       func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:                   func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "580.95.05", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 12090, nvml.SUCCESS },
		SystemGetProcessNameFunc: func(pid int) (string, nvml.Return) {
			return "/usr/bin/driver-name-" + strconv.Itoa(pid), nvml.SUCCESS
		},
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(devices), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if handleErr != nil {
				if r := handleErr(i); r != nvml.SUCCESS {
					return nil, r
				}
			}
			return devices[i], nvml.SUCCESS
		},
		ErrorStringFunc: func(r nvml.Return) string {
			switch r {
			case nvml.ERROR_GPU_IS_LOST:
				return "GPU is lost"
			case nvml.ERROR_NOT_SUPPORTED:
				return "Not Supported"
			case nvml.ERROR_LIBRARY_NOT_FOUND:
				return "NVML Shared Library Not Found"
			}
			return "error " + strconv.Itoa(int(r))
		},
	}
}

// Machine is a mock NVML over boards, each read as Device reads it.
func Machine(boards ...func() Board) *mock.Interface {
	devices := make([]*mock.Device, len(boards))
	for i, read := range boards {
		devices[i] = Device(read)
	}
	return Library(devices, nil)
}
