package router

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/tokenizer"
)

// benchPromptBlocks is an 8,000-token prompt in 16-token blocks.
const benchPromptBlocks = 500

// fillIndex stores blocks distinct blocks in ix as prompts of 500 blocks,
// each prompt on perBlock workers chosen round-robin among workers, and
// returns the prompts; prompt p is held by workers p, p+1, … (mod workers).
func fillIndex(ix *Index, rng *rand.Rand, blocks, workers, perBlock int) [][]tokenizer.SeqHash {
	var prompts [][]tokenizer.SeqHash
	for p := 0; blocks > 0; p++ {
		n := min(benchPromptBlocks, blocks)
		blocks -= n
		prompt := make([]tokenizer.SeqHash, n)
		for i := range prompt {
			prompt[i] = tokenizer.SeqHash(rng.Uint64())
		}
		for k := range perBlock {
			ix.Store(WorkerID((p+k)%workers), kvtier.GPU, prompt)
		}
		prompts = append(prompts, prompt)
	}
	return prompts
}

// BenchmarkRoute times one routing decision for an 8,000-token prompt (500
// hashes) that one worker holds entirely, with every worker carrying four
// running requests of 200 blocks. ns/op covers Route and Free; p50-ns and
// p99-ns are Route alone, timed per iteration by the wall clock, and the
// -cpu-ns figures by the thread's CPU time (which leaves out time spent
// waiting for a CPU on a loaded machine). "hot" repeats one prompt (its
// blocks stay in CPU cache); "cold" walks through every stored prompt, so
// each lookup is likely a cache miss.
func BenchmarkRoute(b *testing.B) {
	cases := []struct {
		policy          string
		blocks, workers int
		cold            bool
	}{
		{PolicyKV, 1_000, 16, false},
		{PolicyKV, 100_000, 16, false},
		{PolicyKV, 1_000_000, 16, false},
		{PolicyKV, 1_000_000, 16, true},
		{PolicyKV, 1_000_000, 2, false},
		{PolicyKV, 1_000_000, 64, false},
		{PolicyHearth, 1_000_000, 16, false},
		{PolicyHearth, 1_000_000, 16, true},
		{PolicyHearth, 1_000_000, 64, false},
	}
	for _, c := range cases {
		temp := "hot"
		if c.cold {
			temp = "cold"
		}
		b.Run(fmt.Sprintf("policy=%s/blocks=%d/workers=%d/%s", c.policy, c.blocks, c.workers, temp), func(b *testing.B) {
			r, err := New(Config{Policy: c.policy, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			for w := range c.workers {
				if _, err := r.AddWorker(WorkerInfo{Name: fmt.Sprint("w", w), CapacityBlocks: 2000}); err != nil {
					b.Fatal(err)
				}
			}
			rng := rand.New(rand.NewSource(1))
			prompts := fillIndex(r.Index(), rng, c.blocks, c.workers, 1)
			prompt := prompts[0]
			// Background load: four decoding requests per worker, one of
			// them sharing the prompt's first 100 blocks.
			for w := range c.workers {
				for k := range 4 {
					h := make([]tokenizer.SeqHash, 200)
					for i := range h {
						h[i] = tokenizer.SeqHash(rng.Uint64())
					}
					if k == 0 {
						copy(h, prompt[:100])
					}
					id := fmt.Sprint("bg", w, k)
					if _, err := r.Route(context.Background(), &Request{ID: id, Hashes: h, Policy: PolicyRoundRobin}); err != nil {
						b.Fatal(err)
					}
					r.PrefillDone(id) // decoding: load without pending prefill

				}
			}
			req := &Request{ID: "bench", Hashes: prompt, PromptTokens: 8000}
			lat := make([]int64, 0, b.N)
			cpu := make([]int64, 0, b.N)
			runtime.LockOSThread() // thread CPU time must be read on one thread
			defer runtime.UnlockOSThread()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if c.cold {
					req.Hashes = prompts[i%len(prompts)]
				}
				c0 := decisionCPUTime()
				t0 := time.Now()
				d, err := r.Route(ctx, req)
				lat = append(lat, int64(time.Since(t0)))
				cpu = append(cpu, decisionCPUTime()-c0)
				if err != nil {
					b.Fatal(err)
				}
				if d.CachedBlocks != len(req.Hashes) && c.policy == PolicyKV {
					// The cached worker must win, or the bench measures something else.
					b.Fatalf("iteration %d: decision missed the cached worker: %d of %d blocks: %+v", i, d.CachedBlocks, len(req.Hashes), d.Candidates[:3])
				}
				r.Free(req.ID)
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
			b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
			if haveDecisionCPUTime {
				slices.Sort(cpu)
				b.ReportMetric(float64(cpu[len(cpu)*99/100]), "p99-cpu-ns")
				b.ReportMetric(float64(cpu[len(cpu)/2]), "p50-cpu-ns")
			}
		})
	}
}

// BenchmarkIndexMatch times Index.Match alone for a fully cached 500-block
// prompt.
func BenchmarkIndexMatch(b *testing.B) {
	for _, blocks := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("blocks=%d/workers=16/hot", blocks), func(b *testing.B) {
			ix := NewIndex(0)
			prompt := fillIndex(ix, rand.New(rand.NewSource(2)), blocks, 16, 2)[0]
			var out [MaxWorkers]int
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				ix.Match(prompt, kvtier.GPU, &out)
			}
			if out[0] != len(prompt) {
				b.Fatalf("matched %d of %d", out[0], len(prompt))
			}
		})
		b.Run(fmt.Sprintf("blocks=%d/workers=16/cold", blocks), func(b *testing.B) {
			ix := NewIndex(0)
			prompts := fillIndex(ix, rand.New(rand.NewSource(2)), blocks, 16, 2)
			var out [MaxWorkers]int
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				p := prompts[i%len(prompts)]
				ix.Match(p, kvtier.GPU, &out)
				if out[i%len(prompts)%16] != len(p) {
					b.Fatalf("matched %d of %d", out[i%16], len(p))
				}
			}
		})
	}
}

// BenchmarkIndexMemory measures heap bytes per (block, worker) entry after
// building an index, and the time to store one 500-block prompt.
func BenchmarkIndexMemory(b *testing.B) {
	cases := []struct{ blocks, workers, perBlock int }{
		{1_000, 16, 1},
		{1_000_000, 16, 1},
		{1_000_000, 16, 2},
		{1_000_000, 2, 2},
		{1_000_000, 64, 4},
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("blocks=%d/workers=%d/per_block=%d", c.blocks, c.workers, c.perBlock), func(b *testing.B) {
			b.ReportAllocs()
			var perEntry float64
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				ix := NewIndex(0)
				fillIndex(ix, rand.New(rand.NewSource(3)), c.blocks, c.workers, c.perBlock)
				runtime.GC()
				runtime.ReadMemStats(&after)
				st := ix.Stats()
				perEntry = float64(after.HeapAlloc-before.HeapAlloc) / float64(st.Entries)
				runtime.KeepAlive(ix)
			}
			b.ReportMetric(perEntry, "bytes/entry")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(c.blocks*c.perBlock), "ns/stored-entry")
		})
	}
}

// BenchmarkIndexClearWorker measures dropping one worker of 16 that holds
// 1/16 of 1M blocks.
func BenchmarkIndexClearWorker(b *testing.B) {
	ix := NewIndex(0)
	rng := rand.New(rand.NewSource(4))
	fillIndex(ix, rng, 1_000_000, 16, 1)
	held := make([][]tokenizer.SeqHash, 0)
	for range 125 { // 62,500 blocks for worker 0, re-stored each iteration
		h := make([]tokenizer.SeqHash, benchPromptBlocks)
		for i := range h {
			h[i] = tokenizer.SeqHash(rng.Uint64())
		}
		held = append(held, h)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for _, h := range held {
			ix.Store(0, kvtier.GPU, h)
		}
		b.StartTimer()
		ix.ClearWorker(0)
	}
}

// jitterSink keeps the control loop from being optimised away.
var jitterSink uint64

// BenchmarkMachineJitter is the control for BenchmarkRoute's tail: a fixed
// amount of arithmetic, about as long as a hot routing decision, timed per
// iteration the same way. Whatever tail it shows comes from the machine
// (interrupts, a virtual CPU's steal time, the scheduler), not from any
// code under test; compare its p99 with Route's.
func BenchmarkMachineJitter(b *testing.B) {
	lat := make([]int64, 0, b.N)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		x := uint64(1)
		for range 7000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		jitterSink += x
		lat = append(lat, int64(time.Since(t0)))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
}
