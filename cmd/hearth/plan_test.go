package main

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/bench"
	"github.com/hearth-llm/hearth/catalog"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestPlanGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		golden string
		args   []string
		// simulations says the plan measures several layouts in the
		// planner's simulation, minutes under the race detector; the run
		// without -race checks its golden, and bench's tests run the
		// simulation under -race.
		simulations bool
	}{
		{"rtx4090-qwen3-14b-fp8.txt", []string{"--gpu", "rtx4090", "--model", "qwen3-14b-fp8", "--layout", "per-gpu"}, false},
		{"4090-and-3090-with-a-game-default-model.txt", []string{"--sim", "1x4090+1x3090", "--used-gb", "4", "--layout", "per-gpu"}, false},
		{"2x4090-default-layout.txt", []string{"--sim", "2x4090"}, false},
		{"2x4090-qwen3-32b-fp8-tp2.json", []string{"--sim", "2x4090", "--model", "Qwen/Qwen3-32B-FP8", "--tp", "2", "--json"}, false},
		{"2x4090-qwen3-14b-fp8-tp2-fp8-yarn.txt", []string{"--sim", "2x4090", "--tp", "2", "--kv-cache-dtype", "fp8", "--rope-scaling"}, false},
		{"rtx4090-coder-context.json", []string{"--gpu", "rtx4090,rtx4090", "--model", "qwen3-coder-30b-a3b-fp8", "--tp", "2",
			"--max-model-len", "65536", "--json"}, false},
		{"agent-codex-1x4090.txt", []string{"--agent", "codex", "--sim", "1x4090", "--sessions", "2"}, false},
		{"agent-codex-1x4090.agent.json", []string{"--agent", "codex", "--sim", "1x4090", "--sessions", "2", "--json"}, false},
		{"agent-claude-code-4-rigs-1x4090.txt", []string{"--agent", "claude-code", "--sim", "1x4090", "--rigs", "4", "--sessions", "4"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			if tt.simulations && raceDetector {
				t.Skip("skipping under -race: this plan runs several of the planner's simulations; the run without -race checks it")
			}
			out, errOut, err := runHearth(t, "", append([]string{"plan"}, tt.args...)...)
			if err != nil {
				t.Fatalf("plan %v: %v\n%s", tt.args, err, errOut)
			}
			if strings.HasSuffix(tt.golden, ".agent.json") {
				var p bench.LayoutReport
				if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Layouts) == 0 || p.Recommended == "" {
					t.Fatalf("output is not an agent plan (%v):\n%s", err, out)
				}
			} else if strings.HasSuffix(tt.golden, ".json") {
				var p catalog.PlanReport
				if err := json.Unmarshal([]byte(out), &p); err != nil {
					t.Fatalf("output is not a plan: %v\n%s", err, out)
				}
			}
			checkGolden(t, filepath.Join("testdata", "plan", tt.golden), out)
		})
	}
}

// checkGolden compares out with the golden file at path (-update rewrites
// it).
func checkGolden(t *testing.T, path, out string) {
	t.Helper()
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if out != string(want) {
		t.Errorf("output differs from %s (go test -run %s -update rewrites it):\n%s", path, t.Name(), out)
	}
}

func TestPlanFailures(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		usage   bool   // a usage error (exit 2), else exit 1
		message string // the whole error text, or a part of a usage error
	}{
		{
			name:    "a model too big for the GPU",
			args:    []string{"--gpu", "rtx4090", "--model", "qwen3-32b-fp8"},
			message: "Qwen3-32B-FP8 needs 32 GB for weights; an RTX 4090 has 24 GB: try qwen3-14b-fp8, or --tp 2 on two GPUs",
		},
		{
			name: "a game holding the memory",
			args: []string{"--gpu", "rtx4090", "--model", "qwen3-14b-fp8", "--used-gb", "9"},
			message: "Qwen3-14B-FP8 needs 16 GB for weights; an RTX 4090 has 24 GB, 9 GB of it used by other programs: " +
				"close them, try qwen3-8b-fp8, or --tp 2 on two GPUs",
		},
		{
			name:    "a context longer than fits",
			args:    []string{"--gpu", "rtx4090", "--model", "qwen3-14b-fp8", "--max-model-len", "32768"},
			message: "Qwen3-14B-FP8 on an RTX 4090 has room for a context of 29,856 tokens, not 32,768: use --max-model-len 29856 or less",
		},
		{
			name:    "a repository in neither catalog nor cache",
			args:    []string{"--gpu", "rtx4090", "--model", "acme/unknown", "--hf-cache", "/nonexistent-hf-cache"},
			message: `unknown model "acme/unknown": it is neither in Hearth's catalog (` + strings.Join(catalog.ModelNames(), ", ") + `) nor in the Hugging Face cache at /nonexistent-hf-cache/hub`,
		},
		{
			name:    "a name in neither catalog nor form of a repository",
			args:    []string{"--gpu", "rtx4090", "--model", "qwen3-70b"},
			message: `unknown model "qwen3-70b": it is not in Hearth's catalog (` + strings.Join(catalog.ModelNames(), ", ") + `) nor a Hugging Face repository id (Org/Name) to look for in the cache`,
		},
		{name: "no GPU named", args: []string{"--model", "qwen3-14b-fp8"}, usage: true, message: "--gpu rtx4090"},
		{name: "both GPU lists", args: []string{"--gpu", "rtx4090", "--sim", "1x4090"}, usage: true, message: "exclude"},
		{name: "unknown GPU", args: []string{"--gpu", "rtx4090,gtx480"}, usage: true, message: `"gtx480"`},
		{name: "bad sim spec", args: []string{"--sim", "2xfoo"}, usage: true, message: "--sim"},
		{name: "no tp", args: []string{"--gpu", "rtx4090", "--tp", "0"}, usage: true, message: "--tp"},
		{name: "negative used", args: []string{"--gpu", "rtx4090", "--used-gb", "-1"}, usage: true, message: "--used-gb"},
		{name: "unknown agent", args: []string{"--sim", "1x4090", "--agent", "aider"}, usage: true, message: "claude-code, codex, opencode"},
		{name: "agent with a layout", args: []string{"--sim", "2x4090", "--agent", "codex", "--tp", "2"}, usage: true, message: "--agent evaluates the layouts itself"},
		{name: "sessions without agent", args: []string{"--sim", "1x4090", "--sessions", "2"}, usage: true, message: "go with --agent"},
		{name: "rigs without agent", args: []string{"--sim", "1x4090", "--rigs", "4"}, usage: true, message: "go with --agent"},
		{name: "no rigs", args: []string{"--sim", "1x4090", "--agent", "codex", "--rigs", "0"}, usage: true, message: "--rigs 0"},
		{name: "agent without sessions", args: []string{"--sim", "1x4090", "--agent", "codex", "--sessions", "0"}, usage: true, message: "--sessions"},
		{name: "stray argument", args: []string{"--gpu", "rtx4090", "extra"}, usage: true, message: "extra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runHearth(t, "", append([]string{"plan"}, tt.args...)...)
			if err == nil {
				t.Fatalf("plan %v succeeded:\n%s", tt.args, out)
			}
			if errors.Is(err, errUsage) != tt.usage {
				t.Fatalf("plan %v: %v; usage error %v, want %v", tt.args, err, errors.Is(err, errUsage), tt.usage)
			}
			if want := map[bool]int{true: 2, false: 1}[tt.usage]; exitCode(err) != want {
				t.Errorf("exit code %d, want %d", exitCode(err), want)
			}
			if tt.usage && !strings.Contains(err.Error(), tt.message) || !tt.usage && err.Error() != tt.message {
				t.Errorf("got  %q\nwant %q", err.Error(), tt.message)
			}
			if out != "" {
				t.Errorf("a failed plan printed %q", out)
			}
		})
	}
}

// TestPlanAgreesWithTheSimulatedEngine holds the planner and the simulated
// engine to one memory model: on an idle GPU at the plan's fraction, the
// engine derives the KV cache and context the plan promised.
func TestPlanAgreesWithTheSimulatedEngine(t *testing.T) {
	fitted := 0
	for _, kind := range catalog.GPUKinds() {
		board, _ := catalog.LookupGPU(kind)
		for _, name := range catalog.ModelNames() {
			m, _ := catalog.LookupModel(name)
			plan, err := catalog.PlanEngines(catalog.PlanRequest{GPUs: []catalog.GPUUse{{GPU: board}}, Model: m})
			if err != nil {
				continue
			}
			fitted++
			e := plan.Engines[0]
			spec := hruntime.Spec{Engine: hruntime.KindVLLM, Simulated: true, Model: name, GPU: hruntime.GPU{Kind: kind},
				GPUMemoryUtilization: e.GPUMemoryUtilization, MaxModelLen: e.MaxModelLen}
			p, err := catalog.ProfileOf(sim.ConfigOf(spec).Perf())
			if err != nil {
				t.Errorf("%s on %s: the plan fits, the simulated engine does not start: %v", name, kind, err)
				continue
			}
			if p.GPUBlocks*p.BlockSize != e.KVTokens || p.MaxModelLen != e.MaxModelLen || p.BlockSize != tokenizer.DefaultBlockSize {
				t.Errorf("%s on %s: simulated engine %d blocks of %d, context %d; plan %d tokens, context %d",
					name, kind, p.GPUBlocks, p.BlockSize, p.MaxModelLen, e.KVTokens, e.MaxModelLen)
			}
		}
	}
	if fitted < 10 {
		t.Errorf("only %d GPU and model pairs fit", fitted)
	}
}
