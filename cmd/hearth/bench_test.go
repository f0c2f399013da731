package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestBenchUsageErrors(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.jsonl")
	if err := os.WriteFile(trace, []byte(`{"timestamp":0,"input_length":600,"output_length":4,"hash_ids":[1,2]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no workload", []string{"bench"}},
		{"unknown workload", []string{"bench", "chat"}},
		{"sim and target", []string{"bench", "agentic", "--sim", "2x4090", "--target", "http://x/v1"}},
		{"trace without file", []string{"bench", "trace"}},
		{"trace flag on agentic", []string{"bench", "agentic", "--speed", "2"}},
		{"agentic flag on trace", []string{"bench", "trace", "--trace", trace, "--sessions", "4"}},
		{"zero sessions", []string{"bench", "agentic", "--sessions", "1,0"}},
		{"swap model on trace", []string{"bench", "trace", "--trace", trace, "--swap-model", "qwen3-4b-fp8"}},
		{"keep-alive without swap model", []string{"bench", "agentic", "--keep-alive", "1m"}},
		{"swap model unknown", []string{"bench", "agentic", "--swap-model", "nope"}},
		{"swap model on a bad sim", []string{"bench", "agentic", "--swap-model", "qwen3-4b-fp8", "--sim", "2xfoo"}},
		{"sessions not a number", []string{"bench", "agentic", "--sessions", "many"}},
		{"unknown policy", []string{"bench", "agentic", "--policies", "kv,best"}},
		{"policy twice", []string{"bench", "agentic", "--policies", "kv,kv"}},
		{"bad osl", []string{"bench", "agentic", "--osl", "200-100"}},
		{"bad tool pause", []string{"bench", "agentic", "--tool-pause", "gamma:3s"}},
		{"bad sim spec", []string{"bench", "agentic", "--sim", "2x5090"}},
		{"unknown model", []string{"bench", "agentic", "--model", "llama-70b"}},
		{"bad speed", []string{"bench", "trace", "--trace", trace, "--speed", "0"}},
		{"negative latency", []string{"bench", "agentic", "--event-latency", "-1ms"}},
		{"latency on a live run", []string{"bench", "agentic", "--target", "http://127.0.0.1:1/v1", "--event-latency", "1ms"}},
		{"negative offloading", []string{"bench", "agentic", "--kv-offloading-size", "-2"}},
		{"offloading on a live run", []string{"bench", "agentic", "--target", "http://127.0.0.1:1/v1", "--kv-offloading-size", "8"}},
		{"target not a url", []string{"bench", "agentic", "--target", "localhost:8000"}},
		{"unknown flag", []string{"bench", "agentic", "--frobnicate"}},
		{"extra argument", []string{"bench", "agentic", "extra"}},
		{"subagents need steps", []string{"bench", "agentic", "--subagents", "2", "--steps", "1"}},
		{"unknown preset", []string{"bench", "agentic", "--workload", "chat-32k"}},
		{"unknown client preset", []string{"bench", "agentic", "--preset", "aider"}},
		{"preset given twice", []string{"bench", "agentic", "--preset", "codex", "--workload", "codex"}},
		{"preset on a trace", []string{"bench", "trace", "--trace", trace, "--workload", "coding-agent-8k"}},
		{"zero runs", []string{"bench", "agentic", "--runs", "0"}},
		{"max model len on a live run", []string{"bench", "agentic", "--target", "http://127.0.0.1:1/v1", "--max-model-len", "8192"}},
		{"max model len over the KV cache", []string{"bench", "agentic", "--sim", "1x4090", "--max-model-len", "40000"}},
		{"negative max model len", []string{"bench", "agentic", "--max-model-len", "-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runHearth(t, "", tc.args...)
			if !errors.Is(err, errUsage) {
				t.Errorf("%v: got %v, want a usage error", tc.args, err)
			}
		})
	}
}

func TestBenchHelp(t *testing.T) {
	out, _, err := runHearth(t, "", "bench", "--help")
	if err != nil || !strings.Contains(out, "hearth bench agentic") {
		t.Errorf("bench --help: %v\n%s", err, out)
	}
}

func TestBenchAgenticSimulated(t *testing.T) {
	dir := t.TempDir()
	jsonPath, plotPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.svg")
	out, errOut, err := runHearth(t, "", "bench", "agentic", "--sim", "2x4090", "--sessions", "1,2",
		"--total-sessions", "2", "--steps", "2", "--prefix-tokens", "500", "--tool-pause", "const:10ms",
		"--seed", "3", "--json", jsonPath, "--plot", plotPath, "--layout", "per-gpu")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, errOut)
	}
	if errOut != "" {
		t.Errorf("stderr is not a terminal, yet something was written: %q", errOut)
	}
	for _, want := range []string{"round_robin", "kv", "hearth", "ttft p50", "13107 in 32 GiB RAM", "output length estimate, hearth at 2 sessions: error p50"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Workload struct {
			Kind  string `json:"kind"`
			Steps int    `json:"steps"`
		} `json:"workload"`
		Runs []struct {
			Policy   string `json:"policy"`
			Sessions int    `json:"sessions"`
			Requests int    `json:"requests"`
			Errors   int    `json:"errors"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(raw, &report); err != nil {
		t.Fatalf("json report: %v\n%s", err, raw)
	}
	if report.Workload.Kind != "agentic" || report.Workload.Steps != 2 || len(report.Runs) != 6 {
		t.Fatalf("report: %+v", report)
	}
	for _, r := range report.Runs {
		if r.Requests != 4 || r.Errors != 0 {
			t.Errorf("run %+v: want 2 sessions x 2 turns without errors", r)
		}
	}
	svg, err := os.ReadFile(plotPath)
	if err != nil || !strings.Contains(string(svg), "<svg") {
		t.Errorf("plot: %v, %.80q", err, svg)
	}
}

// TestBenchClientPreset: a client preset runs on the engines' own context
// and compacts instead of failing; the JSON names the client and counts
// the compactions beside the errors.
func TestBenchClientPreset(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	out, errOut, err := runHearth(t, "", "bench", "agentic", "--preset", "claude-code", "--sim", "1x4090",
		"--sessions", "2", "--total-sessions", "2", "--tool-pause", "const:100ms", "--policies", "kv", "--json", jsonPath)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "compact/s") {
		t.Errorf("the table has no compactions column:\n%s", out)
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Workload struct {
			Client     string `json:"client"`
			MaxContext int    `json:"max_context_tokens"`
		} `json:"workload"`
		Runs []struct {
			Errors      int     `json:"errors"`
			Compactions int     `json:"compactions"`
			PerSession  float64 `json:"compactions_per_session"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(raw, &report); err != nil {
		t.Fatal(err)
	}
	// The layout hearth up serves agents by default on one 4090: FP8 KV
	// and YaRN, a 65,248-token context at the agent layout's step budget.
	if report.Workload.Client != "claude-code" || report.Workload.MaxContext != 65248 || len(report.Runs) != 1 {
		t.Fatalf("report: %+v", report)
	}
	if r := report.Runs[0]; r.Errors != 0 || r.Compactions == 0 || r.PerSession != float64(r.Compactions)/2 {
		t.Errorf("run %+v: want no errors and compactions counted per session", r)
	}
}

// TestBenchCodingAgentPreset: the coding-agent-8k preset runs on engines
// at max_model_len 8192 without a context error; a shorter max_model_len
// refuses the long turns, counted as context errors; --runs reports the
// spread over seeds and every seed's runs in the JSON.
func TestBenchCodingAgentPreset(t *testing.T) {
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "r.json")
	out, errOut, err := runHearth(t, "", "bench", "agentic", "--workload", "coding-agent-8k", "--sim", "2x4090",
		"--sessions", "4", "--duration", "1m", "--runs", "2", "--seed", "5", "--json", jsonPath)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, errOut)
	}
	for _, want := range []string{"2 runs, seeds 5 to 6", "vs rr", "1.00-1.00x"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Workload struct {
			MaxSteps   int `json:"max_steps"`
			MaxContext int `json:"max_context_tokens"`
		} `json:"workload"`
		Runs []struct {
			Seed          uint64                `json:"seed"`
			Errors        int                   `json:"errors"`
			ErrorsByCause map[string]int        `json:"errors_by_cause"`
			Finished      int                   `json:"finished_sessions"`
			Session       struct{ P50 float64 } `json:"session_ms"`
		} `json:"runs"`
		Spread []struct {
			Seeds     []uint64 `json:"seeds"`
			TTFTRatio *struct {
				P50 struct{ Min, Max float64 } `json:"p50"`
			} `json:"ttft_vs_round_robin"`
		} `json:"spread"`
	}
	if err := json.Unmarshal(raw, &report); err != nil {
		t.Fatal(err)
	}
	if report.Workload.MaxSteps != 6 || report.Workload.MaxContext != 8192 || len(report.Runs) != 6 || len(report.Spread) != 3 {
		t.Fatalf("report: %+v", report)
	}
	for i, r := range report.Runs {
		if want := uint64(5 + i/3); r.Seed != want || r.Errors != 0 || r.Finished == 0 || !(r.Session.P50 > 0) {
			t.Errorf("run %d: %+v, want seed %d, no errors and finished sessions", i, r, want)
		}
	}
	if s := report.Spread[1]; len(s.Seeds) != 2 || s.TTFTRatio == nil || !(s.TTFTRatio.P50.Min <= s.TTFTRatio.P50.Max) {
		t.Errorf("spread %+v", s)
	}

	out, errOut, err = runHearth(t, "", "bench", "agentic", "--workload", "coding-agent-8k", "--sim", "1x4090",
		"--sessions", "2", "--duration", "30s", "--policies", "kv", "--max-model-len", "6500")
	if err != nil {
		t.Fatalf("bench at 6500: %v\n%s", err, errOut)
	}
	if m := regexp.MustCompile(`(\d+) \(ctx (\d+)\)`).FindStringSubmatch(out); m == nil || m[1] != m[2] {
		t.Errorf("at max_model_len 6500 later turns are too long; want context errors only in:\n%s", out)
	}
}

// TestBenchOffloadingFlag: --kv-offloading-size sizes every simulated
// engine's host-RAM tier, 0 turns it off.
func TestBenchOffloadingFlag(t *testing.T) {
	tests := []struct {
		name, size, want, notWant string
	}{
		{"off", "0", "1866 KV blocks, prefill", "GiB RAM"},
		{"8 GiB", "8", "1866 KV blocks + 3276 in 8 GiB RAM", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := runHearth(t, "", "bench", "agentic", "--sim", "1x4090", "--sessions", "1",
				"--total-sessions", "1", "--steps", "2", "--prefix-tokens", "500", "--tool-pause", "const:10ms",
				"--policies", "kv", "--kv-offloading-size", tt.size, "--layout", "per-gpu")
			if err != nil {
				t.Fatalf("bench: %v\n%s", err, errOut)
			}
			if !strings.Contains(out, tt.want) || tt.notWant != "" && strings.Contains(out, tt.notWant) {
				t.Errorf("want %q and not %q in:\n%s", tt.want, tt.notWant, out)
			}
		})
	}
}

func TestBenchTraceSimulated(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "t.jsonl")
	lines := `{"timestamp":0,"input_length":1000,"output_length":8,"hash_ids":[1,2]}
{"timestamp":100,"input_length":1200,"output_length":8,"hash_ids":[1,2,3]}
{"timestamp":200,"input_length":900,"output_length":0,"hash_ids":[1,4]}
`
	if err := os.WriteFile(trace, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runHearth(t, "", "bench", "trace", "--trace", trace, "--sim", "1x4090+1x3090",
		"--policies", "round_robin,kv", "--speed", "2")
	if err != nil {
		t.Fatalf("bench trace: %v\n%s", err, errOut)
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[0] == "0" {
			rows++
			if f[2] != "3" || f[3] != "0" {
				t.Errorf("row %q: want 3 requests, 0 errors", line)
			}
		}
	}
	if rows != 2 {
		t.Errorf("%d rows for 2 policies:\n%s", rows, out)
	}
	if _, _, err := runHearth(t, "", "bench", "trace", "--trace", filepath.Join(t.TempDir(), "missing")); err == nil || errors.Is(err, errUsage) {
		t.Errorf("missing trace file: got %v, want a plain error", err)
	}
}

// TestBenchSwapModel: hearth bench agentic --swap-model runs the swap
// benchmark on the GPU of --sim and prints each policy's row.
func TestBenchSwapModel(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	out, errOut, err := runHearth(t, "", "bench", "agentic", "--swap-model", "qwen3-4b-fp8", "--sim", "1x3090",
		"--total-sessions", "2", "--steps", "2", "--prefix-tokens", "500", "--tool-pause", "const:1s",
		"--seed", "3", "--json", jsonPath)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, errOut)
	}
	for _, want := range []string{"on one rtx3090", "hearth", "stop_start", "pinned", "after swap s", "load s"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Config struct {
			GPU  string `json:"gpu"`
			Seed int64  `json:"seed"`
		} `json:"config"`
		Summaries []struct {
			Policy string `json:"policy"`
			Swaps  int    `json:"swaps"`
		} `json:"summaries"`
	}
	if err := json.Unmarshal(raw, &report); err != nil {
		t.Fatalf("json report: %v\n%s", err, raw)
	}
	if report.Config.GPU != "rtx3090" || report.Config.Seed != 3 || len(report.Summaries) != 3 {
		t.Errorf("report: %+v", report)
	}
}
