package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/runtime/sim"
)

func TestPercentile(t *testing.T) {
	// Expected values worked out by hand with h = (n-1)·p/100; they agree
	// with numpy.percentile's default.
	five := []float64{15, 20, 35, 40, 50}
	tests := []struct {
		name   string
		sorted []float64
		p      float64
		want   float64
	}{
		{"empty", nil, 50, 0},
		{"single", []float64{7}, 99, 7},
		{"median of odd count", five, 50, 35},
		{"p25 on a rank", five, 25, 20},
		{"p40 between ranks", five, 40, 29},   // h=1.6: 20 + 0.6·15
		{"p90 between ranks", five, 90, 46},   // h=3.6: 40 + 0.6·10
		{"p99 between ranks", five, 99, 49.6}, // h=3.96: 40 + 0.96·10
		{"p0 is the minimum", five, 0, 15},
		{"p100 is the maximum", five, 100, 50},
		{"below range clamps", five, -5, 15},
		{"above range clamps", five, 250, 50},
		{"NaN is the minimum", five, math.NaN(), 15},
		{"median of even count", []float64{1, 2, 3, 4}, 50, 2.5},
		{"p90 of 1..10", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90, 9.1},
		{"p99 of 1..100", seq(1, 100), 99, 99.01},
		{"ties", []float64{3, 3, 3, 8}, 50, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.sorted, tt.p); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func seq(from, to int) []float64 {
	var s []float64
	for i := from; i <= to; i++ {
		s = append(s, float64(i))
	}
	return s
}

func TestSummarizeDurations(t *testing.T) {
	ds := []time.Duration{50 * time.Millisecond, 15 * time.Millisecond, 40 * time.Millisecond, 20 * time.Millisecond, 35 * time.Millisecond}
	got := SummarizeDurations(ds)
	want := Latency{P50: 35, P90: 46, P99: 49.6, Mean: 32}
	if !closeLatency(got, want) {
		t.Errorf("SummarizeDurations = %+v, want %+v", got, want)
	}
	if got := SummarizeDurations(nil); got != (Latency{}) {
		t.Errorf("SummarizeDurations(nil) = %+v", got)
	}
}

func closeLatency(a, b Latency) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return near(a.P50, b.P50) && near(a.P90, b.P90) && near(a.P99, b.P99) && near(a.Mean, b.Mean)
}

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func TestSummarize(t *testing.T) {
	results := []Result{
		// TTFT 100 ms, e2e 1100 ms, 11 tokens: ITL 100 ms.
		{Sent: 0, FirstToken: ms(100), Done: ms(1100), PromptTokens: 1000, OutputTokens: 11, PredictedCachedTokens: 800, CachedTokens: 640},
		// TTFT 300 ms, e2e 500 ms, 5 tokens: ITL 50 ms.
		{Sent: ms(1000), FirstToken: ms(1300), Done: ms(1500), PromptTokens: 3000, OutputTokens: 5, PredictedCachedTokens: 2400, CachedTokens: 2400},
		// A side request of one token: no ITL. TTFT = e2e = 200 ms.
		{Sent: ms(2000), FirstToken: ms(2200), Done: ms(2200), PromptTokens: 1000, OutputTokens: 1, Side: true},
		// A failure: counted, otherwise ignored, but its times widen the span.
		{Sent: ms(2500), Done: ms(4000), PromptTokens: 500, Err: errors.New("boom")},
	}
	got := Summarize("kv", 16, results)
	want := RunSummary{
		Policy: "kv", Sessions: 16, Requests: 4, Errors: 1,
		TTFT:             Latency{P50: 200, P90: 280, P99: 298, Mean: 200},
		TurnTTFT:         Latency{P50: 200, P90: 280, P99: 298, Mean: 200},
		SideTTFT:         Latency{P50: 200, P90: 200, P99: 200, Mean: 200},
		ITL:              Latency{P50: 75, P90: 95, P99: 99.5, Mean: 75},
		E2E:              Latency{P50: 500, P90: 980, P99: 1088, Mean: 600},
		OutputTokS:       17.0 / 4.0, // 17 tokens over 4 s
		PredictedHitRate: 3200.0 / 5000,
		EngineHitRate:    3040.0 / 5000,
		PrefillTokens:    1960,
		CachedTokens:     3040,
	}
	if got.Policy != want.Policy || got.Sessions != want.Sessions || got.Requests != want.Requests || got.Errors != want.Errors ||
		!closeLatency(got.TTFT, want.TTFT) || !closeLatency(got.ITL, want.ITL) || !closeLatency(got.E2E, want.E2E) ||
		math.Abs(got.OutputTokS-want.OutputTokS) > 1e-9 || math.Abs(got.PredictedHitRate-want.PredictedHitRate) > 1e-12 ||
		math.Abs(got.EngineHitRate-want.EngineHitRate) > 1e-12 || got.PrefillTokens != want.PrefillTokens || got.CachedTokens != want.CachedTokens {
		t.Errorf("Summarize =\n%+v\nwant\n%+v", got, want)
	}
	if empty := Summarize("rr", 1, nil); empty != (RunSummary{Policy: "rr", Sessions: 1}) {
		t.Errorf("Summarize of nothing = %+v", empty)
	}
}

func TestRecorder(t *testing.T) {
	var rec Recorder
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			r := Result{Sent: 0, FirstToken: ms(float64(i + 1)), Done: ms(float64(i + 2)), OutputTokens: 2}
			if i%10 == 0 {
				r.Err = errors.New("fail")
			}
			rec.Add(r)
		})
	}
	wg.Wait()
	if n, errs := rec.Counts(); n != 100 || errs != 10 {
		t.Errorf("Counts = %d, %d; want 100, 10", n, errs)
	}
	// TTFTs 1..100 ms without the failed 1, 11, ..., 91: 90 values, nine
	// per ten; the median lies between the 45th and 46th, 50 and 52 ms.
	if got := rec.TTFTP50(); got != ms(51) {
		t.Errorf("TTFTP50 = %v, want 51ms", got)
	}
	if s := rec.Summary("kv", 4); s.Requests != 100 || s.Errors != 10 || s.TTFT.P50 != 51 {
		t.Errorf("Summary = %+v", s)
	}
	if len(rec.Results()) != 100 {
		t.Error("Results lost some")
	}
}

func TestSummarizeSessions(t *testing.T) {
	ms := time.Millisecond
	results := []Result{
		// s1: two turns and a subagent, a 5 s tool pause between; task time
		// from 0 to 9 s, slowest TTFT the subagent's 300 ms.
		{Session: "s1", Turn: 0, Sent: 0, FirstToken: 100 * ms, Done: 1000 * ms, OutputTokens: 10},
		{Session: "s1.0", Turn: 0, Sent: 1000 * ms, FirstToken: 1300 * ms, Done: 2000 * ms, OutputTokens: 10, Last: true},
		{Session: "s1", Turn: 1, Sent: 7000 * ms, FirstToken: 7200 * ms, Done: 9000 * ms, OutputTokens: 10, Last: true},
		// s2: finished, 2 s, TTFT 50 ms.
		{Session: "s2", Turn: 0, Sent: 1000 * ms, FirstToken: 1050 * ms, Done: 3000 * ms, OutputTokens: 10, Last: true},
		// s3: failed; s4: cut before its last turn. Neither counts.
		{Session: "s3", Turn: 0, Sent: 0, Done: 10 * ms, Err: errors.New("boom")},
		{Session: "s4", Turn: 0, Sent: 0, FirstToken: 10 * ms, Done: 20 * ms, OutputTokens: 10},
	}
	s := Summarize("kv", 4, results)
	if s.FinishedSessions != 2 || s.StartedSessions != 4 {
		t.Fatalf("%d of %d sessions finished, want 2 of 4", s.FinishedSessions, s.StartedSessions)
	}
	if want := (Latency{P50: 5500, P90: 8300, P99: 8930, Mean: 5500}); s.Session != want {
		t.Errorf("session %+v, want %+v", s.Session, want)
	}
	if want := (Latency{P50: 175, P90: 275, P99: 297.5, Mean: 175}); s.SlowestTurnTTFT != want {
		t.Errorf("slowest turn TTFT %+v, want %+v", s.SlowestTurnTTFT, want)
	}
	if s.ErrorsByCause != (ErrorCauses{Other: 1}) {
		t.Errorf("causes %+v", s.ErrorsByCause)
	}
}

func TestErrorCauses(t *testing.T) {
	var c ErrorCauses
	for _, err := range []error{
		fmt.Errorf("bench: %w rtx4090: %w", errEngine, &sim.ContextLengthError{MaxModelLen: 8192, PromptTokens: 9000}),
		fmt.Errorf("bench: live: %w", statusError(400, "400 Bad Request", []byte(`{"message":"This model's maximum context length is 8192 tokens. However, your request has 9000 input tokens."}`))),
		fmt.Errorf("bench: route: %w", router.ErrQueueFull),
		statusError(429, "429 Too Many Requests", nil),
		statusError(500, "500 Internal Server Error", nil),
		fmt.Errorf("bench: %w rtx4090: %w", errEngine, sim.ErrDuplicateID),
		fmt.Errorf("bench: live: %w", context.DeadlineExceeded),
		statusError(400, "400 Bad Request", []byte("bad json")),
	} {
		c.add(err)
	}
	want := ErrorCauses{ContextLength: 2, QueueFull: 2, Engine: 2, Timeout: 1, Other: 1}
	if c != want {
		t.Errorf("got %+v, want %+v", c, want)
	}
	if got := c.String(); got != "ctx 2, queue 2, engine 2, timeout 1, other 1" {
		t.Errorf("String() = %q", got)
	}
	if got := (ErrorCauses{}).String(); got != "-" {
		t.Errorf("none: %q", got)
	}
}
