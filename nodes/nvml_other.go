//go:build !(linux && cgo)

package nodes

import "fmt"

// openNVML reports that this build has no NVML: it needs cgo on Linux, so
// NewDiscoverer goes on to nvidia-smi.
func openNVML(DiscoverConfig) (Discoverer, error) {
	return nil, fmt.Errorf("%w (nvml: not compiled into this build, which needs cgo on linux)", ErrNoDriver)
}
