package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// swapTestConfig is a tiny swap workload: two agents, one on each model,
// each session sending a title request to the small model, without a
// node store (writing its files is most of a run's time).
func swapTestConfig() SwapConfig {
	return SwapConfig{
		GPU: "rtx4090", Agent: "qwen3-14b-fp8", Side: "qwen3-4b-fp8", SecondAgent: true,
		Workload: AgenticConfig{
			Seed: 1, Sessions: 2, TotalSessions: 4, Steps: 4, PrefixTokens: 1000,
			TaskTokens: IntRange{Min: 50, Max: 100}, AnswerTokens: IntRange{Min: 20, Max: 40},
			ResultTokens: IntRange{Min: 100, Max: 300}, ToolPause: Constant{Value: 2 * time.Second},
			SideRequests: []SideRequest{{Name: "title", PrefixTokens: 300, AnswerTokens: IntRange{Min: 10, Max: 20}}},
		},
	}
}

func swapByPolicy(c *SwapComparison) map[string]SwapSummary {
	out := map[string]SwapSummary{}
	for _, s := range c.Summaries {
		out[s.Policy] = s
	}
	return out
}

// The three policies on one workload give the order their mechanisms
// imply: stopping on every switch loads at least as often as the Manager
// swaps, each load a cold start where the Manager's are wakes, and its
// turns wait longer; both models pinned never load and finish the
// sessions first.
func TestRunSwapOrdersThePolicies(t *testing.T) {
	c, err := RunSwap(context.Background(), swapTestConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	by := swapByPolicy(c)
	hearth, stop, pinned := by[SwapHearth], by[SwapStopStart], by[SwapPinned]
	for _, s := range c.Summaries {
		t.Logf("%s: swaps %d, load %.1fs, turn ttft p90 %.0fms, task p50 %.0fms, errors %d",
			s.Policy, s.Swaps, s.LoadSeconds, s.Run.TurnTTFT.P90, s.Run.Session.P50, s.Run.Errors)
		if s.Run.Errors != 0 || s.Run.FinishedSessions != 4 {
			t.Errorf("%s: %d errors, %d sessions finished; want 0 and 4", s.Policy, s.Run.Errors, s.Run.FinishedSessions)
		}
	}
	if !(stop.Swaps >= hearth.Swaps && stop.LoadSeconds > 2*hearth.LoadSeconds) {
		t.Errorf("stop/start loaded %d times for %.1fs, Hearth %d times for %.1fs: want stop/start as often and over twice as long",
			stop.Swaps, stop.LoadSeconds, hearth.Swaps, hearth.LoadSeconds)
	}
	if pinned.Swaps != 0 || pinned.LoadSeconds != 0 {
		t.Errorf("pinned loaded %d times for %.1fs, want never", pinned.Swaps, pinned.LoadSeconds)
	}
	if !(hearth.Run.TurnTTFT.P90 < stop.Run.TurnTTFT.P90) {
		t.Errorf("turn TTFT p90: Hearth %.0fms, stop/start %.0fms; want Hearth's lower", hearth.Run.TurnTTFT.P90, stop.Run.TurnTTFT.P90)
	}
	if !(pinned.Run.Session.P50 < hearth.Run.Session.P50 && hearth.Run.Session.P50 < stop.Run.Session.P50) {
		t.Errorf("task time p50: pinned %.0fms, Hearth %.0fms, stop/start %.0fms; want that order",
			pinned.Run.Session.P50, hearth.Run.Session.P50, stop.Run.Session.P50)
	}
}

// A model that comes back finds its blocks in the node store: the request
// that brought it in loads its prefix from there, and without a store it
// computes all of it.
func TestRunSwapKeepsKVAcrossSwapsInTheNodeStore(t *testing.T) {
	cfg := swapTestConfig()
	cfg.StoreDir = t.TempDir()
	with, err := RunSwap(context.Background(), cfg, []string{SwapHearth})
	if err != nil {
		t.Fatal(err)
	}
	cfg.StoreDir = ""
	without, err := RunSwap(context.Background(), cfg, []string{SwapHearth})
	if err != nil {
		t.Fatal(err)
	}
	if got := with.Summaries[0].SSDCachedAfterSwap; got == 0 {
		t.Error("with a node store, no request after a swap loaded tokens from it")
	}
	if got := without.Summaries[0].SSDCachedAfterSwap; got != 0 {
		t.Errorf("without a node store, %d tokens after a swap came from it", got)
	}
}

func TestRunSwapRefusesBadConfigs(t *testing.T) {
	for name, mod := range map[string]func(*SwapConfig){
		"one model":     func(c *SwapConfig) { c.Side = c.Agent },
		"unknown model": func(c *SwapConfig) { c.Side = "no-such-model" },
		"unknown GPU":   func(c *SwapConfig) { c.GPU = "rtx9999" },
	} {
		cfg := swapTestConfig()
		mod(&cfg)
		if _, err := RunSwap(context.Background(), cfg, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := RunSwap(context.Background(), swapTestConfig(), []string{"lru"}); err == nil {
		t.Error("an unknown policy: no error")
	}
}

// The table of a swap benchmark, against a golden file.
func TestWriteSwapTableGolden(t *testing.T) {
	c := &SwapComparison{Summaries: []SwapSummary{
		{Policy: SwapHearth, Swaps: 4, LoadSeconds: 63.25, SSDCachedAfterSwap: 4000,
			FirstAfterSwap: Latency{P50: 36725, P90: 40000, P99: 41000},
			Run: RunSummary{TurnTTFT: Latency{P50: 401, P90: 36725, P99: 40000}, SideTTFT: Latency{P50: 120, P90: 800, P99: 900},
				Session: Latency{P50: 74206, P90: 90000}}},
		{Policy: SwapStopStart, Swaps: 16, LoadSeconds: 483.2, SSDCachedAfterSwap: 50912,
			FirstAfterSwap: Latency{P50: 62166, P90: 63826, P99: 64000},
			Run:            RunSummary{TurnTTFT: Latency{P50: 62166, P90: 63826, P99: 64000}, Session: Latency{P50: 263844, P90: 270000}, Errors: 1}},
	}}
	var got bytes.Buffer
	if err := WriteSwapTable(&got, c); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "swap_table.golden")
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("table:\n%s\nwant:\n%s", got.String(), want)
	}
}

// prepareSwapFlags parses args as hearth bench agentic does.
func prepareSwapFlags(t *testing.T, args ...string) (Run, error) {
	t.Helper()
	f := NewFlags("agentic")
	fs := flag.NewFlagSet("agentic", flag.ContinueOnError)
	f.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	return f.Prepare(set, io.Discard, io.Discard)
}

func TestFlagsSwapModel(t *testing.T) {
	r, err := prepareSwapFlags(t, "--swap-model", "qwen3-4b-fp8", "--kvbm", "ram+ssd", "--kv-store-dir", "/x", "--keep-alive", "5m", "--policies", "hearth,stop_start", "--seed", "7")
	if err != nil {
		t.Fatal(err)
	}
	want := SwapConfig{Agent: DefaultSimModel, Side: "qwen3-4b-fp8", SecondAgent: true, KeepAlive: 5 * time.Minute, StoreDir: "/x"}
	got := *r.Swap
	if got.Agent != want.Agent || got.Side != want.Side || got.SecondAgent != want.SecondAgent || got.KeepAlive != want.KeepAlive ||
		got.StoreDir != want.StoreDir || got.Workload.Sessions != 2 || got.Workload.Seed != 7 || got.Seed != 7 || len(got.Workload.SideRequests) != 1 || r.SimSpec != "1x4090" {
		t.Errorf("swap config %+v, sim %q", got, r.SimSpec)
	}
	if !slices.Equal(r.SwapPolicies, []string{SwapHearth, SwapStopStart}) {
		t.Errorf("policies %v", r.SwapPolicies)
	}
	for _, args := range [][]string{
		{"--keep-alive", "5m"},
		{"--swap-model", "no-such-model"},
		{"--swap-model", "qwen3-4b-fp8", "--policies", "kv"},
		{"--swap-model", "qwen3-4b-fp8", "--sessions", "2,4"},
		{"--swap-model", "qwen3-4b-fp8", "--target", "http://127.0.0.1:1/v1"},
		{"--swap-model", "qwen3-4b-fp8", "--keep-alive", "0s"},
		{"--swap-model", "qwen3-4b-fp8", "--restart-at", "1m"},
	} {
		if _, err := prepareSwapFlags(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// The JSON report holds the effective config, the workload's defaults
// applied, beside each policy's summary.
func TestSwapComparisonJSON(t *testing.T) {
	c := &SwapComparison{Config: SwapConfig{Agent: "a", Side: "b", Workload: AgenticConfig{Sessions: 2}}.withDefaults(),
		Summaries: []SwapSummary{{Policy: SwapHearth, Swaps: 3, LoadSeconds: 1.5}}}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Config struct {
			KeepAlive string `json:"keep_alive"`
			GPU       string `json:"gpu"`
			Workload  struct {
				Steps    int `json:"steps"`
				Sessions int `json:"sessions"`
			} `json:"workload"`
		} `json:"config"`
		Summaries []struct {
			Policy      string  `json:"policy"`
			Swaps       int     `json:"swaps"`
			LoadSeconds float64 `json:"load_seconds"`
		} `json:"summaries"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Config.KeepAlive != "30m0s" || got.Config.GPU != "rtx4090" || got.Config.Workload.Steps != DefaultSteps ||
		got.Config.Workload.Sessions != 2 || len(got.Summaries) != 1 || got.Summaries[0].Swaps != 3 || got.Summaries[0].LoadSeconds != 1.5 {
		t.Errorf("JSON %s", b)
	}
}

func BenchmarkRunSwap(b *testing.B) {
	cfg := swapTestConfig()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RunSwap(context.Background(), cfg, []string{SwapHearth}); err != nil {
			b.Fatal(err)
		}
	}
}
