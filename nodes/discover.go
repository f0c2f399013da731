package nodes

import (
	"context"
	"errors"
	"fmt"
)

// Host is what discovery learns of the machine rather than of one GPU.
type Host struct {
	Node string
	// Source names where the facts came from: "nvml", "nvidia-smi" or "sim".
	Source string
	// DriverVersion is the NVIDIA driver's version ("580.95.05"), "" when
	// unknown. CUDADriverVersion is the newest CUDA the driver runs, as
	// major*1000 + minor*10 (12090 for 12.9), the form NVML reports; 0 when
	// unknown.
	DriverVersion     string
	CUDADriverVersion int
}

// CUDAVersion is CUDADriverVersion as people write it: 12090 is "12.9";
// "" when unknown.
func (h Host) CUDAVersion() string {
	if h.CUDADriverVersion <= 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", h.CUDADriverVersion/1000, h.CUDADriverVersion%1000/10)
}

// Inventory is one look at a machine's GPUs.
type Inventory struct {
	Host Host
	GPUs []GPU
}

// Copy returns inv with slices of its own.
func (inv Inventory) Copy() Inventory {
	gpus := make([]GPU, len(inv.GPUs))
	for i, g := range inv.GPUs {
		gpus[i] = g.Copy()
	}
	inv.GPUs = gpus
	return inv
}

// Discoverer reads the GPUs of this machine. Each call reads them afresh;
// callers that want a steady picture use a Sampler.
type Discoverer interface {
	// Discover returns the machine's GPUs in index order. A GPU that cannot
	// be read is returned with Err set (and Lost when the driver says so),
	// not dropped; an error means no GPU could be listed at all.
	Discover(ctx context.Context) (Inventory, error)
}

// ErrNoDriver is returned when no NVIDIA driver can be reached: neither
// NVML's library nor nvidia-smi is present.
var ErrNoDriver = errors.New("NVML: libnvidia-ml.so.1 not found: is the NVIDIA driver installed? (hearth doctor)")

// ErrNoGPU is returned when the driver is present but lists no GPU.
var ErrNoGPU = errors.New("the NVIDIA driver lists no GPU (hearth doctor)")

// SimSource is a Discoverer over a fixed simulated list (ParseSimSpec).
type SimSource struct {
	Node string
	GPUs []GPU
}

// Discover returns the simulated GPUs.
func (s SimSource) Discover(context.Context) (Inventory, error) {
	inv := Inventory{Host: Host{Node: s.Node, Source: "sim"}, GPUs: s.GPUs}
	return inv.Copy(), nil
}
