package bench

import (
	"container/heap"
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// smallAgentic is a workload small enough for the test suite that still
// has agentic structure: a shared prefix, growing sessions, tool pauses.
func smallAgentic(t testing.TB, seed uint64, sessions int) *Agentic {
	t.Helper()
	w, err := NewAgentic(AgenticConfig{
		Seed:         seed,
		PrefixTokens: 2000,
		Steps:        5,
		ResultTokens: IntRange{Min: 200, Max: 1000},
		ToolPause:    LogNormal{Median: time.Second, P90: 4 * time.Second},
		Sessions:     sessions,
		Duration:     2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// runDES runs w under policy on s's simulation to its end and closes it
// when the test ends.
func runDES(t testing.TB, s *Sim, w Workload, policy string) *des {
	t.Helper()
	d, err := s.newDES(w, policy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.close)
	if err := d.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}

func newTestSim(t testing.TB, cfg SimConfig) *Sim {
	t.Helper()
	s, err := NewSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSimKVAwarePoliciesBeatRoundRobin(t *testing.T) {
	s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090", "rtx4090"}})
	w := smallAgentic(t, 1, 4)
	p50 := map[string]float64{}
	for _, policy := range []string{router.PolicyRoundRobin, router.PolicyKV, router.PolicyHearth} {
		run, err := s.Run(context.Background(), w, policy, 4, nil)
		if err != nil {
			t.Fatalf("%s: %v", policy, err)
		}
		sum := run.Summary
		if sum.Requests < 50 || sum.Errors != 0 {
			t.Fatalf("%s: %d requests, %d errors; want a real run without errors", policy, sum.Requests, sum.Errors)
		}
		p50[policy] = sum.TTFT.P50
		t.Logf("%-12s requests %d  ttft p50 %.1f ms  engine hit %.1f%%", policy, sum.Requests, sum.TTFT.P50, 100*sum.EngineHitRate)
	}
	for _, policy := range []string{router.PolicyKV, router.PolicyHearth} {
		if !(p50[policy] < p50[router.PolicyRoundRobin]) {
			t.Errorf("%s TTFT p50 %.1f ms, round_robin %.1f ms: want the KV-aware policy ahead", policy, p50[policy], p50[router.PolicyRoundRobin])
		}
	}
}

func TestSimIsDeterministic(t *testing.T) {
	s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090", "rtx3090"}, Seed: 3})
	run := func(seed uint64, policy string) RunSummary {
		t.Helper()
		r, err := s.Run(context.Background(), smallAgentic(t, seed, 3), policy, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.Summary
	}
	for _, policy := range []string{router.PolicyRandom, router.PolicyHearth} {
		a, b := run(7, policy), run(7, policy)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: same seed, different summaries:\n%+v\n%+v", policy, a, b)
		}
		if c := run(8, policy); reflect.DeepEqual(a, c) {
			t.Errorf("%s: seeds 7 and 8 gave identical summaries; the seed does not reach the run", policy)
		}
	}
}

// TestSimEngineCountersMatchResults checks the per-request cached tokens
// against the engines' own prefix-cache counters, and that every event
// batch decoded cleanly in the router.
func TestSimEngineCountersMatchResults(t *testing.T) {
	s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090", "rtx4090"}})
	d := runDES(t, s, smallAgentic(t, 2, 4), router.PolicyKV)
	run := d.result(router.PolicyKV, 4)
	var cached, prompt int64
	for _, r := range run.Results {
		cached += int64(r.CachedTokens)
		prompt += int64(r.PromptTokens)
	}
	var hits, queries int64
	for _, e := range run.Engines {
		hits += e.PrefixHits + e.ExternalPrefixHits // GPU hits and host-RAM loads
		queries += e.PrefixQueries
	}
	if cached != hits || prompt != queries {
		t.Errorf("results: %d cached of %d prompt tokens; engines: %d hits of %d queries", cached, prompt, hits, queries)
	}
	if got := run.EngineHitRate() + run.RAMHitRate(); math.Abs(got-run.Summary.EngineHitRate) > 1e-12 {
		t.Errorf("engine hit rate %v from counters, %v from results", got, run.Summary.EngineHitRate)
	}
	if run.EventBatches == 0 {
		t.Fatal("no event batch reached the router")
	}
	for _, e := range d.engines {
		st := e.ingester.Stats()
		if st.Malformed != 0 || st.Skipped != 0 || st.Orphans != 0 || st.Gaps != 0 {
			t.Errorf("engine %s: ingest %+v; want every batch decoded and chained", e.gpu, st)
		}
		if st.BlocksStored == 0 {
			t.Errorf("engine %s: no block stored in the index", e.gpu)
		}
	}
}

// TestSimOffloading: with a host-RAM tier (the default) contexts the GPU
// evicted come back from RAM, the router sees them in its RAM tier and
// predicts the loads; without it they are recomputed.
func TestSimOffloading(t *testing.T) {
	tests := []struct {
		name     string
		gib      float64
		wantLoad bool
	}{
		{"default tier", 0, true},
		{"tier off", -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A GPU cache of 640 blocks (10k tokens) cannot keep four
			// sessions' contexts across their tool pauses.
			s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090", "rtx4090"},
				Engine: sim.Config{NumGPUBlocks: 640}, KVOffloadingGiB: tt.gib})
			d := runDES(t, s, smallAgentic(t, 3, 4), router.PolicyHearth)
			run := d.result(router.PolicyHearth, 4)
			var loaded int64
			for _, e := range run.Engines {
				loaded += e.ExternalPrefixHits
				if tt.wantLoad != (e.NumCPUBlocks == 13107) {
					t.Errorf("engine %s: %d CPU blocks", e.GPU, e.NumCPUBlocks)
				}
			}
			var ram [router.MaxWorkers]int
			d.router.Index().BlockCounts(kvtier.RAM, &ram)
			predictedLower := 0
			for _, dec := range d.router.Decisions(0) {
				predictedLower += dec.LowerTierBlocks
			}
			t.Logf("loaded %d tokens from RAM; router RAM blocks %v; recent decisions predict %d lower-tier blocks; hit rate %.1f%%",
				loaded, ram[:2], predictedLower, 100*run.Summary.EngineHitRate)
			if got := loaded > 0 && ram[0]+ram[1] > 0 && predictedLower > 0; got != tt.wantLoad {
				t.Errorf("loads, RAM index and predictions seen: %v, want %v", got, tt.wantLoad)
			}
			for _, e := range d.engines {
				if st := e.ingester.Stats(); st.Orphans != 0 || st.UnknownRemove != 0 || st.Malformed != 0 {
					t.Errorf("engine %s: ingest %+v; every CPU event must map through a GPU one", e.gpu, st)
				}
			}
		})
	}
}

// scriptDriver hands out fixed requests at fixed times (open loop).
type scriptDriver struct {
	reqs     []*Request
	next     int
	inflight int
	ended    map[*Request]time.Duration
}

func (s *scriptDriver) Next(now time.Duration) *Request {
	if s.next >= len(s.reqs) || s.reqs[s.next].Due > now {
		return nil
	}
	s.next++
	s.inflight++
	return s.reqs[s.next-1]
}

func (s *scriptDriver) Wake() (time.Duration, bool) {
	if s.next >= len(s.reqs) {
		return 0, false
	}
	return s.reqs[s.next].Due, true
}

func (s *scriptDriver) Complete(req *Request, now time.Duration, _ bool) {
	s.inflight--
	if s.ended == nil {
		s.ended = map[*Request]time.Duration{}
	}
	s.ended[req] = now
}

func (s *scriptDriver) Finished() bool { return s.next >= len(s.reqs) && s.inflight == 0 }

// scriptWorkload is a trace-like workload of fixed requests.
type scriptWorkload struct{ d *scriptDriver }

func (w scriptWorkload) Kind() string      { return "trace" }
func (w scriptWorkload) NewDriver() Driver { return w.d }

func promptOf(n int) []uint32 {
	p := make([]uint32, n)
	fillTokens(p, NewRand(99))
	return p
}

func TestSimDeliversEventsAfterTheLatency(t *testing.T) {
	const latency = 40 * time.Millisecond
	s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090"}, EventLatency: latency})
	prompt := promptOf(160) // 10 blocks
	drv := &scriptDriver{reqs: []*Request{{Session: "a", Prompt: prompt, OutputTokens: 2}}}
	d, err := s.newDES(scriptWorkload{drv}, router.PolicyKV)
	if err != nil {
		t.Fatal(err)
	}
	hashes := tokenizer.BlockHashes(prompt, tokenizer.DefaultBlockSize)
	var overlap [router.MaxWorkers]int
	deliveries := 0
	d.onDeliver = func(e *desEngine, published time.Duration) {
		if got := d.now - published; got != latency {
			t.Errorf("batch published at %v delivered at %v: lag %v, want %v", published, d.now, got, latency)
		}
		if deliveries == 0 {
			// The engine holds the blocks already; the router must not.
			if len(e.core.CachedBlockHashes()) == 0 {
				t.Error("engine has no cached block when its first batch arrives")
			}
			d.router.Index().Match(hashes, 0, &overlap)
			if overlap[e.worker] != 0 {
				t.Errorf("router sees %d blocks before the first batch arrived", overlap[e.worker])
			}
		}
		deliveries++
	}
	if err := d.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Deliveries still queued when the driver finished are applied now.
	for len(d.events.items) > 0 {
		ev := heap.Pop(&d.events).(desEvent)
		d.now = ev.at
		if ev.kind == evDeliver {
			d.deliver(ev)
		}
	}
	if deliveries == 0 {
		t.Fatal("no batch delivered")
	}
	d.router.Index().Match(hashes, 0, &overlap)
	if overlap[d.engines[0].worker] != len(hashes) {
		t.Errorf("router sees %d of %d prompt blocks after delivery", overlap[d.engines[0].worker], len(hashes))
	}
}

// TestSimRouterSeesTheLaggedView sends the same prompt twice, the second
// time shortly after the first has finished: with a short event latency
// the router predicts a hit, with a long one it cannot know yet.
func TestSimRouterSeesTheLaggedView(t *testing.T) {
	prompt := promptOf(640)
	for _, tc := range []struct {
		name    string
		latency time.Duration
		wantHit bool
	}{
		{"short latency", 5 * time.Millisecond, true},
		{"long latency", 30 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090", "rtx4090"}, EventLatency: tc.latency})
			first := &Request{Session: "a", Prompt: prompt, OutputTokens: 4}
			second := &Request{Session: "b", Prompt: prompt, OutputTokens: 4, Due: 2 * time.Second}
			drv := &scriptDriver{reqs: []*Request{first, second}}
			d := runDES(t, s, scriptWorkload{drv}, router.PolicyKV)
			if drv.ended[first] >= second.Due {
				t.Fatalf("first request ended at %v, after the second fell due", drv.ended[first])
			}
			var predicted, cached int
			for _, r := range d.results {
				if r.Session == "b" {
					predicted, cached = r.PredictedCachedTokens, r.CachedTokens
				}
			}
			if gotHit := predicted > 0; gotHit != tc.wantHit {
				t.Errorf("predicted %d cached tokens (engine served %d); want a predicted hit: %v", predicted, cached, tc.wantHit)
			}
			if tc.wantHit && cached == 0 {
				t.Error("the router predicted a hit but the engine served nothing from cache")
			}
		})
	}
}

// TestSimQueuesWhenEveryWorkerIsSaturated shrinks the engines' caches so
// that the router's saturation check holds requests back. They must wait
// in the router's own queue (its decisions record the wait), all finish,
// and a second run must repeat the first exactly.
func TestSimQueuesWhenEveryWorkerIsSaturated(t *testing.T) {
	s := newTestSim(t, SimConfig{
		GPUs:   []string{"rtx4090", "rtx4090"},
		Engine: sim.Config{NumGPUBlocks: 400},
	})
	run := func(t *testing.T, policy string) (*SimRun, []router.Decision) {
		t.Helper()
		w, err := NewAgentic(AgenticConfig{
			Seed: 4, PrefixTokens: 2000, Steps: 3, ResultTokens: IntRange{Min: 500, Max: 1500},
			ToolPause: Constant{Value: 100 * time.Millisecond}, Sessions: 8, TotalSessions: 12,
		})
		if err != nil {
			t.Fatal(err)
		}
		d := runDES(t, s, w, policy)
		if len(d.waiting) != 0 || d.router.QueueLen() != 0 {
			t.Errorf("%d requests still waiting, router queue %d", len(d.waiting), d.router.QueueLen())
		}
		return d.result(policy, 8), d.router.Decisions(0)
	}
	for _, policy := range []string{router.PolicyKV, router.PolicyHearth} {
		t.Run(policy, func(t *testing.T) {
			first, decisions := run(t, policy)
			if first.Queued == 0 {
				t.Error("no request waited for a worker; the test does not exercise the queue")
			}
			waited := 0
			for _, dec := range decisions {
				if dec.Queued > 0 {
					waited++
				}
			}
			if waited == 0 {
				t.Error("no decision came out of the router queue")
			}
			if want := 12 * 3; first.Summary.Requests != want || first.Summary.Errors != 0 {
				t.Errorf("%d requests, %d errors; want %d without errors", first.Summary.Requests, first.Summary.Errors, want)
			}
			second, _ := run(t, policy)
			if !reflect.DeepEqual(first.Summary, second.Summary) || first.Queued != second.Queued || first.MaxQueue != second.MaxQueue {
				t.Errorf("two runs differ:\n%+v (queued %d, peak %d)\n%+v (queued %d, peak %d)",
					first.Summary, first.Queued, first.MaxQueue, second.Summary, second.Queued, second.MaxQueue)
			}
		})
	}
}

func TestSimReportsEngineErrors(t *testing.T) {
	s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090"}, Engine: sim.Config{NumGPUBlocks: 100, MaxModelLen: 1600}})
	drv := &scriptDriver{reqs: []*Request{
		{Session: "long", Prompt: promptOf(2000), OutputTokens: 1},
		{Session: "ok", Prompt: promptOf(100), OutputTokens: 1},
	}}
	d := runDES(t, s, scriptWorkload{drv}, router.PolicyKV)
	sum := d.result(router.PolicyKV, 0).Summary
	if sum.Requests != 2 || sum.Errors != 1 {
		t.Fatalf("%d requests, %d errors; want 2 and 1", sum.Requests, sum.Errors)
	}
	for _, r := range d.results {
		if r.Session == "long" && !errors.Is(r.Err, sim.ErrPromptTooLong) {
			t.Errorf("long prompt: %v, want ErrPromptTooLong", r.Err)
		}
	}
	if causes := sum.ErrorsByCause; causes != (ErrorCauses{ContextLength: 1}) {
		t.Errorf("error causes %+v, want one context_length", causes)
	}
}

func TestSimStopsWhenContextEnds(t *testing.T) {
	s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090"}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Run(ctx, smallAgentic(t, 1, 2), router.PolicyKV, 2, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

func TestSimConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  SimConfig
	}{
		{"no engines", SimConfig{}},
		{"unknown gpu", SimConfig{GPUs: []string{"rtx9999"}}},
		{"unknown model", SimConfig{GPUs: []string{"rtx4090"}, Model: "llama"}},
		{"too many engines", SimConfig{GPUs: make([]string, router.MaxWorkers+1)}},
		{"bad router", SimConfig{GPUs: []string{"rtx4090"}, Router: router.Config{SaturationFraction: 2}}},
		{"tp does not divide the gpus", SimConfig{GPUs: []string{"rtx4090", "rtx4090", "rtx4090"}, Engine: sim.Config{TP: 2}}},
		{"tp over kinds none paces", SimConfig{GPUs: []string{"rtx4090", "a6000"}, Engine: sim.Config{TP: 2}}},
		{"tp the heads refuse", SimConfig{GPUs: []string{"rtx4090", "rtx4090", "rtx4090"}, Engine: sim.Config{TP: 3}}},
		{"kv dtype not modelled", SimConfig{GPUs: []string{"rtx4090"}, Engine: sim.Config{KVCacheDtype: "int8"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewSim(tc.cfg); !errors.Is(err, ErrBadSim) {
				t.Errorf("got %v, want ErrBadSim", err)
			}
		})
	}
}

func TestRunPlanRunsEveryPolicyAtEveryLevel(t *testing.T) {
	s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090"}})
	plan := Plan{
		Policies: []string{router.PolicyRoundRobin, router.PolicyKV},
		Levels:   []int{1, 2},
		Workload: func(level int) (Workload, error) {
			return NewAgentic(AgenticConfig{Seed: 1, PrefixTokens: 500, Steps: 2, Sessions: level, TotalSessions: 2,
				ToolPause: Constant{Value: 10 * time.Millisecond}})
		},
	}
	runs, err := RunPlan(context.Background(), plan, s)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.Policy+"@"+string(rune('0'+r.Sessions)))
	}
	want := []string{"round_robin@1", "kv@1", "round_robin@2", "kv@2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("runs %v, want %v", got, want)
	}
	if _, err := RunPlan(context.Background(), Plan{}, s); !errors.Is(err, ErrBadPlan) {
		t.Errorf("empty plan: %v, want ErrBadPlan", err)
	}
}

// TestSimTensorParallel: --tp 2 on two GPUs is one engine over both, with
// the KV cache the planner gives it, twice that with FP8 KV, and one
// worker for the router.
func TestSimTensorParallel(t *testing.T) {
	for _, tc := range []struct {
		dtype  string
		blocks int
	}{
		{"auto", 159536 / tokenizer.DefaultBlockSize},
		{"fp8", 2 * 159536 / tokenizer.DefaultBlockSize},
	} {
		s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090", "rtx4090"}, Engine: sim.Config{TP: 2, KVCacheDtype: tc.dtype}})
		run, err := s.Run(context.Background(), smallAgentic(t, 1, 2), router.PolicyHearth, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(run.Engines) != 1 {
			t.Fatalf("%s: %d engines, want one over two GPUs", tc.dtype, len(run.Engines))
		}
		if got := run.Engines[0].NumGPUBlocks; got < tc.blocks-1 || got > tc.blocks+1 {
			t.Errorf("%s: %d KV blocks, want %d", tc.dtype, got, tc.blocks)
		}
		if run.Summary.Errors != 0 || run.Engines[0].Requests == 0 {
			t.Errorf("%s: %d errors, %d requests", tc.dtype, run.Summary.Errors, run.Engines[0].Requests)
		}
	}
}

// TestSimTensorParallelOverKinds: --tp 2 over a 4090 and a 3090 is one
// engine that runs as two 3090s do, the slower and smaller rank pacing both.
func TestSimTensorParallelOverKinds(t *testing.T) {
	engine := func(gpus ...string) EngineStats {
		t.Helper()
		s := newTestSim(t, SimConfig{GPUs: gpus, Engine: sim.Config{TP: 2}})
		run, err := s.Run(context.Background(), smallAgentic(t, 1, 2), router.PolicyHearth, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(run.Engines) != 1 || run.Summary.Errors != 0 || run.Engines[0].Requests == 0 {
			t.Fatalf("%v: %d engines, %d errors", gpus, len(run.Engines), run.Summary.Errors)
		}
		return run.Engines[0]
	}
	mixed, slow, fast := engine("rtx4090", "rtx3090"), engine("rtx3090", "rtx3090"), engine("rtx4090", "rtx4090")
	if mixed.GPU != "rtx3090" || mixed.NumGPUBlocks != slow.NumGPUBlocks || mixed.PrefillTokensPerSec != slow.PrefillTokensPerSec {
		t.Errorf("4090+3090: %+v, want the 3090 pair's %+v", mixed, slow)
	}
	if mixed.PrefillTokensPerSec >= fast.PrefillTokensPerSec {
		t.Errorf("4090+3090 prefills %.0f tokens/s, not below the 4090 pair's %.0f", mixed.PrefillTokensPerSec, fast.PrefillTokensPerSec)
	}
}
