package console

import "testing"

// TestGPULabel: a card names every GPU of a tensor-parallel engine.
func TestGPULabel(t *testing.T) {
	for _, tc := range []struct {
		e    Engine
		want string
	}{
		{Engine{GPU: "NVIDIA GeForce RTX 4090"}, "NVIDIA GeForce RTX 4090"},
		{Engine{GPU: "NVIDIA GeForce RTX 4090", GPUCount: 1}, "NVIDIA GeForce RTX 4090"},
		{Engine{GPU: "NVIDIA GeForce RTX 4090", GPUCount: 2}, "2× NVIDIA GeForce RTX 4090"},
		{Engine{GPUCount: 4}, "4× Unknown GPU"},
	} {
		if got := gpuCardVM(Config{}, tc.e, workerView{}).GPU; got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
}
