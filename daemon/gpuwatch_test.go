package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// flakyGPUs is a machine whose GPUs the test can lose and bring back, as
// a driver reports ERROR_GPU_IS_LOST and, after a reset, the GPU again.
type flakyGPUs struct {
	gpus []nodes.GPU
	mu   sync.Mutex
	lost map[int]bool
}

func newFlakyGPUs(t *testing.T, spec string) *flakyGPUs {
	gpus, err := nodes.ParseSimSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	return &flakyGPUs{gpus: gpus, lost: map[int]bool{}}
}

func (f *flakyGPUs) setLost(index int, lost bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lost[index] = lost
}

func (f *flakyGPUs) Discover(context.Context) (nodes.Inventory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	inv := nodes.Inventory{Host: nodes.Host{Node: "sim", Source: "test"}}
	for _, g := range f.gpus {
		if f.lost[g.Index] {
			l := nodes.NewGPU(g.Node, g.Index)
			l.UUID, l.Lost, l.Err = g.UUID, true, "GPU is lost"
			g = l
		}
		inv.GPUs = append(inv.GPUs, g)
	}
	return inv.Copy(), nil
}

// TestLostGPUStopsItsEngine: a GPU the driver loses has its engine
// stopped, out of the router, with the driver's words; requests go to the
// other GPU; when the GPU returns its engine starts again and serves.
func TestLostGPUStopsItsEngine(t *testing.T) {
	gpus := newFlakyGPUs(t, "2x4090")
	// Round robin: with both GPUs in the router, requests take turns.
	baseURL, _ := serveTestUp(t, []string{"--sim", "2x4090", "--speedup", "100", "--policy", "round_robin", "--data-dir", t.TempDir()}, func(cfg *upConfig) {
		cfg.gpuSource, cfg.gpuInterval, cfg.consoleInterval = gpus, 20*time.Millisecond, 50*time.Millisecond
	})

	gpus.setLost(1, true)
	e := waitEngine(t, baseURL, "sim/gpu1", 30*time.Second, func(e engineJSON) bool { return e.State == "stopped" })
	if !strings.Contains(e.LastError, "GPU 1 lost: GPU is lost") {
		t.Errorf("stopped engine's error %q, want the driver's words", e.LastError)
	}
	for range 6 {
		if w := workerOf(t, baseURL); w != "sim/gpu0" {
			t.Fatalf("a request went to %q while gpu1 is lost", w)
		}
	}
	waitPage(t, baseURL+"/console/", "GPU lost: GPU is lost")
	_, metrics, _ := get(t, http.DefaultClient, baseURL+"/metrics")
	if !strings.Contains(metrics, `hearth_gpu_lost{gpu="1",name="",node="sim",uuid="GPU-sim-rtx4090-1"} 1`) {
		t.Errorf("/metrics does not show gpu1 lost:\n%s", grepLines(metrics, "hearth_gpu_lost"))
	}

	gpus.setLost(1, false)
	waitEngine(t, baseURL, "sim/gpu1", 30*time.Second, func(e engineJSON) bool { return e.State == "ready" })
	served := map[string]int{}
	for range 4 {
		served[workerOf(t, baseURL)]++
	}
	if served["sim/gpu0"] != 2 || served["sim/gpu1"] != 2 {
		t.Errorf("after gpu1 came back, four requests went to %v, want two each", served)
	}
}

// waitPage polls a page until it shows want; the bound only stops a hang.
func waitPage(t *testing.T, url, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body, _ := get(t, http.DefaultClient, url)
		if strings.Contains(body, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed %q", url, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// workerOf sends one small chat request and says which engine served it.
func workerOf(t *testing.T, baseURL string) string {
	t.Helper()
	body := `{"model":"hearth","max_tokens":4,"messages":[{"role":"user","content":"` + time.Now().String() + `"}]}`
	resp, err := http.Post(baseURL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: %s", resp.Status)
	}
	return resp.Header.Get("x-hearth-worker")
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

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
		gpus    []gpuRef
		inv     nodes.Inventory
		err     error
		want    string // UUIDs or indices picked
		wantErr string
	}{
		{name: "all skips the lost one", inv: inv, want: "GPU-a GPU-c"},
		{name: "by index", gpus: []gpuRef{{index: 2}}, inv: inv, want: "GPU-c"},
		{name: "by UUID", gpus: []gpuRef{{index: 0, uuid: "GPU-c"}}, inv: inv, want: "GPU-c"},
		{name: "a lost GPU named is kept, to be held", gpus: []gpuRef{{index: 1}}, inv: inv, want: "GPU-b"},
		{name: "no such GPU", gpus: []gpuRef{{index: 7}}, inv: inv, wantErr: "no GPU 7 (it has 0 NVIDIA GeForce RTX 4090, 1"},
		{name: "all without a driver", err: noDriver, wantErr: "up: --gpus all: NVML: libnvidia-ml.so.1 not found"},
		{name: "all lost", inv: nodes.Inventory{GPUs: []nodes.GPU{board(0, "GPU-a", true)}}, wantErr: "lists no GPU"},
		{name: "named without a driver: unknown sizes", gpus: []gpuRef{{index: 0}, {index: 1}}, err: noDriver, want: "#0 #1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gpus, err := selectGPUs(upConfig{node: "rig", gpus: tc.gpus}, tc.inv, tc.err, slog.New(slog.DiscardHandler))
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

// TestPlanCountsOnlyFreeMemory: a 4090 where a game holds 2 GiB gets a
// smaller memory share and KV cache than an idle one, and a note that says
// why; the idle one gets no note.
func TestPlanCountsOnlyFreeMemory(t *testing.T) {
	env := &environment{stderr: io.Discard, getenv: func(string) string { return "" }}
	cfg, err := parseUpFlags(env, []string{"--sim", "2x4090", "--engine-runtime", "docker", "--engine", "vllm", "--node", "rig"})
	if err != nil {
		t.Fatal(err)
	}
	gpus := plannedGPUs(t, cfg)
	gpus[1].MemoryUsed, gpus[1].MemoryFree, gpus[1].MemoryUsageKnown = 2<<30, gpus[1].MemoryTotal-2<<30, true
	gpus[1].Processes, gpus[1].ProcessesKnown = []nodes.Process{{PID: 4242, UsedBytes: 2 << 30, Name: "game.exe"}}, true
	specs, notes, err := planEngines(cfg, gpus)
	if err != nil {
		t.Fatal(err)
	}
	idle, busy := specs[0], specs[1]
	if !(busy.GPUMemoryUtilization < idle.GPUMemoryUtilization) || busy.Estimate.GPUBlocks >= idle.Estimate.GPUBlocks {
		t.Errorf("busy GPU: fraction %.3f, %d blocks; idle: %.3f, %d blocks: want less on the busy one",
			busy.GPUMemoryUtilization, busy.Estimate.GPUBlocks, idle.GPUMemoryUtilization, idle.Estimate.GPUBlocks)
	}
	if note := notes[busy.Name]; !strings.Contains(note, "other programs hold 2.0 GiB of this GPU: KV cache for ") {
		t.Errorf("busy GPU's note %q", note)
	}
	t.Logf("busy GPU: %s", notes[busy.Name])
	if note, ok := notes[idle.Name]; ok {
		t.Errorf("idle GPU has a note: %q", note)
	}
}
