package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/daemon"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker/dockertest"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// dockerUp runs hearth up --sim SPEC --engine-runtime docker on a node of
// the test's own, with the simulated image of the flavour built for this
// test run.
func dockerUp(t *testing.T, cli *client.Client, node, sim string, flavor hruntime.Kind, extra ...string) (string, func() error) {
	t.Helper()
	image := dockertest.SimImage(t, cli, flavor)
	args := append([]string{"--sim", sim, "--engine-runtime", "docker", "--engine", string(flavor), "--node", node,
		"--image", image, "--speedup", "50", "--stop-timeout", "10s", "--data-dir", t.TempDir()}, extra...)
	return serveTestUp(t, args, daemon.WithBackoff(hruntime.Backoff{Initial: 200 * time.Millisecond}),
		// The simulated SGLang weighs its host tier (32 GiB by default)
		// against the host memory it sees: a fixed figure, not this
		// machine's, so that the tests do not depend on the machine.
		daemon.WithSpecHook(func(s *hruntime.Spec) {
			s.Env = append(s.Env, hruntime.EnvSimMemAvailableGiB+"=256")
		}))
}

// TestDockerEnginesServeAndSurviveAKill is hearth up with two engines in
// containers: an agentic benchmark runs through them, then one container is
// killed with docker kill while 16 streams run. No client hangs, the
// streams on the dead engine end with an error, the supervisor starts a new
// container, and traffic returns to it.
func TestDockerEnginesServeAndSurviveAKill(t *testing.T) {
	cli := dockertest.Client(t)
	t.Parallel()
	node := dockertest.Node(t, cli)
	// Slow enough that 2,000-token streams still run when the kill lands.
	baseURL, stop := dockerUp(t, cli, node, "2x4090", hruntime.KindVLLM, "--speedup", "1")
	engines := listEngines(t, baseURL)
	if len(engines) != 2 {
		t.Fatalf("engines: %+v", engines)
	}
	for _, e := range engines {
		if e.State != "ready" || e.Runtime != "docker" || e.Container == "" {
			t.Fatalf("engine %+v: want a ready container", e)
		}
	}

	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	out, errOut, err := runHearth(t, "", "bench", "agentic", "--target", baseURL+"/v1", "--sessions", "4",
		"--total-sessions", "4", "--steps", "3", "--prefix-tokens", "1500", "--osl", "8", "--tool-pause", "const:10ms",
		"--json", jsonPath)
	if err != nil {
		t.Fatalf("bench: %v\n%s\n%s", err, out, errOut)
	}
	var report struct {
		Runs []struct {
			Requests, Errors int
		} `json:"runs"`
	}
	raw, _ := os.ReadFile(jsonPath)
	if err := json.Unmarshal(raw, &report); err != nil || len(report.Runs) == 0 {
		t.Fatalf("bench report: %v\n%s", err, raw)
	}
	for _, r := range report.Runs {
		if r.Requests != 12 || r.Errors != 0 {
			t.Errorf("bench run %+v: want 4 sessions x 3 turns without errors", r)
		}
	}

	victim := engines[0]
	back := killUnderLoad(t, baseURL, victim, func() error {
		_, err := cli.ContainerKill(context.Background(), victim.Container, client.ContainerKillOptions{Signal: "KILL"})
		return err
	})
	if back.Container == victim.Container {
		t.Errorf("the restarted engine runs in the killed container %s", back.Container)
	}

	if err := stop(); err != nil {
		t.Fatalf("hearth up: %v", err)
	}
	if left := dockertest.Containers(t, cli, node); len(left) != 0 {
		t.Errorf("containers left after the daemon stopped: %+v", left)
	}
}

// TestDockerKeepEnginesAndAdoption: a daemon stopped with --keep-engines
// leaves its containers running; the next one adopts them (same container
// IDs, no restart); a daemon stopped without it takes them down.
func TestDockerKeepEnginesAndAdoption(t *testing.T) {
	cli := dockertest.Client(t)
	t.Parallel()
	node := dockertest.Node(t, cli)
	baseURL, stop := dockerUp(t, cli, node, "1x4090", hruntime.KindVLLM, "--keep-engines")
	first := listEngines(t, baseURL)[0]
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	left := dockertest.Containers(t, cli, node)
	if len(left) != 1 || left[0].State != "running" || !strings.HasPrefix(left[0].ID, first.Container) {
		t.Fatalf("containers after a stop with --keep-engines: %+v, want %s running", left, first.Container)
	}

	baseURL, stop = dockerUp(t, cli, node, "1x4090", hruntime.KindVLLM)
	adopted := listEngines(t, baseURL)[0]
	if adopted.Container != first.Container || adopted.Restarts != 0 {
		t.Errorf("after the restart: %+v, want container %s adopted", adopted, first.Container)
	}
	if w, _, err := streamChat(context.Background(), baseURL, "adopted", "", 5, nil); err != nil || w != first.Name {
		t.Errorf("request to the adopted engine: %q, %v", w, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if left := dockertest.Containers(t, cli, node); len(left) != 0 {
		t.Errorf("containers left after a stop without --keep-engines: %+v", left)
	}
}

// TestDockerSGLangFlavour runs the simulated SGLang image: SGLang's command
// line, port, readiness and KV events, which the router indexes (a repeated
// prompt is routed as cached).
func TestDockerSGLangFlavour(t *testing.T) {
	cli := dockertest.Client(t)
	t.Parallel()
	node := dockertest.Node(t, cli)
	baseURL, _ := dockerUp(t, cli, node, "1x4090", hruntime.KindSGLang)
	e := listEngines(t, baseURL)[0]
	if e.Kind != "sglang" || e.State != "ready" {
		t.Fatalf("engine %+v: want a ready sglang engine", e)
	}
	prompt := strings.Repeat("The SGLang radix cache keeps pages of sixteen tokens. ", 40)
	body := `{"model":"qwen3-14b-fp8","max_tokens":4,"messages":[{"role":"user","content":"` + prompt + `"}]}`
	post := func() http.Header {
		resp, err := http.Post(baseURL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("chat: %s", resp.Status)
		}
		return resp.Header
	}
	post()
	// The engine's KV events reach the router asynchronously: the repeat is
	// routed as cached once they have.
	deadline := time.Now().Add(time.Minute)
	for {
		h := post()
		cached, _ := strconv.Atoi(h.Get("x-hearth-cached-blocks"))
		if cached > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the router never saw the SGLang engine's blocks: headers %v", h)
		}
	}
}

func TestDockerUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--engine", "vllm", "--gpus", "0", "--model", "../../etc/passwd"},
		{"--engine", "vllm", "--gpus", "0", "--model", "Qwen/Qwen3 14B"},
		{"--engine", "vllm", "--gpus", "0", "--model", "a/b/c"},
		{"--engine", "vllm", "--gpus", "0", "--gpu-runtime", "amd"},
		{"--sim", "1x4090", "--keep-engines"},
		{"--sim", "1x4090", "--engine", "sglang"},
		{"--engine", "tgi", "--gpus", "0"},
		{"--engine", "vllm", "--gpus", "all,0"},
		{"--engine", "vllm", "--gpus", "0,0"},
	} {
		_, err := parseUpFlags(&environment{stderr: io.Discard, getenv: func(string) string { return "" }}, args)
		if err == nil {
			t.Errorf("hearth up %q: no error", args)
		}
	}
}

// TestPlanTensorParallelEngines: --tp 2 over four GPUs is two engines of two
// GPUs each, with vLLM's tensor-parallel flag; three GPUs do not divide.
func TestPlanTensorParallelEngines(t *testing.T) {
	env := &environment{stderr: io.Discard, getenv: func(string) string { return "" }}
	cfg, err := parseUpFlags(env, []string{"--engine", "vllm", "--gpus", "0,1,2,3", "--tp", "2", "--node", "rig"})
	if err != nil {
		t.Fatal(err)
	}
	specs, _, err := daemon.Plan(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[1].Name != "rig/gpu2" || specs[1].GPUIDs() != "2,3" {
		t.Fatalf("specs: %+v", specs)
	}
	args := strings.Join(hruntime.KindVLLM.Descriptor().Args(specs[0], hruntime.Ports{}), " ")
	if !strings.Contains(args, "--tensor-parallel-size 2") {
		t.Errorf("vLLM args lack the TP size: %s", args)
	}
	cfg.GPUs = cfg.GPUs[:3]
	if _, _, err := daemon.Plan(context.Background(), cfg); err == nil {
		t.Error("three GPUs at --tp 2: no error")
	}
}

// TestDockerEngineOutOfMemoryIsDiagnosed: a container that dies at start
// with CUDA's out-of-memory error is given up on after five tries, and the
// engines API says why and what to do.
func TestDockerEngineOutOfMemoryIsDiagnosed(t *testing.T) {
	cli := dockertest.Client(t)
	t.Parallel()
	node := dockertest.Node(t, cli)
	baseURL, _ := dockerUp(t, cli, node, "1x4090", hruntime.KindVLLM,
		"--engine-arg=--simulate-failure", "--engine-arg=oom")
	e := listEngines(t, baseURL)[0]
	if e.State != "failed" || e.Cause != "out_of_memory" || !strings.Contains(e.LastError, "--max-model-len") {
		t.Fatalf("engine %+v: want failed, diagnosed out of memory with the fix", e)
	}
	if left := dockertest.Containers(t, cli, node); len(left) > 1 {
		t.Errorf("failed starts left %d containers behind: %+v", len(left), left)
	}
}

// TestRealEnginesGetThePlan: engines that are not simulated in-process get
// the plan's memory fraction (each engine's own flag) and context, and a
// model that does not fit stops hearth up with the plan's sentence.
func TestRealEnginesGetThePlan(t *testing.T) {
	env := &environment{stderr: io.Discard, getenv: func(string) string { return "" }}
	for _, engine := range []string{"vllm", "sglang"} {
		cfg, err := parseUpFlags(env, []string{"--sim", "1x4090", "--engine-runtime", "docker", "--engine", engine})
		if err != nil {
			t.Fatal(err)
		}
		specs, _, err := daemon.Plan(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		s := specs[0]
		if s.Model != "qwen3-14b-fp8" || s.ModelPath != "Qwen/Qwen3-14B-FP8" || !(s.GPUMemoryUtilization > 0.5 && s.GPUMemoryUtilization <= 1) || s.MaxModelLen <= 16384 {
			t.Errorf("%s engine: model %s (%s), fraction %v, context %d", engine, s.Model, s.ModelPath, s.GPUMemoryUtilization, s.MaxModelLen)
		}
		// The simulated engine sizes its KV from the same fraction as the
		// real one would: the context the plan chose fits it.
		if s.Estimate.GPUBlocks*s.Estimate.BlockSize < s.MaxModelLen {
			t.Errorf("%s engine: the plan's context %d exceeds the KV cache of %d blocks", engine, s.MaxModelLen, s.Estimate.GPUBlocks)
		}
	}
	// One engine per GPU: the plan's own sentence (the agent layout says
	// what would fit before the plan runs).
	cfg, err := parseUpFlags(env, []string{"--sim", "1x4090", "--engine-runtime", "docker", "--model", "Qwen/Qwen3-32B-FP8", "--layout", "per-gpu"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := daemon.Plan(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "try qwen3-14b-fp8, or --tp 2") {
		t.Errorf("32B on a 4090: %v, want the plan's sentence", err)
	}
}

// TestDockerNodeStoreSurvivesEngineRestarts: SGLang-flavoured engines in
// containers write their HiCache file tier into the node store, which each
// container mounts; both containers are killed with docker kill and
// restarted by the supervisor, and the next turn of a session loads its
// prefix from the store instead of recomputing it.
func TestDockerNodeStoreSurvivesEngineRestarts(t *testing.T) {
	cli := dockertest.Client(t)
	t.Parallel()
	node := dockertest.Node(t, cli)
	store := filepath.Join(t.TempDir(), "kvstore")
	baseURL, _ := dockerUp(t, cli, node, "2x4090", hruntime.KindSGLang, "--kvbm", "ram+ssd", "--kv-store-dir", store, "--kv-store-size", "64")
	history := []string{strings.Repeat("You are a coding agent. Read the repository before you edit it. ", 300)}
	first := chatTurn(t, baseURL, history)
	if n := countBlocks(t, store); n*16 < first.prompt*9/10 {
		t.Fatalf("the store holds %d blocks after a %d-token prompt", n, first.prompt)
	}
	before := listEngines(t, baseURL)
	for _, e := range before {
		if _, err := cli.ContainerKill(context.Background(), e.Container, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range before {
		waitEngine(t, baseURL, e.Name, time.Minute, func(now adminapi.Engine) bool {
			return now.State == "ready" && now.Container != e.Container
		})
	}
	history = append(history, "I read it.", "Now fix the failing test.")
	next := chatTurn(t, baseURL, history)
	if share := float64(next.cached) / float64(first.prompt); share < 0.9 {
		t.Errorf("after both containers restarted the next turn found %d of turn 1's %d tokens cached (%.2f), want at least 0.9",
			next.cached, first.prompt, share)
	}
}

// TestPlanLayoutFlags: --tp, --kv-cache-dtype and --rope-scaling reach the
// engines: simulated ones size themselves by them, real ones get them on
// their command lines as each engine spells them.
func TestPlanLayoutFlags(t *testing.T) {
	env := &environment{stderr: io.Discard, getenv: func(string) string { return "" }}
	plan := func(args ...string) []hruntime.Spec {
		t.Helper()
		cfg, err := parseUpFlags(env, args)
		if err != nil {
			t.Fatal(err)
		}
		specs, _, err := daemon.Plan(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return specs
	}
	specs := plan("--sim", "2x4090", "--tp", "2", "--kv-cache-dtype", "fp8", "--rope-scaling")
	if len(specs) != 1 || len(specs[0].GPUs()) != 2 || specs[0].KVCacheDtype != "fp8" || specs[0].ModelOverrides == "" {
		t.Fatalf("specs: %+v", specs)
	}
	if e := specs[0].Estimate; e.MaxModelLen != 131072 || e.GPUBlocks*e.BlockSize < 2*159536-16 {
		t.Errorf("estimate: context %d, %d KV tokens; want 131,072 and twice 159,536", e.MaxModelLen, e.GPUBlocks*e.BlockSize)
	}
	if c := sim.ConfigOf(specs[0]); c.TP != 2 || c.KVCacheDtype != "fp8" {
		t.Errorf("simulated engine: TP %d, KV dtype %q", c.TP, c.KVCacheDtype)
	}
	for kind, want := range map[string][]string{
		"vllm":   {"--tensor-parallel-size 2", "--kv-cache-dtype fp8", "--hf-overrides {", "--max-model-len 131072"},
		"sglang": {"--tp-size 2", "--kv-cache-dtype fp8_e4m3", "--json-model-override-args {", "--context-length 131072"},
	} {
		specs := plan("--sim", "2x4090", "--engine-runtime", "docker", "--engine", kind, "--tp", "2", "--kv-cache-dtype", "fp8", "--rope-scaling")
		args := strings.Join(hruntime.Kind(kind).Descriptor().Args(specs[0], hruntime.Ports{}), " ")
		for _, w := range want {
			if !strings.Contains(args, w) {
				t.Errorf("%s args lack %q: %s", kind, w, args)
			}
		}
	}
	// One engine per GPU, the layout before the one for agents, keeps the
	// command lines as they were.
	specs = plan("--sim", "1x4090", "--engine-runtime", "docker", "--engine", "vllm", "--layout", "per-gpu")
	if args := strings.Join(hruntime.KindVLLM.Descriptor().Args(specs[0], hruntime.Ports{}), " "); strings.Contains(args, "--kv-cache-dtype") ||
		strings.Contains(args, "--hf-overrides") {
		t.Errorf("default vLLM args: %s", args)
	}
	for _, bad := range [][]string{
		{"--sim", "1x4090", "--kv-cache-dtype", "int4"},
	} {
		cfg, err := parseUpFlags(env, bad)
		if err == nil {
			err = cfg.Validate()
		}
		if !errors.Is(err, daemon.ErrUsage) && !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
	cfg, err := parseUpFlags(env, []string{"--sim", "2x4090", "--tp", "2", "--model", "qwen3-coder-30b-a3b-fp8", "--rope-scaling"})
	if err == nil {
		_, _, err = daemon.Plan(context.Background(), cfg)
	}
	if !errors.Is(err, daemon.ErrUsage) && !errors.Is(err, errUsage) {
		t.Errorf("rope scaling of a model without it: %v", err)
	}
}
