package daemon

import (
	"slices"
	"testing"

	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// TestTensorParallelEngineIsOneEngine: the engines API and the console show
// an engine over two GPUs as one engine naming both.
func TestTensorParallelEngineIsOneEngine(t *testing.T) {
	st := hruntime.Status{Name: "rig/gpu0", GPU: hruntime.GPU{Index: 0}, TensorParallel: []hruntime.GPU{{Index: 1}}}
	if got := adminEngineOf(st).GPUs; !slices.Equal(got, []int{0, 1}) {
		t.Errorf("engines API GPUs %v, want [0 1]", got)
	}
	if got := adminEngineOf(hruntime.Status{GPU: hruntime.GPU{Index: 3}}).GPUs; got != nil {
		t.Errorf("one GPU: GPUs %v, want none", got)
	}
	if got := engineOf(st, nodes.GPU{Name: "NVIDIA GeForce RTX 4090"}, hruntime.Stats{}, nil, router.WorkerLoad{}).GPUCount; got != 2 {
		t.Errorf("console GPU count %d, want 2", got)
	}
}
