package bench

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run go test -update if the change is intended)\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// sampleRuns are three policies at two concurrency levels, and two of them
// at a third level without round_robin, given out of order.
func sampleRuns() []RunSummary {
	run := func(policy string, sessions int, ttft50, ttft90 float64, hit float64) RunSummary {
		return RunSummary{
			Policy: policy, Sessions: sessions, Requests: 40 * sessions, Errors: sessions / 16,
			ErrorsByCause:    ErrorCauses{ContextLength: sessions / 16},
			StartedSessions:  6 * sessions,
			FinishedSessions: 5 * sessions,
			// Compactions: one in three sessions compacted once.
			Compactions:           2 * sessions,
			CompactionsPerSession: 2.0 / 6,
			Session:               Latency{P50: 60000 + 8*ttft50, P90: 90000 + 8*ttft90, P99: 120000 + 8*ttft90, Mean: 65000 + 8*ttft50},
			SlowestTurnTTFT:       Latency{P50: 2 * ttft50, P90: 2 * ttft90, P99: 3 * ttft90, Mean: 2.2 * ttft50},
			TTFT:                  Latency{P50: ttft50, P90: ttft90, P99: 1.5 * ttft90, Mean: 1.1 * ttft50},
			ITL:                   Latency{P50: 21.5, P90: 30.25, P99: 41, Mean: 23},
			E2E:                   Latency{P50: 3400 + ttft50, P90: 5200, P99: 8000, Mean: 3700},
			OutputTokS:            47.5 * float64(sessions),
			PredictedHitRate:      hit,
			// Hearth's prediction reaches below the GPU.
			PredictedRAMHitRate: map[bool]float64{true: 0.125}[policy == "hearth"],
			PredictedSSDHitRate: map[bool]float64{true: 0.03}[policy == "hearth"],
			EngineHitRate:       hit - 0.02,
			PrefillTokens:       int64(float64(300000*sessions) * (1 - hit + 0.02)),
			CachedTokens:        int64(float64(300000*sessions) * (hit - 0.02)),
		}
	}
	return []RunSummary{
		run("round_robin", 16, 2400, 6100, 0.41),
		run("kv", 16, 610, 1900, 0.88),
		run("hearth", 16, 540, 1500, 0.91),
		run("round_robin", 4, 380, 900, 0.52),
		run("kv", 4, 210, 450, 0.9),
		run("hearth", 4, 190, 400, 0.93),
		run("kv", 32, 1800, 5200, 0.8),
		run("hearth", 32, 1300, 3900, 0.86),
	}
}

func TestWriteTableGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, sampleRuns()); err != nil {
		t.Fatal(err)
	}
	golden(t, "report-table.golden", b.Bytes())
}

func TestWriteTableRatios(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, sampleRuns()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	ratio := func(sessions, policy string) string {
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) > 2 && f[0] == sessions && f[1] == policy {
				return f[len(f)-1]
			}
		}
		t.Fatalf("no row for %s %s in\n%s", policy, sessions, b.String())
		return ""
	}
	for _, tt := range []struct{ sessions, policy, want string }{
		{"4", "round_robin", "1.00x"}, {"4", "kv", "0.55x"}, {"16", "hearth", "0.23x"}, {"32", "kv", "-"},
	} {
		if got := ratio(tt.sessions, tt.policy); got != tt.want {
			t.Errorf("%s at %s sessions: ratio %s, want %s", tt.policy, tt.sessions, got, tt.want)
		}
	}
	// Rows are ordered by level; policies keep their order within one.
	var order []string
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 2 && f[0] != "latencies" && f[0] != "errors" && f[0] != "hit" {
			order = append(order, f[0]+" "+f[1])
		}
	}
	want := []string{"4 round_robin", "4 kv", "4 hearth", "16 round_robin", "16 kv", "16 hearth", "32 kv", "32 hearth"}
	if !slices.Equal(order, want) {
		t.Errorf("rows %v, want %v", order, want)
	}
}

func TestWriteJSONGolden(t *testing.T) {
	a := newAgentic(t, AgenticConfig{Seed: 42, Subagents: 2, Sessions: 16})
	var b bytes.Buffer
	if err := WriteJSON(&b, Report{Workload: a, Runs: sampleRuns()}); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.json.golden", b.Bytes())

	tr, err := NewTrace(testRecords(), TraceConfig{Path: "traces/mooncake-conversation.jsonl", Speed: 2, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := WriteJSON(&b, Report{Workload: tr}); err != nil {
		t.Fatal(err)
	}
	golden(t, "report-trace.json.golden", b.Bytes())
}

// TestWriteJSONFields checks the report's shape against the documented
// field list, independently of the golden file.
func TestWriteJSONFields(t *testing.T) {
	a := newAgentic(t, AgenticConfig{ToolPause: Uniform{time.Second, 2 * time.Second}})
	var b bytes.Buffer
	if err := WriteJSON(&b, Report{Workload: a, Runs: sampleRuns()[:1]}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Workload map[string]any   `json:"workload"`
		Runs     []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	wantRun := []string{"cached_tokens", "compactions", "compactions_per_session", "e2e_ms", "engine_hit_rate", "errors", "errors_by_cause", "finished_sessions",
		"itl_ms", "output_tok_s", "policy", "predicted_hit_rate", "prefill_tokens", "requests", "seed", "session_ms",
		"sessions", "side_ttft_ms", "slowest_turn_ttft_ms", "started_sessions", "ttft_ms", "turn_ttft_ms"}
	if got := slices.Sorted(maps.Keys(doc.Runs[0])); !slices.Equal(got, wantRun) {
		t.Errorf("run fields %v, want %v", got, wantRun)
	}
	for _, name := range []string{"ttft_ms", "turn_ttft_ms", "side_ttft_ms", "session_ms", "slowest_turn_ttft_ms"} {
		lat, _ := doc.Runs[0][name].(map[string]any)
		if got := slices.Sorted(maps.Keys(lat)); !slices.Equal(got, []string{"mean", "p50", "p90", "p99"}) {
			t.Errorf("%s fields %v", name, got)
		}
	}
	causes, _ := doc.Runs[0]["errors_by_cause"].(map[string]any)
	if got := slices.Sorted(maps.Keys(causes)); !slices.Equal(got, []string{"context_length", "engine", "other", "queue_full", "timeout"}) {
		t.Errorf("errors_by_cause fields %v", got)
	}
	wantWorkload := []string{"answer_tokens", "duration", "kind", "prefix_tokens", "result_tokens", "seed", "sessions",
		"steps", "subagent_steps", "subagents", "task_tokens", "tool_pause", "total_sessions"}
	if got := slices.Sorted(maps.Keys(doc.Workload)); !slices.Equal(got, wantWorkload) {
		t.Errorf("workload fields %v, want %v", got, wantWorkload)
	}
	if p, _ := doc.Workload["tool_pause"].(map[string]any); p["kind"] != "uniform" || p["max"] != "2s" {
		t.Errorf("tool_pause = %v", doc.Workload["tool_pause"])
	}

	b.Reset()
	if err := WriteJSON(&b, Report{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"runs": []`) {
		t.Errorf("a report without runs: %s", b.String())
	}
}
