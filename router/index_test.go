package router

import (
	"math/rand"
	"sync"
	"testing"

	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/tokenizer"
)

// modelIndex is the brute-force reference: a set of (hash, worker, tier).
type modelKey struct {
	h    tokenizer.SeqHash
	w    WorkerID
	tier kvtier.Tier
}

type modelIndex map[modelKey]bool

func (m modelIndex) match(hashes []tokenizer.SeqHash, tier kvtier.Tier) [MaxWorkers]int {
	var out [MaxWorkers]int
	for w := range WorkerID(MaxWorkers) {
		n := 0
		for _, h := range hashes {
			if !m[modelKey{h, w, tier}] {
				break
			}
			n++
		}
		out[w] = n
	}
	return out
}

// matchBeyond is MatchBeyond by brute force: per worker, the blocks held
// in tier from depth from[w] on.
func (m modelIndex) matchBeyond(hashes []tokenizer.SeqHash, tier kvtier.Tier, from *[MaxWorkers]int) [MaxWorkers]int {
	var out [MaxWorkers]int
	for w := range WorkerID(MaxWorkers) {
		n := 0
		for i := from[w]; i >= 0 && i < len(hashes); i++ {
			if !m[modelKey{hashes[i], w, tier}] {
				break
			}
			n++
		}
		out[w] = n
	}
	return out
}

func (m modelIndex) counts(tier kvtier.Tier) [MaxWorkers]int {
	var out [MaxWorkers]int
	for k := range m {
		if k.tier == tier {
			out[k.w]++
		}
	}
	return out
}

// randomChains builds a forest of block chains sharing prefixes, like the
// prompts of agent sessions that fork from a common system prompt.
func randomChains(rng *rand.Rand, n, length int) [][]tokenizer.SeqHash {
	chains := make([][]tokenizer.SeqHash, n)
	for i := range chains {
		var c []tokenizer.SeqHash
		if i > 0 && rng.Intn(2) == 0 {
			parent := chains[rng.Intn(i)]
			c = append(c, parent[:rng.Intn(len(parent)+1)]...)
		}
		for len(c) < length {
			// Small values on purpose: they exercise key mixing and hash 0.
			c = append(c, tokenizer.SeqHash(rng.Intn(1<<20)))
		}
		chains[i] = c
	}
	return chains
}

func TestIndexMatchesModel(t *testing.T) {
	for _, seed := range []int64{1, 2, 3, 4, 5} {
		rng := rand.New(rand.NewSource(seed))
		ix := NewIndex(1 << 30) // no eviction here
		model := modelIndex{}
		chains := randomChains(rng, 40, 30)
		chains = append(chains, []tokenizer.SeqHash{0, 1, 2}) // hash 0 is a valid block
		for step := range 3000 {
			w := WorkerID(rng.Intn(6))
			if rng.Intn(10) == 0 {
				w = WorkerID(58 + rng.Intn(6)) // high bits of the mask
			}
			tier := kvtier.Tier(rng.Intn(kvtier.Count))
			c := chains[rng.Intn(len(chains))]
			lo := rng.Intn(len(c))
			hi := lo + rng.Intn(len(c)-lo) + 1
			switch op := rng.Intn(20); {
			case op < 11:
				ix.Store(w, tier, c[lo:hi])
				for _, h := range c[lo:hi] {
					model[modelKey{h, w, tier}] = true
				}
			case op < 19:
				ix.Remove(w, tier, c[lo:hi])
				for _, h := range c[lo:hi] {
					delete(model, modelKey{h, w, tier})
				}
			default:
				ix.ClearWorker(w)
				for k := range model {
					if k.w == w {
						delete(model, k)
					}
				}
			}
			if step%50 != 0 {
				continue
			}
			for _, q := range chains[:10] {
				for tier := range kvtier.Tier(kvtier.Count) {
					var got [MaxWorkers]int
					ix.Match(q, tier, &got)
					if want := model.match(q, tier); got != want {
						t.Fatalf("seed %d step %d tier %v: Match = %v, want %v", seed, step, tier, got, want)
					}
					// Continue in every tier from the GPU match, and from
					// arbitrary depths.
					var gpu, from, beyond [MaxWorkers]int
					ix.Match(q, kvtier.GPU, &gpu)
					for w := range from {
						from[w] = rng.Intn(len(q) + 2)
					}
					for _, f := range []*[MaxWorkers]int{&gpu, &from} {
						ix.MatchBeyond(q, tier, f, &beyond)
						if want := model.matchBeyond(q, tier, f); beyond != want {
							t.Fatalf("seed %d step %d tier %v: MatchBeyond(from %v) = %v, want %v", seed, step, tier, f[:8], beyond[:8], want[:8])
						}
					}
				}
			}
			for tier := range kvtier.Tier(kvtier.Count) {
				var got [MaxWorkers]int
				ix.BlockCounts(tier, &got)
				if want := model.counts(tier); got != want {
					t.Fatalf("seed %d step %d: BlockCounts(%v) = %v, want %v", seed, step, tier, got, want)
				}
			}
			if st := ix.Stats(); st.Entries != len(model) {
				t.Fatalf("seed %d step %d: %d entries, model has %d", seed, step, st.Entries, len(model))
			}
		}
	}
}

func TestIndexPerTierMatch(t *testing.T) {
	ix := NewIndex(0)
	h := []tokenizer.SeqHash{10, 11, 12, 13}
	ix.Store(0, kvtier.GPU, h[:3])
	ix.Store(1, kvtier.GPU, h[:1])
	ix.Store(1, kvtier.RAM, h)
	ix.Store(2, kvtier.Disk, h[:2])
	tests := []struct {
		name string
		tier kvtier.Tier
		want map[WorkerID]int
	}{
		{"gpu", kvtier.GPU, map[WorkerID]int{0: 3, 1: 1}},
		{"ram", kvtier.RAM, map[WorkerID]int{1: 4}},
		{"disk", kvtier.Disk, map[WorkerID]int{2: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got [MaxWorkers]int
			ix.Match(h, tt.tier, &got)
			for w := range WorkerID(MaxWorkers) {
				if got[w] != tt.want[w] {
					t.Errorf("worker %d: %d blocks, want %d", w, got[w], tt.want[w])
				}
			}
		})
	}
	// A gap in the middle ends the match even if later blocks are held.
	ix.Remove(0, kvtier.GPU, h[1:2])
	var got [MaxWorkers]int
	ix.Match(h, kvtier.GPU, &got)
	if got[0] != 1 {
		t.Errorf("after removing block 1: worker 0 matches %d, want 1", got[0])
	}
}

// TestIndexMatchBeyond: a lower tier extends the GPU prefix only where it
// continues it, as an engine loads after its GPU hits.
func TestIndexMatchBeyond(t *testing.T) {
	h := []tokenizer.SeqHash{10, 11, 12, 13, 14, 15}
	tests := []struct {
		name  string
		gpu   []tokenizer.SeqHash
		ram   []tokenizer.SeqHash
		wantG int
		wantR int
	}{
		{"ram only", nil, h[:4], 0, 4},
		{"ram continues gpu", h[:2], h[2:5], 2, 3},
		{"write-through copy of the gpu prefix", h[:3], h, 3, 3},
		{"ram copy shorter than gpu", h[:4], h[:2], 4, 0},
		{"gap after the gpu prefix", h[:2], h[3:], 2, 0},
		{"nothing in ram", h[:2], nil, 2, 0},
		{"ram to the end", nil, h, 0, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := NewIndex(0)
			ix.Store(3, kvtier.GPU, tt.gpu)
			ix.Store(3, kvtier.RAM, tt.ram)
			ix.Store(5, kvtier.RAM, h[:1]) // another worker, other depths
			var gpu, ram [MaxWorkers]int
			ix.Match(h, kvtier.GPU, &gpu)
			ix.MatchBeyond(h, kvtier.RAM, &gpu, &ram)
			if gpu[3] != tt.wantG || ram[3] != tt.wantR {
				t.Errorf("worker 3: gpu %d ram %d, want %d and %d", gpu[3], ram[3], tt.wantG, tt.wantR)
			}
			if ram[5] != 1 {
				t.Errorf("worker 5: ram %d, want 1", ram[5])
			}
		})
	}
}

func TestIndexBudgetEvictsLeastRecentlyUsed(t *testing.T) {
	const budget = 1000
	ix := NewIndex(budget)
	hot := make([]tokenizer.SeqHash, 100)
	for i := range hot {
		hot[i] = tokenizer.SeqHash(1_000_000 + i)
	}
	ix.Store(0, kvtier.GPU, hot)
	ix.Store(1, kvtier.GPU, hot) // 200 entries for 100 blocks
	var got [MaxWorkers]int
	for round := range 50 {
		cold := make([]tokenizer.SeqHash, 100)
		for i := range cold {
			cold[i] = tokenizer.SeqHash(round*1000 + i + 1)
		}
		ix.Store(WorkerID(2+round%3), kvtier.GPU, cold)
		ix.Match(hot, kvtier.GPU, &got) // keeps the hot prefix recently used
		st := ix.Stats()
		if st.Entries > budget {
			t.Fatalf("round %d: %d entries over the budget of %d", round, st.Entries, budget)
		}
	}
	ix.Match(hot, kvtier.GPU, &got)
	if got[0] != len(hot) || got[1] != len(hot) {
		t.Errorf("hot blocks were evicted: workers 0,1 match %d,%d of %d", got[0], got[1], len(hot))
	}
	st := ix.Stats()
	if st.EvictedBlocks == 0 || st.EvictedEntries < st.EvictedBlocks {
		t.Errorf("eviction counters: %+v", st)
	}
	var counts [MaxWorkers]int
	ix.BlockCounts(kvtier.GPU, &counts)
	total := 0
	for _, c := range counts {
		total += c
	}
	if total != st.Entries {
		t.Errorf("per-worker counts sum to %d, index has %d entries", total, st.Entries)
	}
}

func TestIndexClearWorkerKeepsOthers(t *testing.T) {
	ix := NewIndex(0)
	a := []tokenizer.SeqHash{1, 2, 3}
	ix.Store(3, kvtier.GPU, a)
	ix.Store(4, kvtier.GPU, a)
	// Store, remove and store again leaves a duplicate in worker 3's list.
	ix.Remove(3, kvtier.GPU, a)
	ix.Store(3, kvtier.GPU, a)
	ix.Store(3, kvtier.RAM, a)
	ix.ClearWorker(3)
	var got [MaxWorkers]int
	ix.Match(a, kvtier.GPU, &got)
	if got[3] != 0 || got[4] != 3 {
		t.Errorf("after ClearWorker(3): worker 3 has %d, worker 4 has %d; want 0 and 3", got[3], got[4])
	}
	if st := ix.Stats(); st.Entries != 3 || st.Blocks != 3 {
		t.Errorf("stats after clear: %+v", st)
	}
}

func TestIndexRejectsOutOfRangeWorker(t *testing.T) {
	ix := NewIndex(0)
	ix.Store(MaxWorkers, kvtier.GPU, []tokenizer.SeqHash{1})
	ix.Remove(MaxWorkers+1, kvtier.GPU, []tokenizer.SeqHash{1})
	ix.ClearWorker(MaxWorkers + 2)
	if st := ix.Stats(); st.Rejected != 3 || st.Entries != 0 {
		t.Errorf("stats: %+v, want 3 rejected and no entries", st)
	}
}

// TestIndexConcurrent runs writers and matchers together; run with -race.
func TestIndexConcurrent(t *testing.T) {
	ix := NewIndex(5000)
	rng := rand.New(rand.NewSource(9))
	chains := randomChains(rng, 20, 50)
	var wg sync.WaitGroup
	for w := range WorkerID(4) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(w)))
			for range 500 {
				c := chains[r.Intn(len(chains))]
				switch r.Intn(5) {
				case 0:
					ix.ClearWorker(w)
				case 1, 2:
					ix.Remove(w, kvtier.GPU, c[:r.Intn(len(c))])
				default:
					ix.Store(w, kvtier.GPU, c)
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out [MaxWorkers]int
			for i := range 1000 {
				c := chains[i%len(chains)]
				ix.Match(c, kvtier.GPU, &out)
				for w, n := range out {
					if n < 0 || n > len(c) {
						t.Errorf("worker %d matched %d of %d blocks", w, n, len(c))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if st := ix.Stats(); st.Entries > 5000 {
		t.Errorf("%d entries over budget", st.Entries)
	}
}

func TestIndexMatchDoesNotAllocate(t *testing.T) {
	ix := NewIndex(0)
	h := make([]tokenizer.SeqHash, 500)
	for i := range h {
		h[i] = tokenizer.SeqHash(i + 1)
	}
	ix.Store(0, kvtier.GPU, h)
	var out [MaxWorkers]int
	if n := testing.AllocsPerRun(100, func() { ix.Match(h, kvtier.GPU, &out) }); n != 0 {
		t.Errorf("Match allocates %v times per call", n)
	}
}

func TestU64TableMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	var tab u64Table
	model := map[uint64]uint64{}
	for step := range 20000 {
		k := uint64(rng.Intn(3000) + 1)
		if step%7 == 0 {
			k = rng.Uint64() | 1
		}
		switch rng.Intn(3) {
		case 0, 1:
			*tab.ref(k) += 3
			model[k] += 3
		default:
			tab.del(k)
			delete(model, k)
		}
		if step%500 == 0 {
			if tab.len() != len(model) {
				t.Fatalf("step %d: %d keys, model %d", step, tab.len(), len(model))
			}
			for k, v := range model {
				if got := tab.get(k); got != v {
					t.Fatalf("step %d: get(%d) = %d, want %d", step, k, got, v)
				}
			}
		}
	}
}

// TestIndexClearWorkerTier: a worker whose GPU cache is reset keeps what it
// holds in host RAM and on disk; other workers keep their GPU blocks.
func TestIndexClearWorkerTier(t *testing.T) {
	ix := NewIndex(0)
	h := []tokenizer.SeqHash{10, 11, 12, 13}
	ix.Store(0, kvtier.GPU, h)
	ix.Store(0, kvtier.RAM, h[:2])
	ix.Store(0, kvtier.Disk, h[:3])
	ix.Store(1, kvtier.GPU, h[:1])
	ix.ClearWorkerTier(0, kvtier.GPU)
	for _, tc := range []struct {
		tier kvtier.Tier
		want [2]int
	}{
		{kvtier.GPU, [2]int{0, 1}},
		{kvtier.RAM, [2]int{2, 0}},
		{kvtier.Disk, [2]int{3, 0}},
	} {
		var got [MaxWorkers]int
		ix.Match(h, tc.tier, &got)
		if got[0] != tc.want[0] || got[1] != tc.want[1] {
			t.Errorf("tier %v after worker 0's GPU was cleared: workers match %d and %d blocks, want %v", tc.tier, got[0], got[1], tc.want)
		}
	}
	if st := ix.Stats(); st.Entries != 2+3+1 {
		t.Errorf("%d entries, want 6", st.Entries)
	}
}
