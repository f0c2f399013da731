package daemon

import (
	"context"
	"sync"

	"github.com/hearth-llm/hearth/installer/wsl"
	"github.com/hearth-llm/hearth/nodes"
)

// hostWSL is what this machine is of WSL2, read once: the kernel does not
// change under a running process, nor does WSL's networking mode without a
// wsl --shutdown.
var hostWSL = sync.OnceValue(func() wsl.Facts { return wsl.Detect(context.Background(), "/") })

// discoverConfig is the GPU discovery of node (sim: simulated GPUs). On
// WSL2 NVML and nvidia-smi are the Windows driver's, under
// /usr/lib/wsl/lib, opened by path: a service's loader path need not
// include it.
func discoverConfig(node, sim string, host wsl.Facts) nodes.DiscoverConfig {
	cfg := nodes.DiscoverConfig{Node: node, Sim: sim}
	if sim == "" && host.WSL2 {
		cfg.NVMLPath, cfg.SMIPath = host.NVMLPath, host.SMIPath
	}
	return cfg
}
