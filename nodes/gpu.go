package nodes

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hearth-llm/hearth/catalog"
)

// GPU is one GPU as discovery sees it. It is a plain value so that everything
// downstream can be tested without hardware.
//
// A field the board or the source cannot report is unknown, never zero:
// integers are then negative and the Known flags false. NewGPU returns a GPU
// with everything unknown.
type GPU struct {
	Node  string // host name of the machine the GPU is in
	Index int    // device index on that machine (CUDA_VISIBLE_DEVICES order)
	UUID  string
	Name  string // marketing name, e.g. "NVIDIA GeForce RTX 4090"
	// Kind is the catalog's short name for the model of GPU ("rtx4090"),
	// the key the simulated engine's timing model knows it by;
	// catalog.Unknown for a board the catalog does not list.
	Kind string

	// MemoryTotal is the board's memory in bytes, 0 when unknown. Used and
	// free are only meaningful when MemoryUsageKnown.
	MemoryTotal      uint64
	MemoryUsed       uint64
	MemoryFree       uint64
	MemoryUsageKnown bool

	// UtilizationPct, TemperatureC, PowerDrawW and PowerLimitW are negative
	// when unknown (a simulated GPU, a board that does not report them).
	UtilizationPct int
	TemperatureC   int
	PowerDrawW     float64
	PowerLimitW    float64

	// PCIe link generation and lane width, current and the most the slot
	// and board allow; negative when unknown.
	PCIeGenCurrent, PCIeGenMax     int
	PCIeWidthCurrent, PCIeWidthMax int

	// ComputeMajor and ComputeMinor are the CUDA compute capability (8.9
	// for Ada); negative when unknown.
	ComputeMajor, ComputeMinor int

	// Processes are the programs holding memory on the GPU, Hearth's
	// engines included; meaningful only when ProcessesKnown.
	Processes      []Process
	ProcessesKnown bool

	// Lost is set when the driver answers that the GPU has fallen off the
	// bus or needs a reset; Err then holds the driver's words. Err may also
	// hold a lesser error reading one GPU while the others read fine.
	Lost bool
	Err  string

	Simulated bool
}

// Process is one program holding memory on a GPU.
type Process struct {
	PID       int
	UsedBytes uint64 // 0 when the driver does not say (some Windows/WSL setups)
	Name      string // executable name where /proc or the driver tells it, else ""
}

// NewGPU returns the GPU at index on node with every measurement unknown.
func NewGPU(node string, index int) GPU {
	return GPU{
		Node: node, Index: index, Kind: catalog.Unknown,
		UtilizationPct: -1, TemperatureC: -1, PowerDrawW: -1, PowerLimitW: -1,
		PCIeGenCurrent: -1, PCIeGenMax: -1, PCIeWidthCurrent: -1, PCIeWidthMax: -1,
		ComputeMajor: -1, ComputeMinor: -1,
	}
}

// PlannerUse is the GPU as the planner sees it: its board, sized by the
// memory the driver reports, and the memory other programs use
// (catalog.GPUUseOf).
func (g GPU) PlannerUse() catalog.GPUUse {
	return catalog.GPUUseOf(g.Kind, g.Name, g.MemoryTotal, g.MemoryUsed)
}

// PlannerUses is PlannerUse of each of gpus.
func PlannerUses(gpus []GPU) []catalog.GPUUse {
	uses := make([]catalog.GPUUse, len(gpus))
	for i, g := range gpus {
		uses[i] = g.PlannerUse()
	}
	return uses
}

// Copy returns g with its own Processes slice.
func (g GPU) Copy() GPU {
	g.Processes = append([]Process(nil), g.Processes...)
	return g
}

// ErrBadSimSpec is returned for a simulated GPU list that cannot be parsed.
var ErrBadSimSpec = errors.New("bad simulated GPU list")

// ParseSimSpec turns a simulated GPU list such as "2x4090" or
// "1x4090+2x3090" into GPUs on the node "sim". A term without a count
// ("4090") means one GPU. A term names a catalog kind or one of its aliases,
// in any case (catalog.LookupGPU).
func ParseSimSpec(spec string) ([]GPU, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, fmt.Errorf("%w: empty", ErrBadSimSpec)
	}
	var gpus []GPU
	for _, term := range strings.Split(spec, "+") {
		term = strings.ToLower(strings.TrimSpace(term))
		count := 1
		if n, kind, ok := strings.Cut(term, "x"); ok && n != "" && isDigits(n) {
			c, err := strconv.Atoi(n)
			if err != nil || c < 1 || c > 64 {
				return nil, fmt.Errorf("%w: %q: count must be 1 to 64", ErrBadSimSpec, term)
			}
			count, term = c, kind
		}
		k, ok := catalog.LookupGPU(term)
		if !ok {
			return nil, fmt.Errorf("%w: unknown GPU %q (known: %s)", ErrBadSimSpec, term, strings.Join(catalog.GPUKinds(), ", "))
		}
		for range count {
			g := NewGPU("sim", len(gpus))
			g.UUID = fmt.Sprintf("GPU-sim-%s-%d", k.Kind, len(gpus))
			g.Name, g.Kind, g.MemoryTotal = k.Name, k.Kind, k.MemoryBytes
			g.Simulated = true
			gpus = append(gpus, g)
		}
	}
	return gpus, nil
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// ComputeCapability is the CUDA compute capability as people write it
// ("8.9"); "" when unknown.
func (g GPU) ComputeCapability() string {
	if g.ComputeMajor < 0 || g.ComputeMinor < 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", g.ComputeMajor, g.ComputeMinor)
}
