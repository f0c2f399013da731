package daemon_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// TestLostGPUStopsItsEngine: a GPU the driver loses has its engine
// stopped, out of the router, with the driver's words; requests go to the
// other GPU; when the GPU returns its engine starts again and serves.
func TestLostGPUStopsItsEngine(t *testing.T) {
	gpus := newFlakyGPUs(t, "2x4090")
	// Round robin: with both GPUs in the router, requests take turns.
	baseURL, _ := serveTestUp(t, upConfig(t, "--policy", router.PolicyRoundRobin), daemon.WithGPUSource(gpus), daemon.WithGPUInterval(20*time.Millisecond), daemon.WithConsoleTiming(50*time.Millisecond, 0))

	gpus.setLost(1, true)
	e := waitEngine(t, baseURL, "sim/gpu1", 30*time.Second, func(e adminapi.Engine) bool { return e.State == "stopped" })
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
	waitEngine(t, baseURL, "sim/gpu1", 30*time.Second, func(e adminapi.Engine) bool { return e.State == "ready" })
	served := map[string]int{}
	for range 4 {
		served[workerOf(t, baseURL)]++
	}
	if served["sim/gpu0"] != 2 || served["sim/gpu1"] != 2 {
		t.Errorf("after gpu1 came back, four requests went to %v, want two each", served)
	}
}

// TestPlanCountsOnlyFreeMemory: a 4090 where a game holds 2 GiB gets a
// smaller memory share and KV cache than an idle one, and a note that says
// why; the idle one gets no note.
func TestPlanCountsOnlyFreeMemory(t *testing.T) {
	cfg := upConfig(t, "--engine-runtime", "docker", "--engine", "vllm", "--node", "rig", "--speedup", "1")
	src, err := daemon.Discoverer(cfg.Node, cfg.Sim)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := src.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	gpus := inv.GPUs
	gpus[1].MemoryUsed, gpus[1].MemoryFree, gpus[1].MemoryUsageKnown = 2<<30, gpus[1].MemoryTotal-2<<30, true
	gpus[1].Processes, gpus[1].ProcessesKnown = []nodes.Process{{PID: 4242, UsedBytes: 2 << 30, Name: "game.exe"}}, true
	specs, notes, err := daemon.Plan(context.Background(), cfg, daemon.WithGPUSource(fixedGPUs{inv}))
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

// TestPlanTellsVLLMTheStepBudget: a real vLLM engine is told the step
// budget of its layout, the one the plan sized its activations for, not
// left to pick its own (2,048 on a 4090): the agent layout's, or the
// default for one engine per GPU. The simulated engines are told the same.
func TestPlanTellsVLLMTheStepBudget(t *testing.T) {
	for _, layout := range []struct {
		name   string
		budget int
	}{{daemon.LayoutPerGPU, catalog.DefaultMaxBatchedTokens}, {daemon.LayoutAgent, catalog.AgentMaxBatchedTokens}} {
		for _, flags := range [][]string{{"--engine-runtime", "docker", "--engine", "vllm"}, {"--engine-runtime", "process"}} {
			cfg := upConfig(t, append(flags, "--node", "rig", "--layout", layout.name)...)
			src, err := daemon.Discoverer(cfg.Node, cfg.Sim)
			if err != nil {
				t.Fatal(err)
			}
			inv, err := src.Discover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			specs, _, err := daemon.Plan(context.Background(), cfg, daemon.WithGPUSource(fixedGPUs{inv}))
			if err != nil {
				t.Fatal(err)
			}
			want := "--max-num-batched-tokens " + strconv.Itoa(layout.budget) + " "
			for _, s := range specs {
				args := strings.Join(hruntime.EngineArgs(s, hruntime.Ports{Host: "127.0.0.1"}, "hearth"), " ") + " "
				if s.MaxBatchedTokens != layout.budget || !strings.Contains(args, want) {
					t.Errorf("--layout %s, %s engine %s: budget %d, command line %s; want %q", layout.name, flags[1], s.Name, s.MaxBatchedTokens, args, want)
				}
			}
		}
	}
}

func newFlakyGPUs(t *testing.T, spec string) *flakyGPUs {
	gpus, err := nodes.ParseSimSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	return &flakyGPUs{gpus: gpus, lost: map[int]bool{}}
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

// flakyGPUs is a machine whose GPUs the test can lose and bring back, as
// a driver reports ERROR_GPU_IS_LOST and, after a reset, the GPU again.
type flakyGPUs struct {
	gpus []nodes.GPU
	mu   sync.Mutex
	lost map[int]bool
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

// fixedGPUs reads the same GPUs every time.
type fixedGPUs struct{ inv nodes.Inventory }

func (f fixedGPUs) Discover(context.Context) (nodes.Inventory, error) { return f.inv, nil }
