package nodes

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// GPU is one GPU as discovery sees it. It is a plain value so that everything
// downstream can be tested without hardware.
type GPU struct {
	Node  string // host name of the machine the GPU is in
	Index int    // device index on that machine (CUDA_VISIBLE_DEVICES order)
	UUID  string
	Name  string // marketing name, e.g. "NVIDIA GeForce RTX 4090"
	// Kind is Hearth's short name for the model of GPU ("rtx4090"), the key
	// the simulated engine's timing model knows it by; empty when unknown.
	Kind string

	MemoryTotal uint64 // bytes
	MemoryUsed  uint64 // bytes; 0 when the source cannot tell

	// UtilizationPct and TemperatureC are negative when the source cannot
	// tell (a simulated GPU, or a driver that does not report them).
	UtilizationPct int
	TemperatureC   int

	Simulated bool
}

// gpuKind describes a GPU model Hearth knows by name.
type gpuKind struct {
	kind    string
	name    string
	memory  uint64
	aliases []string
}

const gib = 1 << 30

// knownKinds are the GPUs a simulated list can name. Memory sizes are the
// boards' published capacities.
var knownKinds = []gpuKind{
	{"rtx4090", "NVIDIA GeForce RTX 4090", 24 * gib, []string{"4090"}},
	{"rtx3090", "NVIDIA GeForce RTX 3090", 24 * gib, []string{"3090"}},
	{"h100", "NVIDIA H100 80GB HBM3", 80 * gib, []string{"h100-80gb"}},
}

// ErrBadSimSpec is returned for a simulated GPU list that cannot be parsed.
var ErrBadSimSpec = errors.New("bad simulated GPU list")

// ParseSimSpec turns a simulated GPU list such as "2x4090" or
// "1x4090+2x3090" into GPUs on the node "sim". A term without a count
// ("4090") means one GPU. GPU kinds are matched case-insensitively, with or
// without the "rtx" prefix.
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
		k, ok := lookupKind(term)
		if !ok {
			return nil, fmt.Errorf("%w: unknown GPU %q (known: %s)", ErrBadSimSpec, term, strings.Join(KnownKinds(), ", "))
		}
		for range count {
			gpus = append(gpus, GPU{
				Node:           "sim",
				Index:          len(gpus),
				UUID:           fmt.Sprintf("GPU-sim-%s-%d", k.kind, len(gpus)),
				Name:           k.name,
				Kind:           k.kind,
				MemoryTotal:    k.memory,
				UtilizationPct: -1,
				TemperatureC:   -1,
				Simulated:      true,
			})
		}
	}
	return gpus, nil
}

// KnownKinds lists the GPU kinds a simulated list may name.
func KnownKinds() []string {
	out := make([]string, len(knownKinds))
	for i, k := range knownKinds {
		out[i] = k.kind
	}
	return out
}

func lookupKind(s string) (gpuKind, bool) {
	for _, k := range knownKinds {
		if s == k.kind || strings.TrimPrefix(k.kind, "rtx") == s {
			return k, true
		}
		for _, a := range k.aliases {
			if s == a {
				return k, true
			}
		}
	}
	return gpuKind{}, false
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
