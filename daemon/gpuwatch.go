package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// gpuSourceOf is where hearth up reads its GPUs: the simulated list, or
// this machine's driver. A driver that cannot be reached is not an error
// here: the source answers every reading with why, and selectGPUs decides
// whether the daemon can do without. The source may be an io.Closer.
func gpuSourceOf(cfg Config) (nodes.Discoverer, error) {
	if cfg.gpuSource != nil {
		return cfg.gpuSource, nil
	}
	node := cfg.Node
	if cfg.Sim != "" && cfg.EngineRuntime != "docker" {
		// Containers are named after their node, so simulated engines in
		// containers keep it (two daemons sharing a Docker Engine must not
		// share names); in-process ones are the "sim" node.
		node = "sim"
	}
	d, err := Discoverer(node, cfg.Sim)
	if err != nil {
		return nil, fmt.Errorf("%w: --sim: %v", ErrUsage, err)
	}
	return d, nil
}

// Discoverer reads the GPUs of node: the simulated list sim (an error
// when it does not parse), else this machine's driver. A driver that
// cannot be reached is not an error here: the discoverer answers every
// reading with why, and its reader decides whether it can do without.
func Discoverer(node, sim string) (nodes.Discoverer, error) {
	d, err := nodes.NewDiscoverer(discoverConfig(node, sim, hostWSL()))
	switch {
	case err != nil && sim != "":
		return nil, err
	case err != nil:
		return failedDiscovery{err}, nil
	}
	return d, nil
}

// failedDiscovery is a machine whose GPUs cannot be read, and why.
type failedDiscovery struct{ err error }

func (f failedDiscovery) Discover(context.Context) (nodes.Inventory, error) {
	return nodes.Inventory{}, f.err
}

// selectGPUs picks the GPUs named by --gpus from what discovery read, or
// every GPU that is not lost when none are named. GPUs named while
// discovery failed are served with unknown sizes (the engines' own
// defaults), after a warning: the engine finds out for itself.
func selectGPUs(cfg Config, inv nodes.Inventory, discoverErr error, log *slog.Logger) ([]nodes.GPU, error) {
	if cfg.Sim != "" {
		return inv.GPUs, discoverErr
	}
	if len(cfg.GPUs) == 0 {
		if discoverErr != nil {
			return nil, fmt.Errorf("up: --gpus all: %w", discoverErr)
		}
		var gpus []nodes.GPU
		for _, g := range inv.GPUs {
			if g.Lost {
				log.Warn("skipping a lost GPU", "gpu", g.Index, "uuid", g.UUID, "err", g.Err)
				continue
			}
			gpus = append(gpus, g)
		}
		if len(gpus) == 0 {
			return nil, fmt.Errorf("up: %w", nodes.ErrNoGPU)
		}
		return gpus, nil
	}
	if discoverErr != nil {
		log.Warn("GPU discovery failed: serving the GPUs named by --gpus with unknown sizes", "err", discoverErr)
		gpus := make([]nodes.GPU, len(cfg.GPUs))
		for i, ref := range cfg.GPUs {
			gpus[i] = nodes.NewGPU(cfg.Node, ref.Index)
			gpus[i].UUID, gpus[i].Name = ref.UUID, "GPU "+strconv.Itoa(ref.Index)
		}
		return gpus, nil
	}
	gpus := make([]nodes.GPU, 0, len(cfg.GPUs))
	for _, ref := range cfg.GPUs {
		i := -1
		for j, g := range inv.GPUs {
			if (ref.UUID != "" && g.UUID == ref.UUID) || (ref.UUID == "" && g.Index == ref.Index) {
				i = j
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("%w: --gpus: this machine has no GPU %s (it has %s: hearth gpus)", ErrUsage, ref, gpuNames(inv.GPUs))
		}
		gpus = append(gpus, inv.GPUs[i])
	}
	return gpus, nil
}

func (r GPURef) String() string {
	if r.UUID != "" {
		return r.UUID
	}
	return strconv.Itoa(r.Index)
}

func gpuNames(gpus []nodes.GPU) string {
	if len(gpus) == 0 {
		return "none"
	}
	names := make([]string, len(gpus))
	for i, g := range gpus {
		names[i] = fmt.Sprintf("%d %s", g.Index, g.Name)
	}
	return strings.Join(names, ", ")
}

// gpuWatch stops the engines of a GPU that is lost and starts them again
// when it returns. Stopping an engine takes it out of the router too: the
// supervisor detaches it.
type gpuWatch struct {
	specs []hruntime.Spec
	sup   interface {
		Hold(name, reason string) bool
		Release(name string) bool
	}
	// stayHeld, when set, names the engines a GPU's return leaves
	// stopped: those of models served on demand that were not resident,
	// which load on their next request.
	stayHeld func(name string) bool
}

func (w gpuWatch) lost(g nodes.GPU) {
	for _, name := range w.enginesOn(g) {
		w.sup.Hold(name, fmt.Sprintf("GPU %d lost: %s", g.Index, g.Err))
	}
}

func (w gpuWatch) found(g nodes.GPU) {
	for _, name := range w.enginesOn(g) {
		if w.stayHeld != nil && w.stayHeld(name) {
			continue
		}
		w.sup.Release(name)
	}
}

// enginesOn names the engines that run on g, any of their GPUs.
func (w gpuWatch) enginesOn(g nodes.GPU) []string {
	var names []string
	for _, s := range w.specs {
		for _, sg := range s.GPUs() {
			if sameGPU(sg, g) {
				names = append(names, s.Name)
				break
			}
		}
	}
	return names
}

// sameGPU says whether an engine's GPU is the one discovery read: by UUID
// when both have one, else by node and index.
func sameGPU(sg hruntime.GPU, g nodes.GPU) bool {
	if sg.UUID != "" && g.UUID != "" {
		return sg.UUID == g.UUID
	}
	return sg.Node == g.Node && sg.Index == g.Index
}

// gpuIn returns a reading's facts of an engine's GPU, or what the
// engine's spec knows of it when discovery never read it (GPUs named
// while discovery failed).
func gpuIn(inv nodes.Inventory, sg hruntime.GPU) nodes.GPU {
	for _, g := range inv.GPUs {
		if sameGPU(sg, g) {
			return g
		}
	}
	g := nodes.NewGPU(sg.Node, sg.Index)
	g.UUID, g.Name, g.Kind = sg.UUID, sg.Name, sg.Kind
	return g
}
