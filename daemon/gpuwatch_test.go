package daemon

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// fakeHolder records what a gpuWatch asks of the supervisor.
type fakeHolder struct{ calls []string }

func (h *fakeHolder) Hold(name, reason string) bool {
	h.calls = append(h.calls, "hold "+name+": "+reason)
	return true
}

func (h *fakeHolder) Release(name string) bool {
	h.calls = append(h.calls, "release "+name)
	return true
}

func TestGPUWatchFindsTheEnginesOfAGPU(t *testing.T) {
	gpu := func(node string, index int, uuid string) hruntime.GPU {
		return hruntime.GPU{Node: node, Index: index, UUID: uuid}
	}
	specs := []hruntime.Spec{
		{Name: "rig/gpu0", GPU: gpu("rig", 0, "GPU-a"), TensorParallel: []hruntime.GPU{gpu("rig", 1, "GPU-b")}},
		{Name: "rig/gpu2", GPU: gpu("rig", 2, "GPU-c")},
		{Name: "rig/gpu3", GPU: gpu("rig", 3, "")}, // named by index, never discovered
	}
	h := &fakeHolder{}
	w := gpuWatch{specs: specs, sup: h}
	lost := nodes.NewGPU("rig", 1)
	lost.UUID, lost.Lost, lost.Err = "GPU-b", true, "GPU is lost"
	w.lost(lost)  // the second GPU of a tensor-parallel engine
	w.found(lost) // and back
	other := nodes.NewGPU("rig", 0)
	other.UUID = "GPU-x" // index 0, but another board: no engine
	w.lost(other)
	byIndex := nodes.NewGPU("rig", 3)
	byIndex.Err = "Unknown Error"
	w.lost(byIndex)
	want := "hold rig/gpu0: GPU 1 lost: GPU is lost | release rig/gpu0 | hold rig/gpu3: GPU 3 lost: Unknown Error"
	if got := strings.Join(h.calls, " | "); got != want {
		t.Errorf("calls:\n%s\nwant:\n%s", got, want)
	}
}

func TestSelectGPUs(t *testing.T) {
	board := func(index int, uuid string, lost bool) nodes.GPU {
		g := nodes.NewGPU("rig", index)
		g.UUID, g.Name, g.Lost = uuid, "NVIDIA GeForce RTX 4090", lost
		return g
	}
	inv := nodes.Inventory{GPUs: []nodes.GPU{board(0, "GPU-a", false), board(1, "GPU-b", true), board(2, "GPU-c", false)}}
	noDriver := errors.New("NVML: libnvidia-ml.so.1 not found: is the NVIDIA driver installed? (hearth doctor)")
	cases := []struct {
		name    string
		gpus    []GPURef
		inv     nodes.Inventory
		err     error
		want    string // UUIDs or indices picked
		wantErr string
	}{
		{name: "all skips the lost one", inv: inv, want: "GPU-a GPU-c"},
		{name: "by index", gpus: []GPURef{{Index: 2}}, inv: inv, want: "GPU-c"},
		{name: "by UUID", gpus: []GPURef{{Index: 0, UUID: "GPU-c"}}, inv: inv, want: "GPU-c"},
		{name: "a lost GPU named is kept, to be held", gpus: []GPURef{{Index: 1}}, inv: inv, want: "GPU-b"},
		{name: "no such GPU", gpus: []GPURef{{Index: 7}}, inv: inv, wantErr: "no GPU 7 (it has 0 NVIDIA GeForce RTX 4090, 1"},
		{name: "all without a driver", err: noDriver, wantErr: "up: --gpus all: NVML: libnvidia-ml.so.1 not found"},
		{name: "all lost", inv: nodes.Inventory{GPUs: []nodes.GPU{board(0, "GPU-a", true)}}, wantErr: "lists no GPU"},
		{name: "named without a driver: unknown sizes", gpus: []GPURef{{Index: 0}, {Index: 1}}, err: noDriver, want: "#0 #1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gpus, err := selectGPUs(Config{Node: "rig", GPUs: tc.gpus}, tc.inv, tc.err, slog.New(slog.DiscardHandler))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, g := range gpus {
				id := g.UUID
				if id == "" {
					id = "#" + string(rune('0'+g.Index))
					if g.MemoryTotal != 0 || g.Node != "rig" {
						t.Errorf("undiscovered GPU %+v has a size or lacks the node", g)
					}
				}
				got = append(got, id)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("picked %v, want %s", got, tc.want)
			}
		})
	}
}
