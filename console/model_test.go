package console

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/console/components"
)

func testConfig() Config {
	c := Config{Location: time.UTC}
	c.setDefaults()
	return c
}

func TestSamplerRates(t *testing.T) {
	cfg := testConfig()
	src := &fakeSources{engines: []Engine{{Worker: "w0", TotalBlocks: 100, PrefixQueries: 1000, PrefixHits: 100, GenerationTokens: 50}}}
	s := newSampler(cfg, Deps{Engines: src, Router: src, Traffic: src})
	now := t0

	snap := s.collect(context.Background(), now, true)
	if v := snap.workers["w0"]; !math.IsNaN(v.tokensPerSec) {
		t.Errorf("tokens/s after one sample = %v, want none", v.tokensPerSec)
	}
	if !math.IsNaN(snap.cluster.hitRate) {
		t.Errorf("hit rate from a first sample = %v; a counter's total since engine start is no rate", snap.cluster.hitRate)
	}

	// 2 s later: 400 more tokens looked up, 300 of them hits, 100 generated.
	src.engines[0].PrefixQueries, src.engines[0].PrefixHits, src.engines[0].GenerationTokens = 1400, 400, 150
	now = now.Add(2 * time.Second)
	snap = s.collect(context.Background(), now, true)
	v := snap.workers["w0"]
	if v.tokensPerSec != 50 {
		t.Errorf("tokens/s = %v, want 50", v.tokensPerSec)
	}
	if got := v.chart[len(v.chart)-1].measured; got != 0.75 {
		t.Errorf("measured hit rate of the current bucket = %v, want 0.75", got)
	}
	if snap.cluster.hitRate != 0.75 {
		t.Errorf("cluster hit rate = %v, want 0.75", snap.cluster.hitRate)
	}

	// The engine restarts: counters fall to small values, which count in
	// full rather than as a huge negative delta.
	src.engines[0].PrefixQueries, src.engines[0].PrefixHits, src.engines[0].GenerationTokens = 100, 100, 10
	now = now.Add(2 * time.Second)
	snap = s.collect(context.Background(), now, true)
	if got := snap.workers["w0"].chart[len(v.chart)-1].measured; got != 400.0/500 {
		t.Errorf("hit rate across a restart = %v, want %v", got, 400.0/500)
	}

	// A page load between ticks does not move the history.
	before := snap.workers["w0"].chart
	src.engines[0].PrefixQueries += 1_000_000
	peek := s.collect(context.Background(), now.Add(time.Second), false)
	if peek.workers["w0"].chart[len(before)-1].measured != before[len(before)-1].measured {
		t.Error("an unrecorded collect changed the history")
	}
}

func TestSamplerChartBuckets(t *testing.T) {
	cfg := testConfig() // 30 points of 20 s
	src := &fakeSources{engines: []Engine{{Worker: "w0"}}}
	s := newSampler(cfg, Deps{Engines: src})
	now := t0
	s.collect(context.Background(), now, true)
	// One minute of traffic at 50% hits, then five idle minutes.
	for range 30 {
		now = now.Add(2 * time.Second)
		src.engines[0].PrefixQueries += 100
		src.engines[0].PrefixHits += 50
		s.collect(context.Background(), now, true)
	}
	for range 150 {
		now = now.Add(2 * time.Second)
		s.collect(context.Background(), now, true)
	}
	snap := s.collect(context.Background(), now, false)
	chart := snap.workers["w0"].chart
	if len(chart) != cfg.ChartPoints {
		t.Fatalf("%d points, want %d", len(chart), cfg.ChartPoints)
	}
	first := -1
	for i, p := range chart {
		if !math.IsNaN(p.predicted) {
			t.Errorf("point %d has a prediction without decisions", i)
		}
		if math.IsNaN(p.measured) {
			if first >= 0 {
				t.Errorf("point %d is a gap after data; the engine was read all along", i)
			}
			continue
		}
		if first < 0 {
			first = i
		}
		if p.measured != 0.5 {
			t.Errorf("point %d = %v, want 0.5 (measured, or held through the idle minutes)", i, p.measured)
		}
	}
	// 60 s of data span three or four 20 s buckets that ended 5 min (15
	// buckets) ago; the line starts there and holds to now.
	if first < len(chart)-1-15-3 || first > len(chart)-1-15-2 {
		t.Errorf("line starts at point %d, want 3-4 points before %d", first, len(chart)-1-15)
	}
	// Those buckets are older than the 5-minute stats window... all but
	// the edge: the cluster rate uses only buckets inside the window, and
	// a held figure is no lookup.
	if !math.IsNaN(snap.cluster.hitRate) && snap.cluster.hitRate != 0.5 {
		t.Errorf("cluster hit rate %v", snap.cluster.hitRate)
	}
	// After the whole chart window without data the worker's chart is empty.
	for range 300 {
		now = now.Add(2 * time.Second)
		s.collect(context.Background(), now, true)
	}
	snap = s.collect(context.Background(), now, false)
	for i, p := range snap.workers["w0"].chart {
		if !math.IsNaN(p.measured) {
			t.Errorf("point %d still has data after the window passed", i)
		}
	}
}

// An agent thinks between turns: ticks without requests hold the line, and
// only a tick where the engine could not be read breaks it. The router's
// prediction, which exists only where it decided, is drawn the same way.
func TestHitChartOneLineThroughIdleTicks(t *testing.T) {
	cfg := testConfig() // 30 points of 20 s, a tick every 2 s
	src := &fakeSources{engines: []Engine{{Worker: "w0"}}}
	s := newSampler(cfg, Deps{Engines: src, Router: src})
	now := t0
	s.collect(context.Background(), now, true)
	request := func(n int) {
		src.engines[0].PrefixQueries += 100
		src.engines[0].PrefixHits += 80
		src.decisions = append([]Decision{{
			RequestID: fmt.Sprint("r", n), At: now, Worker: "w0", PromptBlocks: 10, CachedBlocks: 9, PredictedHitRate: 0.9,
		}}, src.decisions...)
	}
	// Five minutes: one request every 50 s, so most 20 s buckets have none.
	for i := range 150 {
		now = now.Add(2 * time.Second)
		if i%25 == 0 {
			request(i)
		}
		s.collect(context.Background(), now, true)
	}
	card := gpuCardVM(cfg, src.engines[0], s.collect(context.Background(), now, false).workers["w0"])
	if len(card.Chart.Measured) != 1 {
		t.Errorf("measured line in %d pieces %q, want one through the idle ticks", len(card.Chart.Measured), card.Chart.Measured)
	}
	if len(card.Chart.Predicted) != 1 {
		t.Fatalf("predicted line in %d pieces %q, want one: the router decided", len(card.Chart.Predicted), card.Chart.Predicted)
	}
	if n := strings.Count(card.Chart.Predicted[0], ","); n < 10 {
		t.Errorf("predicted line has %d points, want one per bucket since the first decision", n)
	}
	if card.Chart.MeasuredNow != "80%" || card.Chart.PredictedNow != "90%" {
		t.Errorf("now: measured %s predicted %s, want 80%% and 90%%", card.Chart.MeasuredNow, card.Chart.PredictedNow)
	}

	// The engine source fails for a minute: that is missing data, a gap.
	src.enginesErr = errors.New("down")
	for range 30 {
		now = now.Add(2 * time.Second)
		s.collect(context.Background(), now, true)
	}
	src.enginesErr = nil
	for range 15 {
		now = now.Add(2 * time.Second)
		s.collect(context.Background(), now, true)
	}
	card = gpuCardVM(cfg, src.engines[0], s.collect(context.Background(), now, false).workers["w0"])
	if len(card.Chart.Measured) != 2 {
		t.Errorf("measured line in %d pieces %q, want two around the minute the engine was not read", len(card.Chart.Measured), card.Chart.Measured)
	}

	// An engine whose metrics fail is not read either.
	src.engines[0].Err = "metrics: connection refused"
	src.engines[0].PrefixQueries, src.engines[0].PrefixHits = 0, 0
	for range 30 {
		now = now.Add(2 * time.Second)
		s.collect(context.Background(), now, true)
	}
	chart := s.collect(context.Background(), now, false).workers["w0"].chart
	if last := chart[len(chart)-1]; !math.IsNaN(last.measured) {
		t.Errorf("measured %v while the engine's metrics fail, want a gap", last.measured)
	}
}

func TestSamplerCountsEachDecisionOnce(t *testing.T) {
	cfg := testConfig()
	src := &fakeSources{}
	s := newSampler(cfg, Deps{Router: src})
	d := func(id string, at time.Time, cached int) Decision {
		return Decision{RequestID: id, At: at, Worker: "w0", PromptBlocks: 10, CachedBlocks: cached}
	}
	now := t0
	// Newest first, as the router returns them; two share an instant.
	src.decisions = []Decision{d("b", t0, 10), d("a", t0, 0)}
	s.collect(context.Background(), now, true)
	// The next tick sees them again plus one more at the same instant and
	// one later.
	src.decisions = []Decision{d("d", t0.Add(time.Second), 10), d("c", t0, 10), d("b", t0, 10), d("a", t0, 0)}
	now = now.Add(2 * time.Second)
	s.collect(context.Background(), now, true)
	s.collect(context.Background(), now.Add(2*time.Second), true)

	h := s.history["w0"]
	var cached, total int64
	for _, b := range h.ring {
		cached += b.predCached
		total += b.predTotal
	}
	if cached != 30 || total != 40 {
		t.Errorf("counted %d/%d predicted blocks, want 30/40 (each decision once)", cached, total)
	}
}

func TestSamplerSourceErrors(t *testing.T) {
	src := &fakeSources{enginesErr: errors.New("boom"), routerErr: errors.New("bang"), trafficErr: errors.New("crash")}
	s := newSampler(testConfig(), Deps{Engines: src, Router: src, Traffic: src})
	snap := s.collect(context.Background(), t0, true)
	for name, err := range map[string]error{"engines": snap.enginesErr, "router": snap.routerErr, "traffic": snap.trafficErr} {
		if err == nil || !strings.HasPrefix(err.Error(), name+": ") {
			t.Errorf("%s error = %v, want it wrapped with its source", name, err)
		}
	}
	// Nil sources are simply empty.
	empty := newSampler(testConfig(), Deps{}).collect(context.Background(), t0, true)
	if empty.enginesErr != nil || len(empty.engines) != 0 || len(empty.decisions) != 0 {
		t.Errorf("nil sources: %+v", empty)
	}
}

func TestTotals(t *testing.T) {
	cfg := testConfig()
	snap := &snapshot{
		at: t0,
		engines: []Engine{
			{Worker: "fast", Running: 2, Waiting: 1, PrefillTokensPerSec: 10_000},
			{Worker: "slow", Running: 1},
		},
		queue: 3,
		requests: []Request{
			{At: t0.Add(-10 * time.Second), Worker: "fast", CachedTokens: 20_000, TTFT: 100 * time.Millisecond},
			{At: t0.Add(-30 * time.Second), Worker: "slow", CachedTokens: 5_000, TTFT: 200 * time.Millisecond},
			{At: t0.Add(-2 * time.Minute), Worker: "fast", TTFT: 300 * time.Millisecond},
			{At: t0.Add(-4 * time.Minute), Worker: "fast", TTFT: 2 * time.Second},
			{At: t0.Add(-4 * time.Minute), Worker: "fast"},                              // no first token
			{At: t0.Add(-6 * time.Minute), Worker: "fast", TTFT: time.Hour},             // outside the window
			{At: t0.Add(time.Minute), Worker: "fast", TTFT: time.Hour, CachedTokens: 1}, // clock skew
		},
		cluster: clusterView{hitRate: 0.625},
	}
	got := totalsVM(cfg, snap)
	want := map[string]string{
		"RequestsPerSec": "0.03", // 2 in the last minute
		"TTFTP50":        "200 ms",
		"TTFTP90":        "2.00 s",
		"PrefillSaved":   "3.0 s", // 20k at 10k/s + 5k at the 5k/s default
		"HitRate":        "63%",
	}
	for field, w := range want {
		var g string
		switch field {
		case "RequestsPerSec":
			g = got.RequestsPerSec
		case "TTFTP50":
			g = got.TTFTP50
		case "TTFTP90":
			g = got.TTFTP90
		case "PrefillSaved":
			g = got.PrefillSaved
		case "HitRate":
			g = got.HitRate
		}
		if g != w {
			t.Errorf("%s = %q, want %q", field, g, w)
		}
	}
	if got.Running != 3 || got.Waiting != 1 || got.Queued != 3 {
		t.Errorf("running/waiting/queued = %d/%d/%d", got.Running, got.Waiting, got.Queued)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"none", nil, 0.5, 0},
		{"one", ms(7), 0.9, 7 * time.Millisecond},
		{"median of four", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"p90 of ten", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.9, 9 * time.Millisecond},
		{"p100", ms(1, 2), 1, 2 * time.Millisecond},
	}
	for _, tc := range tests {
		if got := percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestKVBar(t *testing.T) {
	tests := []struct {
		name                         string
		e                            Engine
		known                        bool
		used, cached, empty          int
		usedW, cachedX, cachedW      string
		usedPct, cachedPct, emptyPct string
	}{
		{name: "unknown size", e: Engine{UsedBlocks: 5}},
		{name: "typical", e: Engine{TotalBlocks: 1000, UsedBlocks: 250, CachedFreeBlocks: 500}, known: true,
			used: 250, cached: 500, empty: 250, usedW: "75", cachedX: "75", cachedW: "150", usedPct: "25%", cachedPct: "50%", emptyPct: "25%"},
		{name: "over-reported cache is clamped", e: Engine{TotalBlocks: 100, UsedBlocks: 80, CachedFreeBlocks: 50}, known: true,
			used: 80, cached: 20, empty: 0, usedW: "240", cachedX: "240", cachedW: "60", usedPct: "80%", cachedPct: "20%", emptyPct: "0%"},
		{name: "negative counts", e: Engine{TotalBlocks: 10, UsedBlocks: -3, CachedFreeBlocks: -1}, known: true,
			used: 0, cached: 0, empty: 10, usedW: "0", cachedX: "0", cachedW: "0", usedPct: "0%", cachedPct: "0%", emptyPct: "100%"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := kvBarVM(tc.e)
			if b.Known != tc.known {
				t.Fatalf("known = %v", b.Known)
			}
			if !tc.known {
				return
			}
			if b.Used != tc.used || b.CachedFree != tc.cached || b.Empty != tc.empty {
				t.Errorf("blocks %d/%d/%d, want %d/%d/%d", b.Used, b.CachedFree, b.Empty, tc.used, tc.cached, tc.empty)
			}
			if b.UsedW != tc.usedW || b.CachedX != tc.cachedX || b.CachedW != tc.cachedW {
				t.Errorf("geometry used %s, cached %s+%s", b.UsedW, b.CachedX, b.CachedW)
			}
			if b.UsedPct != tc.usedPct || b.CachedPct != tc.cachedPct || b.EmptyPct != tc.emptyPct {
				t.Errorf("percentages %s %s %s", b.UsedPct, b.CachedPct, b.EmptyPct)
			}
		})
	}
}

func TestPolylines(t *testing.T) {
	nan := math.NaN()
	pts := func(v ...float64) []chartPoint {
		out := make([]chartPoint, len(v))
		for i, x := range v {
			out[i] = chartPoint{predicted: nan, measured: x}
		}
		return out
	}
	measured := func(p chartPoint) float64 { return p.measured }
	tests := []struct {
		name string
		in   []chartPoint
		want []string
	}{
		{"no data", pts(nan, nan, nan), nil},
		{"full line", pts(0, 0.5, 1), []string{"34,78 165,42 296,6"}},
		{"gap splits", pts(1, nan, 0), []string{"34,6 37,6", "296,78 299,78"}},
		{"clamped", pts(-1, 2), []string{"34,78 296,6"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := polylines(tc.in, measured)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// A decision's row names the client, session, model and first-token time
// of its request once the request has finished, and says "–" before.
func TestRequestsJoinTraffic(t *testing.T) {
	cfg := testConfig()
	snap := &snapshot{
		at:      t0,
		engines: []Engine{{Worker: "w0", Model: "Qwen/Qwen3-14B-FP8"}, {Worker: "w1"}},
		decisions: []Decision{
			{RequestID: "running", At: t0, Worker: "w1", PromptBlocks: 4},
			{RequestID: "done", At: t0.Add(-time.Second), Worker: "w0", PromptBlocks: 4},
			{RequestID: "anonymous", At: t0.Add(-2 * time.Second), Worker: "gone", PromptBlocks: 4},
		},
		requests: []Request{
			{ID: "done", SessionID: "0f3a9c21-7b44-4e0d-9a1c-2b3c4d5e6f70", Client: "claude-code", TTFT: 412 * time.Millisecond,
				Hints: "priority=-1(inferred),osl=300(client)"},
			{ID: "anonymous"},
		},
	}
	rows := requestsVM(cfg, snap).Rows
	type cells struct{ client, session, full, model, ttft, hints string }
	want := []cells{
		{noValue, noValue, "", noValue, noValue, noValue},
		{"claude-code", "0f3a9c21…", "0f3a9c21-7b44-4e0d-9a1c-2b3c4d5e6f70", "Qwen/Qwen3-14B-FP8", "412 ms", "priority=-1(inferred),osl=300(client)"},
		{"unknown", noValue, "", noValue, noValue, noValue},
	}
	for i, w := range want {
		r := rows[i]
		if got := (cells{r.Client, r.Session, r.SessionFull, r.Model, r.TTFT, r.Hints}); got != w {
			t.Errorf("row %s: %+v, want %+v", r.RequestID, got, w)
		}
	}
	var page strings.Builder
	if err := components.RequestsBody(requestsVM(cfg, snap)).Render(context.Background(), &page); err != nil {
		t.Fatal(err)
	}
	if want := `<dt>Hints</dt><dd class="mono">priority=-1(inferred),osl=300(client)</dd>`; !strings.Contains(page.String(), want) {
		t.Errorf("the requests page does not show the hints: no %s in\n%s", want, page.String())
	}
	if got := shortID("abc"); got != "abc" {
		t.Errorf("short id of a short id: %q", got)
	}
}

func TestSessionTurnsMarkDivergence(t *testing.T) {
	cfg := testConfig()
	cfg.TurnsShown = 3
	side := func(prompt int) Turn {
		return Turn{At: t0, Kind: TurnKindSide, Worker: "w0", PromptTokens: prompt, OutputTokens: 12}
	}
	s := Session{ID: "s1", Client: "claude-code", Worker: "w0", LastActive: t0.Add(-2 * time.Minute), Turns: []Turn{
		side(360), // the topic request before the first turn
		{At: t0, Kind: TurnKindTurn, PromptTokens: 10_000, CachedTokens: 0},
		{At: t0, Kind: TurnKindTurn, PromptTokens: 12_000, CachedTokens: 9_984},  // 83%
		{At: t0, Kind: TurnKindTurn, PromptTokens: 14_000, CachedTokens: 11_984}, // 86%
		side(40), // a quota probe
		{At: t0, Kind: TurnKindTurn, PromptTokens: 15_000, CachedTokens: 48, Diverged: true, DivergedBlock: 3, Cause: "evicted"},      // lost
		{At: t0, Kind: TurnKindTurn, PromptTokens: 16_000, CachedTokens: 14_992, OutputTokens: 500},                                   // 94%, recovers
		{At: t0, Kind: TurnKindTurn, Worker: "w1", PromptTokens: 17_000, CachedTokens: 16, Diverged: true, Cause: "routed_elsewhere"}, // lost
		{At: t0, Kind: TurnKindTurn, PromptTokens: 30_000, CachedTokens: 14_000},                                                      // 47%: a long new message, nothing lost
		side(459),
	}}
	row := sessionRowVM(cfg, t0, &s)
	if row.Busted != 2 {
		t.Errorf("busted turns = %d, want 2", row.Busted)
	}
	if row.LastLow || row.LastShare != "47%" {
		t.Errorf("last turn: low %v share %s; want the last turn, not the side request, and not low", row.LastLow, row.LastShare)
	}
	if row.Context != "30.0k" || row.Idle != "2 min" || row.Turns != 7 || row.Sides != 3 {
		t.Errorf("row %+v", row)
	}
	if row.HiddenTurns != 4 || len(row.TurnRows) != 3 {
		t.Fatalf("hidden %d, shown %d", row.HiddenTurns, len(row.TurnRows))
	}
	if tr := row.TurnRows[0]; tr.N != 5 || tr.Busted || tr.Diverged != "" || tr.Share != "94%" {
		t.Errorf("turn 5: %+v", tr)
	}
	if tr := row.TurnRows[1]; tr.N != 6 || !tr.Busted || tr.Diverged != "diverged at block 0: routed to w1, which did not have it" {
		t.Errorf("turn 6: %+v", tr)
	}
	if tr := row.TurnRows[2]; tr.N != 7 || tr.Busted || tr.Diverged != "" {
		t.Errorf("turn 7: %+v", tr)
	}
	if len(row.SideRows) != 3 || row.SideRows[0].Prompt != "360" || row.SideRows[2].Prompt != "459" || row.HiddenSides != 0 {
		t.Errorf("side rows %+v", row.SideRows)
	}
	for _, tc := range []struct {
		turn Turn
		want string
	}{
		{Turn{DivergedBlock: 3, Cause: "evicted"}, "diverged at block 3: evicted from the GPU"},
		{Turn{DivergedBlock: 7, Cause: "prompt_changed"}, "prompt changed at block 7"},
		{Turn{DivergedBlock: 2}, "diverged at block 2"},
	} {
		if got := divergedText(&tc.turn); got != tc.want {
			t.Errorf("divergedText(%+v) = %q, want %q", tc.turn, got, tc.want)
		}
	}
}

func TestSessionsOrderAndCap(t *testing.T) {
	cfg := testConfig()
	cfg.SessionsShown = 2
	snap := &snapshot{at: t0, sessions: []Session{
		{ID: "old", LastActive: t0.Add(-time.Hour)},
		{ID: "new", LastActive: t0},
		{ID: "mid", LastActive: t0.Add(-time.Minute)},
	}}
	vm := sessionsVM(cfg, snap)
	if vm.Total != 3 || len(vm.Rows) != 2 || vm.Rows[0].ID != "new" || vm.Rows[1].ID != "mid" {
		t.Errorf("rows %+v total %d", vm.Rows, vm.Total)
	}
	if vm.Rows[0].Context != noValue || vm.Rows[0].LastShare != noValue {
		t.Errorf("a session without turns shows %q %q", vm.Rows[0].Context, vm.Rows[0].LastShare)
	}
}

func TestDomIDUnique(t *testing.T) {
	a, b := domID("s-", "a/b"), domID("s-", "a.b")
	if a == b {
		t.Errorf("%q and %q collide", a, b)
	}
	long := domID("s-", strings.Repeat("x", 500)+"<script>")
	if len(long) > 60 || strings.ContainsAny(long, "<>\"' ") {
		t.Errorf("id %q", long)
	}
}

func TestFormatters(t *testing.T) {
	tests := []struct{ got, want string }{
		{fmtPct(math.NaN()), noValue}, {fmtPct(0.505), "51%"}, {fmtPct(1), "100%"},
		{fmtRate(0), "0"}, {fmtRate(3.456), "3.46"}, {fmtRate(45.67), "45.7"}, {fmtRate(1234.5), "1234"},
		{fmtLatency(0), noValue}, {fmtLatency(500 * time.Microsecond), "<1 ms"}, {fmtLatency(340 * time.Millisecond), "340 ms"},
		{fmtLatency(2400 * time.Millisecond), "2.40 s"}, {fmtLatency(63 * time.Second), "63.0 s"},
		{fmtSeconds(0), "0 s"}, {fmtSeconds(4.24), "4.2 s"}, {fmtSeconds(125), "125 s"}, {fmtSeconds(900), "15.0 min"},
		{fmtTokens(812), "812"}, {fmtTokens(48_200), "48.2k"}, {fmtTokens(1_300_000), "1.3M"},
		{fmtAgo(time.Second), "active"}, {fmtAgo(17 * time.Second), "15 s"}, {fmtAgo(5 * time.Minute), "5 min"},
		{fmtAgo(3 * time.Hour), "3 h"}, {fmtAgo(72 * time.Hour), "3 d"},
		{fmtWindow(5 * time.Minute), "5 min"}, {fmtWindow(90 * time.Second), "90 s"},
	}
	for i, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("case %d: %q, want %q", i, tc.got, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{}, true},
		{"sub path", Config{BasePath: "/ui"}, true},
		{"root", Config{BasePath: "/"}, false},
		{"trailing slash", Config{BasePath: "/ui/"}, false},
		{"relative", Config{BasePath: "ui"}, false},
		{"chart buckets shorter than the interval", Config{Interval: 10 * time.Second, ChartWindow: time.Minute, ChartPoints: 30}, false},
		{"API URL without scheme", Config{APIBaseURL: "hearth.lan:8080"}, false},
		{"API URL", Config{APIBaseURL: "https://hearth.lan"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, Deps{Keys: NewMemoryStore(Settings{}, nil)})
			if (err == nil) != tc.ok {
				t.Errorf("err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	if _, err := New(Config{}, Deps{}); err == nil {
		t.Error("New without a key store succeeded")
	}
}
