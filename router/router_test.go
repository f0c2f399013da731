package router

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/tokenizer"
)

func newFakeClock() *clock.Fake { return clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) }

func newTestRouter(t *testing.T, cfg Config, workers ...WorkerInfo) (*Router, *clock.Fake) {
	t.Helper()
	clk := newFakeClock()
	r, err := New(cfg, WithClock(clk))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for i, w := range workers {
		id, err := r.AddWorker(w)
		if err != nil {
			t.Fatalf("AddWorker: %v", err)
		}
		if id != WorkerID(i) {
			t.Fatalf("worker %d got id %d", i, id)
		}
	}
	return r, clk
}

// chain returns n block hashes unique to name, so tests can build prompts
// that share prefixes by slicing.
func chain(name string, n int) []tokenizer.SeqHash {
	out := make([]tokenizer.SeqHash, n)
	base := tokenizer.SeqHash(0)
	for _, c := range name {
		base = base*131 + tokenizer.SeqHash(c)
	}
	for i := range out {
		out[i] = base<<20 + tokenizer.SeqHash(i+1)
	}
	return out
}

func route(t *testing.T, r *Router, req *Request) Decision {
	t.Helper()
	d, err := r.Route(context.Background(), req)
	if err != nil {
		t.Fatalf("Route(%s): %v", req.ID, err)
	}
	return d
}

func load(t *testing.T, r *Router, id WorkerID) WorkerLoad {
	t.Helper()
	for _, w := range r.Workers() {
		if w.WorkerID == id {
			return w
		}
	}
	t.Fatalf("worker %d not live", id)
	return WorkerLoad{}
}

// TestKVFormulaWorkedExample checks Dynamo's logits computed by hand.
func TestKVFormulaWorkedExample(t *testing.T) {
	a, b, c, d := tokenizer.SeqHash(101), tokenizer.SeqHash(102), tokenizer.SeqHash(103), tokenizer.SeqHash(104)
	setup := func(t *testing.T, weight float64) *Router {
		r, _ := newTestRouter(t, Config{Policy: PolicyKV, OverlapScoreWeight: weight}, WorkerInfo{Name: "w0"}, WorkerInfo{Name: "w1"})
		r.Index().Store(0, kvtier.GPU, []tokenizer.SeqHash{a, b, c})
		r.Index().Store(1, kvtier.GPU, []tokenizer.SeqHash{a})
		// P0 → w0: 40 prompt tokens, nothing cached: 40 pending, 2 active blocks.
		route(t, r, &Request{ID: "p0", Hashes: []tokenizer.SeqHash{901, 902}, PromptTokens: 40, Policy: PolicyRoundRobin})
		// P1 → w1: 48 tokens, block a cached: 32 pending, 3 active blocks (a, b, y).
		route(t, r, &Request{ID: "p1", Hashes: []tokenizer.SeqHash{a, b, 903}, PromptTokens: 48, Policy: PolicyRoundRobin})
		return r
	}
	req := func() *Request {
		return &Request{ID: "r", Hashes: []tokenizer.SeqHash{a, b, c, d}, PromptTokens: 70}
	}
	tests := []struct {
		name   string
		weight float64
		want   [2]float64
		winner WorkerID
	}{
		// w0: prefill (70-3·16+40)/16 = 3.875, decode 2 + 4 new = 6.
		// w1: prefill (70-1·16+32)/16 = 5.375, decode 3 + 2 new (a, b active) = 5.
		{"weight 1", 1, [2]float64{3.875 + 6, 5.375 + 5}, 0},
		{"weight 2", 2, [2]float64{7.75 + 6, 10.75 + 5}, 0},
		{"weight 0.5", 0.5, [2]float64{1.9375 + 6, 2.6875 + 5}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := setup(t, tt.weight)
			d := route(t, r, req())
			for i, c := range d.Candidates {
				if c.Cost != tt.want[i] {
					t.Errorf("worker %d: logit %v, want %v", c.WorkerID, c.Cost, tt.want[i])
				}
			}
			if d.WorkerID != tt.winner || d.Reason != ReasonLowestCost {
				t.Errorf("winner %d (%s), want %d", d.WorkerID, d.Reason, tt.winner)
			}
			wantCached := []int{3, 1}[tt.winner]
			if d.CachedBlocks != wantCached || d.PromptBlocks != 5 || d.PredictedHitRate != float64(wantCached)/5 {
				t.Errorf("cached %d / prompt %d = %v, want %d / 5", d.CachedBlocks, d.PromptBlocks, d.PredictedHitRate, wantCached)
			}
		})
	}
}

func TestKVTies(t *testing.T) {
	t.Run("fewest cached blocks", func(t *testing.T) {
		r, _ := newTestRouter(t, Config{Policy: PolicyKV}, WorkerInfo{Name: "w0"}, WorkerInfo{Name: "w1"}, WorkerInfo{Name: "w2"})
		r.Index().Store(0, kvtier.GPU, chain("other0", 5))
		r.Index().Store(1, kvtier.GPU, chain("other1", 2))
		r.Index().Store(2, kvtier.GPU, chain("other2", 9))
		d := route(t, r, &Request{ID: "r", Hashes: chain("new", 4)})
		if d.WorkerID != 1 || d.Reason != ReasonTieIndex {
			t.Errorf("picked %d (%s), want 1 by fewest cached blocks", d.WorkerID, d.Reason)
		}
	})
	t.Run("random among equal", func(t *testing.T) {
		seen := map[WorkerID]bool{}
		for seed := range int64(20) {
			r, _ := newTestRouter(t, Config{Policy: PolicyKV, Seed: seed}, WorkerInfo{Name: "w0"}, WorkerInfo{Name: "w1"})
			d := route(t, r, &Request{ID: "r", Hashes: chain("new", 4)})
			if d.Reason != ReasonTieRandom {
				t.Fatalf("reason %q, want %q", d.Reason, ReasonTieRandom)
			}
			seen[d.WorkerID] = true
		}
		if !seen[0] || !seen[1] {
			t.Errorf("20 seeds always picked the same worker: %v", seen)
		}
	})
	t.Run("same seed same choice", func(t *testing.T) {
		var first []WorkerID
		for run := range 2 {
			r, _ := newTestRouter(t, Config{Policy: PolicyKV, Seed: 7}, WorkerInfo{Name: "w0"}, WorkerInfo{Name: "w1"}, WorkerInfo{Name: "w2"})
			for i := range 10 {
				d := route(t, r, &Request{ID: string(rune('a' + i)), Hashes: chain("x", 1)})
				r.Free(d.RequestID)
				if run == 0 {
					first = append(first, d.WorkerID)
				} else if first[i] != d.WorkerID {
					t.Fatalf("decision %d: worker %d, first run %d", i, d.WorkerID, first[i])
				}
			}
		}
	})
}

func TestSoftmaxSampling(t *testing.T) {
	cands := []Candidate{{WorkerID: 0, Cost: 10}, {WorkerID: 1, Cost: 12}, {WorkerID: 2, Cost: 20}}
	tests := []struct {
		name string
		temp float64
		want [3]float64
	}{
		// span 10: weights exp(-1/T), exp(-1.2/T), exp(-2/T), normalised.
		{"T=1", 1, norm3(0.36787944, 0.30119421, 0.13533528)},
		{"T=0.1", 0.1, norm3(4.539993e-05, 6.144212e-06, 2.0611536e-09)},
		{"T=10", 10, norm3(0.90483742, 0.88692044, 0.81873075)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := newTestRouter(t, Config{Seed: 3})
			const n = 30000
			var hits [3]int
			for range n {
				hits[sampleSoftmax(cands, tt.temp, r.rng)]++
			}
			for i := range hits {
				got := float64(hits[i]) / n
				if d := got - tt.want[i]; d > 0.015 || d < -0.015 {
					t.Errorf("worker %d chosen %.3f of the time, want %.3f", i, got, tt.want[i])
				}
			}
		})
	}
	t.Run("equal costs uniform", func(t *testing.T) {
		r, _ := newTestRouter(t, Config{Seed: 4})
		eq := []Candidate{{Cost: 5}, {Cost: 5}}
		zero := 0
		for range 10000 {
			if sampleSoftmax(eq, 1, r.rng) == 0 {
				zero++
			}
		}
		if zero < 4700 || zero > 5300 {
			t.Errorf("first of two equal workers chosen %d of 10000 times", zero)
		}
	})
	t.Run("through Route", func(t *testing.T) {
		r, _ := newTestRouter(t, Config{Policy: PolicyKV, Temperature: 0.5, Seed: 5}, WorkerInfo{Name: "w0"}, WorkerInfo{Name: "w1"})
		r.Index().Store(0, kvtier.GPU, chain("p", 8))
		counts := map[WorkerID]int{}
		for i := range 400 {
			d := route(t, r, &Request{ID: string(rune(1000 + i)), Hashes: chain("p", 8)})
			r.Free(d.RequestID)
			if d.Reason != ReasonSampled {
				t.Fatalf("reason %q", d.Reason)
			}
			counts[d.WorkerID]++
		}
		// Logits 8 and 16 (span 8): p(w0) = 1/(1+e^-2) = 0.881.
		if p := float64(counts[0]) / 400; p < 0.83 || p > 0.93 {
			t.Errorf("cached worker chosen %.3f of the time, want about 0.881", p)
		}
	})
}

func norm3(a, b, c float64) [3]float64 {
	s := a + b + c
	return [3]float64{a / s, b / s, c / s}
}

func TestSimplePolicies(t *testing.T) {
	t.Run("round robin", func(t *testing.T) {
		r, _ := newTestRouter(t, Config{Policy: PolicyRoundRobin}, WorkerInfo{Name: "a"}, WorkerInfo{Name: "b"}, WorkerInfo{Name: "c"})
		var got []WorkerID
		for i := range 5 {
			got = append(got, route(t, r, &Request{ID: string(rune('a' + i)), Hashes: chain("x", 2)}).WorkerID)
		}
		if want := []WorkerID{0, 1, 2, 0, 1}; !equalIDs(got, want) {
			t.Errorf("order %v, want %v", got, want)
		}
	})
	t.Run("random is seeded", func(t *testing.T) {
		pick := func(seed int64) []WorkerID {
			r, _ := newTestRouter(t, Config{Policy: PolicyRandom, Seed: seed}, WorkerInfo{Name: "a"}, WorkerInfo{Name: "b"}, WorkerInfo{Name: "c"})
			var got []WorkerID
			for i := range 30 {
				got = append(got, route(t, r, &Request{ID: string(rune('a' + i)), Hashes: chain("x", 2)}).WorkerID)
			}
			return got
		}
		a, b := pick(11), pick(11)
		if !equalIDs(a, b) {
			t.Errorf("same seed, different choices: %v vs %v", a, b)
		}
		used := map[WorkerID]bool{}
		for _, w := range a {
			used[w] = true
		}
		if len(used) != 3 {
			t.Errorf("30 random picks used only %v", used)
		}
	})
	t.Run("least loaded", func(t *testing.T) {
		r, _ := newTestRouter(t, Config{Policy: PolicyLeastLoaded}, WorkerInfo{Name: "a"}, WorkerInfo{Name: "b"})
		r.Index().Store(0, kvtier.GPU, chain("big", 50))                                   // cache is ignored
		route(t, r, &Request{ID: "x", Hashes: chain("big", 50), Policy: PolicyRoundRobin}) // → 0
		d := route(t, r, &Request{ID: "y", Hashes: chain("big", 50)})
		if d.WorkerID != 1 {
			t.Errorf("least_loaded picked %d, want idle worker 1", d.WorkerID)
		}
	})
	t.Run("unknown override", func(t *testing.T) {
		r, _ := newTestRouter(t, Config{}, WorkerInfo{Name: "a"})
		if _, err := r.Route(context.Background(), &Request{ID: "x", Policy: "fastest"}); !errors.Is(err, ErrUnknownPolicy) {
			t.Errorf("err = %v, want ErrUnknownPolicy", err)
		}
	})
	t.Run("no worker", func(t *testing.T) {
		r, _ := newTestRouter(t, Config{})
		if _, err := r.Route(context.Background(), &Request{ID: "x"}); !errors.Is(err, ErrNoWorker) {
			t.Errorf("err = %v, want ErrNoWorker", err)
		}
	})
	t.Run("duplicate id", func(t *testing.T) {
		r, _ := newTestRouter(t, Config{}, WorkerInfo{Name: "a"})
		route(t, r, &Request{ID: "x"})
		if _, err := r.Route(context.Background(), &Request{ID: "x"}); !errors.Is(err, ErrDuplicateRequest) {
			t.Errorf("err = %v, want ErrDuplicateRequest", err)
		}
	})
}

func equalIDs(a, b []WorkerID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestHearthPolicy(t *testing.T) {
	t.Run("weighs worker speed and queue", func(t *testing.T) {
		tests := []struct {
			name        string
			fastPending int
			hearth, kv  WorkerID
		}{
			// slow idle: 2000/2000 = 1 s; fast: (4000+2000)/4000 = 1.5 s.
			{"fast worker busy", 4000, 0, 0},
			// fast: (1000+2000)/4000 = 0.75 s; kv still sees more blocks there.
			{"fast worker lightly busy", 1000, 1, 0},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				for _, policy := range []string{PolicyHearth, PolicyKV} {
					r, _ := newTestRouter(t, Config{Policy: policy},
						WorkerInfo{Name: "3090", PrefillTokensPerSec: 2000},
						WorkerInfo{Name: "4090", PrefillTokensPerSec: 4000})
					// Load the fast worker with a prompt still in prefill.
					r.mu.Lock()
					r.active.add("busy", 1, nil, 0, tt.fastPending, "", r.now())
					r.mu.Unlock()
					d := route(t, r, &Request{ID: "r", Hashes: chain("q", 125), PromptTokens: 2000})
					want := tt.hearth
					if policy == PolicyKV {
						want = tt.kv
					}
					if d.WorkerID != want {
						t.Errorf("%s picked %d, want %d (costs %+v)", policy, d.WorkerID, want, d.Candidates)
					}
				}
			})
		}
	})
	t.Run("session affinity yields to saturation", func(t *testing.T) {
		r, _ := newTestRouter(t, Config{Policy: PolicyHearth, SaturationFraction: 0.5, QueueSize: -1},
			WorkerInfo{Name: "a", CapacityBlocks: 100}, WorkerInfo{Name: "b", CapacityBlocks: 100})
		// Turn 1 of session s goes to worker 1 by round robin's second turn.
		route(t, r, &Request{ID: "warm", Hashes: chain("w", 1), Policy: PolicyRoundRobin})
		r.Free("warm")
		route(t, r, &Request{ID: "t1", Hashes: chain("s", 10), SessionID: "s", Policy: PolicyRoundRobin})
		r.Free("t1")
		// The index never heard of its blocks (an engine without events):
		// both workers look the same but for the session.
		d := route(t, r, &Request{ID: "t2", Hashes: chain("s", 12), SessionID: "s"})
		if d.WorkerID != 1 {
			t.Errorf("turn 2 went to %d, want the session's worker 1 (%+v)", d.WorkerID, d.Candidates)
		}
		r.Free("t2")
		// Saturate worker 1 with another request: affinity no longer holds.
		r.mu.Lock()
		r.active.add("hog", 1, chain("hog", 60), 0, 0, "", r.now())
		r.mu.Unlock()
		d = route(t, r, &Request{ID: "t3", Hashes: chain("s", 14), SessionID: "s"})
		if d.WorkerID != 0 {
			t.Errorf("turn 3 went to saturated worker %d (%+v)", d.WorkerID, d.Candidates)
		}
	})
	t.Run("keeps new sessions off paused context", func(t *testing.T) {
		for _, paused := range []bool{true, false} {
			r, _ := newTestRouter(t, Config{Policy: PolicyHearth},
				WorkerInfo{Name: "a", CapacityBlocks: 1000}, WorkerInfo{Name: "b", CapacityBlocks: 1000})
			ix := r.Index()
			// Worker 0 caches 900 blocks of session p, now waiting on a tool.
			route(t, r, &Request{ID: "p1", Hashes: chain("p", 900), SessionID: "p", Policy: PolicyRoundRobin})
			ix.Store(0, kvtier.GPU, chain("p", 900))
			r.Free("p1")
			if !paused {
				r.ApplySessionControl("p", SessionControl{Action: SessionClose})
			}
			// Worker 1 caches 950 blocks nobody is waiting for.
			ix.Store(1, kvtier.GPU, chain("old", 950))
			d := route(t, r, &Request{ID: "n", Hashes: chain("n", 300), SessionID: "n"})
			want := WorkerID(1) // 200 blocks would push out the paused session on 0
			if !paused {
				want = 0 // equal costs, fewer cached blocks
			}
			if d.WorkerID != want {
				t.Errorf("paused=%v: new session went to %d, want %d (%+v)", paused, d.WorkerID, want, d.Candidates)
			}
		}
	})
	t.Run("stays with cached context under decode load", func(t *testing.T) {
		// kv's weak spot: a long cached context on a worker with running
		// requests is recomputed elsewhere because decode blocks count as
		// much as prefill blocks.
		for _, tc := range []struct {
			policy string
			want   WorkerID
		}{{PolicyHearth, 0}, {PolicyKV, 1}} {
			r, _ := newTestRouter(t, Config{Policy: tc.policy},
				WorkerInfo{Name: "a", CapacityBlocks: 2000, PrefillTokensPerSec: 5000},
				WorkerInfo{Name: "b", CapacityBlocks: 2000, PrefillTokensPerSec: 5000})
			r.Index().Store(0, kvtier.GPU, chain("ctx", 1000))
			r.mu.Lock()
			r.active.add("other", 0, chain("other", 1100), 0, 0, "", r.now())
			r.mu.Unlock()
			d := route(t, r, &Request{ID: "turn", Hashes: chain("ctx", 1010), SessionID: "s"})
			if d.WorkerID != tc.want {
				t.Errorf("%s picked %d, want %d (%+v)", tc.policy, d.WorkerID, tc.want, d.Candidates)
			}
		}
	})
}

func TestActiveLifecycle(t *testing.T) {
	r, clk := newTestRouter(t, Config{Policy: PolicyRoundRobin}, WorkerInfo{Name: "a"})
	shared := chain("sys", 10)
	route(t, r, &Request{ID: "x", Hashes: shared, PromptTokens: 170, Hints: Hints{OSL: 32}})
	w := load(t, r, 0)
	// 10 hashed blocks + 1 partial + 2 output blocks; nothing cached: 170 pending.
	if w.ActiveBlocks != 13 || w.PendingPrefillTokens != 170 || w.ActiveRequests != 1 {
		t.Fatalf("after route: %+v", w)
	}
	route(t, r, &Request{ID: "y", Hashes: append(append([]tokenizer.SeqHash{}, shared...), chain("y", 2)...)})
	w = load(t, r, 0)
	if w.ActiveBlocks != 15 || w.PendingPrefillTokens != 170+192 {
		t.Fatalf("shared prefix counted twice: %+v", w)
	}
	if !r.PrefillDone("x") || r.PrefillDone("nope") {
		t.Fatal("PrefillDone reports wrong")
	}
	r.PrefillDone("x") // twice is harmless
	if w = load(t, r, 0); w.PendingPrefillTokens != 192 {
		t.Fatalf("after prefill of x: %+v", w)
	}
	if !r.Free("x") || r.Free("x") {
		t.Fatal("Free reports wrong")
	}
	if w = load(t, r, 0); w.ActiveBlocks != 12 || w.ActiveRequests != 1 {
		t.Fatalf("after free of x: %+v", w)
	}
	// y never ends: it expires after ActiveTTL.
	clk.Advance(DefaultActiveTTL - time.Second)
	r.Free("unrelated")
	if w = load(t, r, 0); w.ActiveRequests != 1 {
		t.Fatalf("expired early: %+v", w)
	}
	clk.Advance(time.Second)
	r.Free("unrelated")
	if w = load(t, r, 0); w.ActiveRequests != 0 || w.ActiveBlocks != 0 || w.PendingPrefillTokens != 0 {
		t.Fatalf("not expired after ttl: %+v", w)
	}
	if r.Free("y") {
		t.Error("expired request still freeable")
	}
}

func TestApproximateMode(t *testing.T) {
	r, clk := newTestRouter(t, Config{Policy: PolicyKV}, WorkerInfo{Name: "a", Approximate: true}, WorkerInfo{Name: "b"})
	p := chain("p", 6)
	r.Index().Store(1, kvtier.GPU, chain("noise", 3)) // so an empty tie goes to 0
	d := route(t, r, &Request{ID: "1", Hashes: p})
	if d.WorkerID != 0 {
		t.Fatalf("first request went to %d", d.WorkerID)
	}
	r.Free("1")
	var out [MaxWorkers]int
	r.Index().Match(p, kvtier.GPU, &out)
	if out[0] != 6 {
		t.Fatalf("approximate worker predicted %d cached blocks, want 6", out[0])
	}
	clk.Advance(100 * time.Second)
	d = route(t, r, &Request{ID: "2", Hashes: p[:4]}) // refreshes 4 blocks
	if d.WorkerID != 0 || d.CachedBlocks != 4 {
		t.Fatalf("second request: worker %d cached %d", d.WorkerID, d.CachedBlocks)
	}
	r.Free("2")
	clk.Advance(20 * time.Second) // 120 s after the first route
	r.Free("tick")
	r.Index().Match(p, kvtier.GPU, &out)
	if out[0] != 4 {
		t.Errorf("after 120 s: %d blocks predicted, want the 4 refreshed at 100 s", out[0])
	}
	clk.Advance(100 * time.Second)
	r.Free("tick")
	r.Index().Match(p, kvtier.GPU, &out)
	if out[0] != 0 {
		t.Errorf("after 220 s: %d blocks predicted, want 0", out[0])
	}
	// A worker with events is never predicted.
	r.Index().Match(chain("noise", 3), kvtier.GPU, &out)
	if out[1] != 3 {
		t.Errorf("evented worker lost its blocks: %d", out[1])
	}
}

func TestRemoveWorker(t *testing.T) {
	r, _ := newTestRouter(t, Config{Policy: PolicyKV}, WorkerInfo{Name: "a"}, WorkerInfo{Name: "b"})
	r.Index().Store(1, kvtier.GPU, chain("p", 4))
	route(t, r, &Request{ID: "x", Hashes: chain("p", 4)})
	r.RemoveWorker(1)
	if got := len(r.Workers()); got != 1 {
		t.Fatalf("%d workers after remove", got)
	}
	if st := r.Index().Stats(); st.Entries != 0 {
		t.Errorf("index kept %d entries of the removed worker", st.Entries)
	}
	if r.Free("x") {
		t.Error("request of the removed worker still running")
	}
	id, err := r.AddWorker(WorkerInfo{Name: "c"})
	if err != nil || id != 1 {
		t.Errorf("AddWorker reused id %d, %v; want 1", id, err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero", Config{}, true},
		{"kv", Config{Policy: PolicyKV, Temperature: 0.5}, true},
		{"bad policy", Config{Policy: "fastest"}, false},
		{"negative temperature", Config{Temperature: -1}, false},
		{"negative weight", Config{OverlapScoreWeight: -1}, false},
		{"fraction over 1", Config{SaturationFraction: 1.5}, false},
		{"negative ttl", Config{ActiveTTL: -time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if _, err := New(tt.cfg); (err == nil) != tt.ok {
				t.Errorf("New() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
	r, _ := New(Config{})
	c := r.Config()
	if c.Policy != DefaultPolicy || c.OverlapScoreWeight != 1 || c.ActiveTTL != 300*time.Second || c.ApproxTTL != 120*time.Second {
		t.Errorf("defaults: %+v", c)
	}
}

func TestDecisionLog(t *testing.T) {
	r, _ := newTestRouter(t, Config{DecisionLogSize: 3, Policy: PolicyRoundRobin}, WorkerInfo{Name: "a"}, WorkerInfo{Name: "b"})
	for _, id := range []string{"1", "2", "3", "4", "5"} {
		route(t, r, &Request{ID: id, Hashes: chain(id, 2), Hints: Hints{SpeculativePrefill: id == "5"}})
	}
	got := r.Decisions(0)
	if len(got) != 3 || got[0].RequestID != "5" || got[2].RequestID != "3" {
		t.Fatalf("log holds %v", ids(got))
	}
	if !got[0].SpeculativePrefill || got[1].SpeculativePrefill {
		t.Error("speculative_prefill not carried")
	}
	if got := r.Decisions(2); len(got) != 2 || got[1].RequestID != "4" {
		t.Errorf("Decisions(2) = %v", ids(got))
	}
	if got[0].Worker == "" || len(got[0].Candidates) != 2 || got[0].Policy != PolicyRoundRobin {
		t.Errorf("decision record incomplete: %+v", got[0])
	}
}

func ids(ds []Decision) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.RequestID)
	}
	return out
}

func TestRouteAllocations(t *testing.T) {
	r, _ := newTestRouter(t, Config{Policy: PolicyKV}, WorkerInfo{Name: "a"}, WorkerInfo{Name: "b"})
	h := chain("p", 500)
	r.Index().Store(0, kvtier.GPU, h)
	req := &Request{ID: "x", Hashes: h}
	// Warm the maps of the active set so their growth is not counted.
	route(t, r, req)
	r.Free("x")
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := r.Route(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		r.Free("x")
	})
	// The candidates slice (the result) and the active-request record.
	if allocs > 2 {
		t.Errorf("Route+Free allocates %v times, want ≤ 2", allocs)
	}
}

// TestRouterConcurrent routes, frees and ingests from several goroutines;
// run with -race.
func TestRouterConcurrent(t *testing.T) {
	r, _ := newTestRouter(t, Config{Policy: PolicyHearth, SaturationFraction: 0.5},
		WorkerInfo{Name: "a", CapacityBlocks: 400}, WorkerInfo{Name: "b", CapacityBlocks: 400})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				id := string(rune('a'+g)) + string(rune(1000+i))
				d, err := r.Route(context.Background(), &Request{ID: id, Hashes: chain(id[:1], 1+i%40), SessionID: id[:1],
					Hints: Hints{Priority: i % 3}})
				if err != nil {
					t.Errorf("Route: %v", err)
					return
				}
				r.PrefillDone(id)
				r.Free(d.RequestID)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 200 {
			r.Index().Store(WorkerID(i%2), kvtier.GPU, chain("a", 1+i%40))
			if i%50 == 0 {
				r.Index().ClearWorker(WorkerID(i % 2))
			}
			_ = r.Decisions(5)
		}
	}()
	wg.Wait()
	for _, w := range r.Workers() {
		if w.ActiveRequests != 0 || w.ActiveBlocks != 0 || w.PendingPrefillTokens != 0 {
			t.Errorf("worker %d not idle after every request ended: %+v", w.WorkerID, w)
		}
	}
	if r.QueueLen() != 0 {
		t.Errorf("%d requests left in the queue", r.QueueLen())
	}
}

// TestExcludeSendsARetryElsewhere: a request that failed on the worker
// holding its prefix goes to the next best worker, and only when every
// worker is excluded to any of them.
func TestExcludeSendsARetryElsewhere(t *testing.T) {
	for _, policy := range []string{PolicyKV, PolicyHearth, PolicyRoundRobin} {
		t.Run(policy, func(t *testing.T) {
			r, _ := newTestRouter(t, Config{Policy: policy},
				WorkerInfo{Name: "a"}, WorkerInfo{Name: "b"}, WorkerInfo{Name: "c"})
			prompt := chain("p", 8)
			r.Index().Store(0, kvtier.GPU, prompt)
			r.Index().Store(1, kvtier.GPU, prompt[:4])
			d := route(t, r, &Request{ID: "x1", Hashes: prompt, Exclude: []WorkerID{0}})
			if d.WorkerID == 0 {
				t.Fatalf("retry went back to the excluded worker")
			}
			if policy != PolicyRoundRobin && d.WorkerID != 1 {
				t.Errorf("retry went to worker %d, want 1, the next best by overlap", d.WorkerID)
			}
			for _, c := range d.Candidates {
				if c.WorkerID == 0 {
					t.Errorf("excluded worker listed as a candidate")
				}
			}
			r.Free("x1")
			d = route(t, r, &Request{ID: "x2", Hashes: prompt, Exclude: []WorkerID{0, 1, 2}})
			if len(d.Candidates) != 3 {
				t.Errorf("with every worker excluded, %d candidates; want all 3", len(d.Candidates))
			}
		})
	}
}

// TestRouterKeepsModelsApart: a request goes only to a worker of its model;
// one for a model nobody serves fails at once; a model whose workers are
// all saturated queues its requests without holding up another model's;
// and its waiters fail when its last worker leaves.
func TestRouterKeepsModelsApart(t *testing.T) {
	r, _ := newTestRouter(t, Config{Policy: PolicyHearth, SaturationFraction: 0.5},
		WorkerInfo{Name: "a0", Model: "a", CapacityBlocks: 10},
		WorkerInfo{Name: "b0", Model: "b", CapacityBlocks: 10})
	for i, model := range []string{"a", "b", "a", "b"} {
		id := fmt.Sprintf("r%d", i)
		d, err := r.Route(context.Background(), &Request{ID: id, Model: model, Hashes: chain(id, 1)})
		if err != nil || d.Worker != model+"0" {
			t.Fatalf("request for %s went to %q (%v)", model, d.Worker, err)
		}
		r.Free(id)
	}
	if _, err := r.Route(context.Background(), &Request{ID: "c", Model: "c", Hashes: chain("c", 1)}); !errors.Is(err, ErrNoWorker) || !strings.Contains(err.Error(), `"c"`) {
		t.Fatalf("request for an unserved model: %v, want ErrNoWorker naming it", err)
	}

	// Saturate a0: 6 of 10 blocks.
	if _, err := r.Route(context.Background(), &Request{ID: "big", Model: "a", Hashes: chain("big", 6)}); err != nil {
		t.Fatal(err)
	}
	_, ticket, err := r.Enqueue(&Request{ID: "waits", Model: "a", Hashes: chain("w", 1)})
	if err != nil || ticket == nil {
		t.Fatalf("a request for a saturated model should queue: ticket %v, %v", ticket, err)
	}
	if d, tb, err := r.Enqueue(&Request{ID: "other", Model: "b", Hashes: chain("o", 1)}); err != nil || tb != nil || d.Worker != "b0" {
		t.Fatalf("model b waited behind model a: %+v, ticket %v, %v", d, tb, err)
	}
	if r.QueueLen() != 1 {
		t.Fatalf("queue length %d, want 1", r.QueueLen())
	}
	r.RemoveWorker(0)
	select {
	case <-ticket.Done():
	default:
		t.Fatal("the waiter of a model with no worker left is still waiting")
	}
	if _, err := ticket.Result(); !errors.Is(err, ErrNoWorker) {
		t.Fatalf("waiter: %v, want ErrNoWorker", err)
	}
	if r.QueueLen() != 0 {
		t.Errorf("queue length %d after its model left, want 0", r.QueueLen())
	}
}
