package sim

import (
	"testing"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

// TestConfigOfTensorParallelOverKinds: an engine over a 4090 and a 3090 is
// simulated as the 3090, the rank that paces it; one over one kind as that
// kind.
func TestConfigOfTensorParallelOverKinds(t *testing.T) {
	for _, tc := range []struct {
		first string
		rest  []string
		want  string
	}{
		{"rtx4090", nil, "rtx4090"},
		{"rtx4090", []string{"rtx4090"}, "rtx4090"},
		{"rtx4090", []string{"rtx3090"}, "rtx3090"},
		{"rtx3090", []string{"rtx4090"}, "rtx3090"},
		{"rtx4090", []string{"a6000"}, "rtx4090"}, // none paces on every figure: the first
	} {
		spec := hruntime.Spec{GPU: hruntime.GPU{Kind: tc.first}}
		for i, k := range tc.rest {
			spec.TensorParallel = append(spec.TensorParallel, hruntime.GPU{Index: i + 1, Kind: k})
		}
		cfg := ConfigOf(spec)
		if cfg.GPU != tc.want || cfg.TP != 1+len(tc.rest) {
			t.Errorf("%s + %v: GPU %q, TP %d; want %q, TP %d", tc.first, tc.rest, cfg.GPU, cfg.TP, tc.want, 1+len(tc.rest))
		}
	}
}
