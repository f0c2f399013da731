package nodes

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// DiscoverConfig chooses and sets up the source NewDiscoverer returns.
type DiscoverConfig struct {
	// Node names this machine in what is discovered; the host name when
	// empty.
	Node string
	// Sim, when set, is a simulated GPU list (ParseSimSpec: "2x4090") and
	// no driver is asked.
	Sim string
	// SMIPath is the nvidia-smi to run when NVML cannot be used: a path, or
	// a name looked up on PATH; "nvidia-smi" when empty.
	SMIPath string
	// NVMLPath is the NVML library to open; empty for the driver's
	// libnvidia-ml.so.1 as the dynamic loader finds it.
	NVMLPath string
	// ProcRoot is where process names are read from (ProcRoot/<pid>/comm);
	// "/proc" when empty.
	ProcRoot string
}

// NewDiscoverer returns the source of this machine's GPUs, trying in order:
// the simulated list when cfg.Sim is set; NVML when this build has it (linux
// and cgo) and its library loads; nvidia-smi when it is found; else
// ErrNoDriver itself. The Discoverer may also be an io.Closer (NVML is shut
// down on Close): callers close it when it is.
func NewDiscoverer(cfg DiscoverConfig) (Discoverer, error) {
	return newDiscoverer(cfg, openNVML, exec.LookPath)
}

// newDiscoverer is NewDiscoverer with its two probes passed in, so that the
// fallback order can be tested without a driver.
func newDiscoverer(cfg DiscoverConfig, openNVML func(DiscoverConfig) (Discoverer, error), lookPath func(string) (string, error)) (Discoverer, error) {
	if cfg.Node == "" {
		if h, err := os.Hostname(); err == nil {
			cfg.Node = h
		}
	}
	if cfg.Sim != "" {
		gpus, err := ParseSimSpec(cfg.Sim)
		if err != nil {
			return nil, err
		}
		for i := range gpus {
			gpus[i].Node = cfg.Node
		}
		return SimSource{Node: cfg.Node, GPUs: gpus}, nil
	}
	d, nvmlErr := openNVML(cfg)
	if nvmlErr == nil {
		return d, nil
	}
	smi := cfg.SMIPath
	if smi == "" {
		smi = "nvidia-smi"
	}
	if path, err := lookPath(smi); err == nil {
		return &SMISource{Path: path, Node: cfg.Node, ProcRoot: cfg.ProcRoot}, nil
	}
	if errors.Is(nvmlErr, ErrNoDriver) {
		// Neither source is here: the one sentence that says what to do.
		return nil, ErrNoDriver
	}
	// NVML is present but failed for another reason, and there is no
	// nvidia-smi to fall back to: that reason is the news.
	return nil, fmt.Errorf("nodes: %w", nvmlErr)
}

// readComm reads procRoot/<pid>/comm, the executable's short name; "" when
// it cannot (a process in another PID namespace, a procRoot without it).
func readComm(procRoot string, pid int) string {
	if procRoot == "" {
		procRoot = "/proc"
	}
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "comm"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
