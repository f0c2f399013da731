package sim

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/kvevents"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// TestEventsRebuildCache drives random workloads (shared prefixes, cache
// pressure, preemptions, aborts, resets) and checks after every step that a
// consumer rebuilding the cache from KV events holds exactly the engine's
// cached hashes, and that the block bookkeeping is consistent.
func TestEventsRebuildCache(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		seed   uint64
		resets bool
	}{
		{"roomy cache", Config{}, 1, false},
		{"tight cache fcfs", Config{NumGPUBlocks: 64, MaxModelLen: 1024, MaxNumBatchedTokens: 512}, 2, false},
		{"tight cache priority", Config{NumGPUBlocks: 48, MaxModelLen: 768, MaxNumBatchedTokens: 256, SchedulingPolicy: PolicyPriority}, 3, false},
		{"tiny blocks with resets", Config{NumGPUBlocks: 200, BlockSize: 4, MaxModelLen: 800, MaxNumBatchedTokens: 300}, 4, true},
		{"few seqs", Config{NumGPUBlocks: 80, MaxModelLen: 1280, MaxNumSeqs: 3}, 5, true},
		{"cpu tier larger than gpu", Config{NumGPUBlocks: 64, NumCPUBlocks: 300, MaxModelLen: 1024, MaxNumBatchedTokens: 512}, 6, false},
		{"cpu tier under pressure with resets", Config{NumGPUBlocks: 80, NumCPUBlocks: 90, MaxModelLen: 1280, MaxNumBatchedTokens: 300}, 7, true},
		{"cpu tier priority tiny blocks", Config{NumGPUBlocks: 200, NumCPUBlocks: 250, BlockSize: 4, MaxModelLen: 800, MaxNumBatchedTokens: 300, SchedulingPolicy: PolicyPriority}, 8, false},
		{"sglang tight cache with resets", Config{NumGPUBlocks: 64, MaxModelLen: 1024, MaxNumBatchedTokens: 512, Kind: hruntime.KindSGLang}, 9, true},
		{"sglang cpu tier", Config{NumGPUBlocks: 80, NumCPUBlocks: 90, MaxModelLen: 1280, MaxNumBatchedTokens: 300, Kind: hruntime.KindSGLang}, 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(tt.seed, 99))
			sink := newFakeSink(t)
			c := newCore(t, tt.cfg, sink)
			maxLen := c.Config().MaxModelLen
			d := newDriver(c)
			prefixes := make([][]uint32, 4)
			for i := range prefixes {
				prefixes[i] = tokens(100_000*(i+1), min(maxLen/2, 600))
			}
			live := map[string]bool{}
			next := 0
			for step := 0; step < 1500; step++ {
				for rng.IntN(3) == 0 {
					prompt := randomPrompt(rng, prefixes, 200)
					out := tokens(rng.IntN(1000), 1+rng.IntN(60))
					if len(prompt)+len(out) > maxLen {
						continue
					}
					id := fmt.Sprint("r", next)
					next++
					mustAdd(t, c, d.now, &Request{ID: id, Prompt: prompt, Output: out, Priority: rng.IntN(3)})
					live[id] = true
				}
				if len(live) > 0 && rng.IntN(25) == 0 {
					ids := slices.Sorted(maps.Keys(live))
					id := ids[rng.IntN(len(ids))]
					if !c.Abort(d.now, id) {
						t.Fatalf("Abort(%s) of a live request = false", id)
					}
					delete(live, id)
				}
				if tt.resets && rng.IntN(200) == 0 {
					c.Reset(d.now)
				}
				if c.HasWork() {
					for _, o := range d.step(t).Outputs {
						if o.Finished {
							delete(live, o.RequestID)
						}
					}
				}
				checkInvariants(t, c)
				want := c.CachedBlockHashes()
				got := slices.Sorted(maps.Keys(sink.cached))
				if !slices.Equal(got, want) {
					t.Fatalf("step %d: events rebuild %d hashes, engine has %d", step, len(got), len(want))
				}
				wantCPU := c.CachedCPUBlockHashes()
				gotCPU := slices.Sorted(maps.Keys(sink.cpu))
				if !slices.Equal(gotCPU, wantCPU) {
					t.Fatalf("step %d: events rebuild %d CPU hashes, engine has %d", step, len(gotCPU), len(wantCPU))
				}
				if s := c.Stats(); s.Running+s.Waiting != len(live) {
					t.Fatalf("step %d: %d running + %d waiting, %d live", step, s.Running, s.Waiting, len(live))
				}
			}
			d.run(t)
			s := c.Stats()
			t.Logf("%d requests, %d steps, %d stored / %d removed events, %d preemptions, hit rate %.2f",
				next, d.steps, sink.count(kvevents.BlockStored), sink.count(kvevents.BlockRemoved), s.Preemptions,
				float64(s.PrefixHits)/float64(max(s.PrefixQueries, 1)))
			if sink.count(kvevents.BlockStored) == 0 || s.PrefixHits == 0 {
				t.Error("workload stored or hit nothing")
			}
			if tt.cfg.NumCPUBlocks > 0 {
				t.Logf("CPU tier: %d stored / %d removed events, %d blocks loaded, external hits %d of %d tokens",
					sink.countMedium(kvevents.BlockStored, kvevents.MediumCPU), sink.countMedium(kvevents.BlockRemoved, kvevents.MediumCPU),
					s.CPULoadedBlocks, s.ExternalPrefixHits, s.ExternalPrefixQueries)
				if sink.countMedium(kvevents.BlockStored, kvevents.MediumCPU) == 0 || sink.countMedium(kvevents.BlockRemoved, kvevents.MediumCPU) == 0 || s.CPULoadedBlocks == 0 {
					t.Error("the CPU tier stored, evicted or loaded nothing")
				}
				// The connector is asked about what the GPU missed.
				if s.ExternalPrefixQueries != s.PrefixQueries-s.PrefixHits || s.ExternalPrefixHits > s.ExternalPrefixQueries {
					t.Errorf("external %d hits of %d queries, GPU %d hits of %d queries", s.ExternalPrefixHits, s.ExternalPrefixQueries, s.PrefixHits, s.PrefixQueries)
				}
			}
			if s.UsedBlocks != 0 {
				t.Errorf("%d blocks still used with no requests", s.UsedBlocks)
			}
		})
	}
}

// TestDeterministic: the same calls give the same steps.
func TestDeterministic(t *testing.T) {
	run := func() []StepResult {
		rng := rand.New(rand.NewPCG(7, 7))
		c := newCore(t, Config{NumGPUBlocks: 100, MaxModelLen: 1600}, nil)
		prefixes := [][]uint32{tokens(1, 300), tokens(5000, 300)}
		var out []StepResult
		var now int64
		for i := 0; i < 300; i++ {
			if rng.IntN(2) == 0 {
				mustAdd(t, c, 0, &Request{ID: fmt.Sprint(i), Prompt: randomPrompt(rng, prefixes, 100), Output: tokens(0, 1+rng.IntN(30))})
			}
			res := c.Step(0)
			now += int64(res.Duration)
			res.Outputs = slices.Clone(res.Outputs)
			out = append(out, res)
		}
		return out
	}
	a, b := run(), run()
	for i := range a {
		if a[i].Duration != b[i].Duration || !slices.Equal(a[i].Outputs, b[i].Outputs) {
			t.Fatalf("step %d differs: %+v vs %+v", i, a[i], b[i])
		}
	}
}

// FuzzCoreOps drives a small core with an arbitrary sequence of operations:
// nothing may panic and the bookkeeping must stay consistent.
func FuzzCoreOps(f *testing.F) {
	f.Add([]byte{0, 10, 3, 1, 1, 0, 200, 50, 2, 2, 3, 1})
	f.Add([]byte{0, 255, 255, 0, 255, 255, 1, 1, 1, 1, 1, 1, 4, 1, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		sink := newFakeSink(t)
		c := newCore(t, Config{NumGPUBlocks: 24, BlockSize: 4, MaxModelLen: 96, MaxNumBatchedTokens: 20, MaxNumSeqs: 4}, sink)
		var now time.Duration
		next := 0
		for i := 0; i+2 < len(ops); i += 3 {
			a, b := int(ops[i+1]), int(ops[i+2])
			switch ops[i] % 5 {
			case 0:
				// Prompts drawn from a small alphabet share prefixes.
				prompt := make([]uint32, a%100)
				for j := range prompt {
					prompt[j] = uint32((j * (1 + b%3)) % 7)
				}
				_ = c.Add(now, &Request{ID: fmt.Sprint(next), Prompt: prompt, Output: tokens(b, b%40), Priority: a % 3})
				next++
			case 1, 2:
				now += c.Step(now).Duration
			case 3:
				c.Abort(now, fmt.Sprint(a%max(next, 1)))
			case 4:
				c.Reset(now)
			}
			checkInvariants(t, c)
		}
		for steps := 0; c.HasWork(); steps++ {
			if steps > 100*(next+10) { // every request needs at most ~60 steps
				t.Fatal("core does not drain")
			}
			now += c.Step(now).Duration
		}
		checkInvariants(t, c)
		if got, want := slices.Sorted(maps.Keys(sink.cached)), c.CachedBlockHashes(); !slices.Equal(got, want) {
			t.Fatalf("events rebuild %d hashes, engine has %d", len(got), len(want))
		}
	})
}
