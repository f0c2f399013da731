package bench

import (
	"bytes"
	"strings"
	"testing"
)

func TestSpreads(t *testing.T) {
	run := func(policy string, seed uint64, ttft50, task50 float64, errs int) RunSummary {
		return RunSummary{Policy: policy, Sessions: 4, Seed: seed, Errors: errs,
			StartedSessions: 10, FinishedSessions: 10 - errs,
			TTFT:            Latency{P50: ttft50, P90: 2 * ttft50, P99: 3 * ttft50},
			SlowestTurnTTFT: Latency{P50: 4 * ttft50, P90: 5 * ttft50, P99: 6 * ttft50},
			Session:         Latency{P50: task50, P90: 1.5 * task50, P99: 2 * task50}}
	}
	runs := []RunSummary{
		run("round_robin", 1, 100, 40000, 0), run("kv", 1, 50, 36000, 1),
		run("round_robin", 2, 200, 50000, 0), run("kv", 2, 60, 40000, 3),
		run("round_robin", 3, 100, 45000, 0), run("kv", 3, 80, 45000, 2),
		{Policy: "kv", Sessions: 8, Seed: 1, TTFT: Latency{P50: 9}}, // no baseline at 8
	}
	got := Spreads(runs)
	if len(got) != 3 || got[0].Policy != "round_robin" || got[1].Policy != "kv" || got[2].Sessions != 8 {
		t.Fatalf("spreads %+v", got)
	}
	kv := got[1]
	if len(kv.Seeds) != 3 || kv.TTFT.P50 != (Range{Median: 60, Min: 50, Max: 80}) {
		t.Errorf("kv ttft p50 %+v over seeds %v", kv.TTFT.P50, kv.Seeds)
	}
	// Ratios per seed: 50/100, 60/200, 80/100.
	if kv.TTFTRatio == nil || kv.TTFTRatio.P50 != (Range{Median: 0.5, Min: 0.3, Max: 0.8}) {
		t.Errorf("kv ttft ratio %+v", kv.TTFTRatio)
	}
	// 36000/40000, 40000/50000, 45000/45000.
	if kv.SessionRatio == nil || kv.SessionRatio.P99 != (Range{Median: 0.9, Min: 0.8, Max: 1}) {
		t.Errorf("kv session ratio %+v", kv.SessionRatio)
	}
	if kv.Errors != (Range{Median: 2, Min: 1, Max: 3}) {
		t.Errorf("kv errors %+v", kv.Errors)
	}
	if kv.Finished == nil || *kv.Finished != (Range{Median: 0.8, Min: 0.7, Max: 0.9}) {
		t.Errorf("kv finished share %+v", kv.Finished)
	}
	if got[2].Finished != nil {
		t.Errorf("a finished share without a session started: %+v", got[2].Finished)
	}
	if got[2].TTFTRatio != nil {
		t.Errorf("a ratio without a baseline: %+v", got[2].TTFTRatio)
	}

	var b bytes.Buffer
	if err := WriteSpreadTable(&b, got); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 (1-3)", "80% (70%-90%)", "0.30-0.80x", "60.0", "0.80-1.00x", "medians across seeds"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
