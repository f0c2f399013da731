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
type GPU struct {
	Node  string // host name of the machine the GPU is in
	Index int    // device index on that machine (CUDA_VISIBLE_DEVICES order)
	UUID  string
	Name  string // marketing name, e.g. "NVIDIA GeForce RTX 4090"
	// Kind is the catalog's short name for the model of GPU ("rtx4090"),
	// the key the simulated engine's timing model knows it by;
	// catalog.Unknown for a board the catalog does not list.
	Kind string

	MemoryTotal uint64 // bytes
	MemoryUsed  uint64 // bytes; 0 when the source cannot tell

	// UtilizationPct and TemperatureC are negative when the source cannot
	// tell (a simulated GPU, or a driver that does not report them).
	UtilizationPct int
	TemperatureC   int

	Simulated bool
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
			gpus = append(gpus, GPU{
				Node:           "sim",
				Index:          len(gpus),
				UUID:           fmt.Sprintf("GPU-sim-%s-%d", k.Kind, len(gpus)),
				Name:           k.Name,
				Kind:           k.Kind,
				MemoryTotal:    k.MemoryBytes,
				UtilizationPct: -1,
				TemperatureC:   -1,
				Simulated:      true,
			})
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
