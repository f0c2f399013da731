package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/kvevents"
)

func TestPrefixCacheHits(t *testing.T) {
	shared := tokens(1, 40)
	tests := []struct {
		name        string
		first       []uint32
		second      []uint32
		wantCached  int
		wantQueries int64
	}{
		{"identical prompt recomputes its last block", tokens(1, 64), tokens(1, 64), 48, 128},
		{"identical prompt with a partial block", tokens(1, 70), tokens(1, 70), 64, 140},
		{"shared prefix counts whole blocks", concat(shared, tokens(500, 40)), concat(shared, tokens(900, 40)), 32, 160},
		{"longer second prompt", tokens(1, 64), tokens(1, 100), 64, 164},
		{"different first token", tokens(1, 64), concat([]uint32{7}, tokens(2, 63)), 0, 128},
		{"shorter than a block", tokens(1, 15), tokens(1, 15), 0, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCore(t, Config{}, nil)
			d := newDriver(c)
			mustAdd(t, c, 0, &Request{ID: "a", Prompt: tt.first, Output: tokens(1, 1)})
			d.run(t)
			mustAdd(t, c, d.now, &Request{ID: "b", Prompt: tt.second, Output: tokens(1, 2)})
			d.run(t)
			outs := d.outputs["b"]
			if len(outs) != 2 {
				t.Fatalf("b produced %d outputs, want 2", len(outs))
			}
			for _, o := range outs {
				if o.CachedTokens != tt.wantCached || o.PromptTokens != len(tt.second) {
					t.Errorf("output %+v: want CachedTokens %d, PromptTokens %d", o, tt.wantCached, len(tt.second))
				}
			}
			s := c.Stats()
			if s.PrefixHits != int64(tt.wantCached) || s.PrefixQueries != tt.wantQueries {
				t.Errorf("prefix hits/queries = %d/%d, want %d/%d", s.PrefixHits, s.PrefixQueries, tt.wantCached, tt.wantQueries)
			}
			checkInvariants(t, c)
		})
	}
}

// lruCore returns a core with a tiny cache of n blocks.
func lruCore(t *testing.T, n int, sink EventSink) *Core {
	return newCore(t, Config{NumGPUBlocks: n, MaxModelLen: n * 16}, sink)
}

func TestEvictionOrder(t *testing.T) {
	// A cache of 8 blocks. A and B each leave 2 cached blocks; then C needs
	// 6 blocks and must evict exactly 2 of them.
	tests := []struct {
		name    string
		reuseA  bool     // touch A again after B finished: A becomes most recent
		evicted []string // which request's blocks go, deepest first
	}{
		{"least recently used first", false, []string{"a1", "a0"}},
		{"a hit refreshes recency", true, []string{"b1", "b0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := newFakeSink(t)
			c := lruCore(t, 8, sink)
			d := newDriver(c)
			promptA, promptB := tokens(1000, 32), tokens(2000, 32)
			mustAdd(t, c, 0, &Request{ID: "a", Prompt: promptA, Output: tokens(1, 1)})
			d.run(t)
			mustAdd(t, c, d.now, &Request{ID: "b", Prompt: promptB, Output: tokens(1, 1)})
			d.run(t)
			hashA := c.byHashOf(promptA)
			hashB := c.byHashOf(promptB)
			if tt.reuseA {
				// 33 tokens: both of A's blocks are hits.
				mustAdd(t, c, d.now, &Request{ID: "a2", Prompt: concat(promptA, []uint32{5}), Output: tokens(1, 1)})
				d.run(t)
				if got := d.outputs["a2"][0].CachedTokens; got != 32 {
					t.Fatalf("a2 cached %d tokens, want 32", got)
				}
			}
			if got := c.Stats().CachedFreeBlocks; got < 4 {
				t.Fatalf("cached free blocks = %d, want >= 4", got)
			}
			sink.events = nil
			mustAdd(t, c, d.now, &Request{ID: "c", Prompt: tokens(3000, 96), Output: tokens(1, 1)})
			d.run(t)

			names := map[uint64]string{hashA[0]: "a0", hashA[1]: "a1", hashB[0]: "b0", hashB[1]: "b1"}
			var removed []string
			for _, e := range sink.events {
				if e.Kind == kvevents.BlockRemoved {
					for _, h := range e.BlockHashes {
						removed = append(removed, names[h])
					}
				}
			}
			if !slices.Equal(removed, tt.evicted) {
				t.Errorf("evicted %v, want %v", removed, tt.evicted)
			}
			checkInvariants(t, c)
		})
	}
}

// byHashOf returns the engine hashes of the full blocks of prompt.
func (c *Core) byHashOf(prompt []uint32) []uint64 {
	r := &request{tokens: prompt, promptLen: len(prompt)}
	var out []uint64
	for i := 0; i < len(prompt)/c.cfg.BlockSize; i++ {
		out = append(out, c.blockHash(r, i))
	}
	return out
}

func TestSharedPrefixRefCounts(t *testing.T) {
	c := newCore(t, Config{}, nil)
	d := newDriver(c)
	prefix := tokens(1, 48)
	mustAdd(t, c, 0, &Request{ID: "a", Prompt: concat(prefix, tokens(100, 10)), Output: tokens(1, 50)})
	d.step(t) // a computes and stores the 3 prefix blocks
	mustAdd(t, c, d.now, &Request{ID: "b", Prompt: concat(prefix, tokens(200, 10)), Output: tokens(1, 50)})
	d.step(t) // b hits them

	hashes := c.byHashOf(prefix)
	refs := func() []int32 {
		var out []int32
		for _, h := range hashes {
			id, ok := c.pool.lookup(h)
			if !ok {
				t.Fatalf("prefix block %x not cached", h)
			}
			out = append(out, c.pool.blocks[id].refs)
		}
		return out
	}
	if got := refs(); !slices.Equal(got, []int32{2, 2, 2}) {
		t.Fatalf("refs with both running = %v, want [2 2 2]", got)
	}
	if got := d.outputs["b"][0].CachedTokens; got != 48 {
		t.Errorf("b cached %d tokens, want 48", got)
	}
	checkInvariants(t, c)
	if !c.Abort(d.now, "a") {
		t.Fatal("Abort(a) = false")
	}
	if got := refs(); !slices.Equal(got, []int32{1, 1, 1}) {
		t.Fatalf("refs after aborting a = %v, want [1 1 1]", got)
	}
	checkInvariants(t, c)
	c.Abort(d.now, "b")
	if got := refs(); !slices.Equal(got, []int32{0, 0, 0}) {
		t.Fatalf("refs after aborting both = %v, want [0 0 0]", got)
	}
	s := c.Stats()
	if s.UsedBlocks != 0 || s.Running != 0 || s.KVUsage != 0 {
		t.Errorf("after aborts: %+v", s)
	}
	if s.CachedFreeBlocks < 3 {
		t.Errorf("cached free blocks = %d, want the prefix kept", s.CachedFreeBlocks)
	}
	checkInvariants(t, c)
}

func TestAbort(t *testing.T) {
	tests := []struct {
		name      string
		stepFirst bool // abort while running rather than waiting
		id        string
		want      bool
	}{
		{"waiting request", false, "a", true},
		{"running request", true, "a", true},
		{"unknown id", true, "zz", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCore(t, Config{}, nil)
			mustAdd(t, c, 0, &Request{ID: "a", Prompt: tokens(1, 100), Output: tokens(1, 10)})
			if tt.stepFirst {
				c.Step(0)
				if c.Stats().UsedBlocks == 0 {
					t.Fatal("running request holds no blocks")
				}
			}
			if got := c.Abort(0, tt.id); got != tt.want {
				t.Fatalf("Abort(%q) = %v, want %v", tt.id, got, tt.want)
			}
			if !tt.want {
				return
			}
			if c.HasWork() {
				t.Error("HasWork after aborting the only request")
			}
			if s := c.Stats(); s.UsedBlocks != 0 || s.Waiting != 0 || s.Running != 0 {
				t.Errorf("stats after abort: %+v", s)
			}
			// The id is free again.
			mustAdd(t, c, 0, &Request{ID: "a", Prompt: tokens(1, 100), Output: tokens(1, 1)})
			checkInvariants(t, c)
		})
	}
}

func TestGeneratedTokensAreCached(t *testing.T) {
	sink := newFakeSink(t)
	c := newCore(t, Config{}, sink)
	d := newDriver(c)
	prompt, output := tokens(1, 16), tokens(5000, 20)
	mustAdd(t, c, 0, &Request{ID: "a", Prompt: prompt, Output: output})
	d.run(t)
	// 16 prompt + 19 computed output tokens: two full blocks, the second
	// made of generated tokens only.
	var stored [][]uint32
	for _, e := range sink.events {
		if e.Kind == kvevents.BlockStored {
			stored = append(stored, e.TokenIDs)
		}
	}
	if len(stored) != 2 || !slices.Equal(stored[0], prompt) || !slices.Equal(stored[1], output[:16]) {
		t.Fatalf("stored blocks %v, want the prompt then the first 16 outputs", stored)
	}
	second := sink.events[len(sink.events)-1]
	if !second.HasParent || second.ParentBlockHash != sink.events[0].BlockHashes[0] {
		t.Errorf("second block's parent %x (has %v), want %x", second.ParentBlockHash, second.HasParent, sink.events[0].BlockHashes[0])
	}
	// The next turn of the conversation hits both blocks.
	mustAdd(t, c, d.now, &Request{ID: "b", Prompt: concat(prompt, output, tokens(9000, 30)), Output: tokens(1, 1)})
	d.run(t)
	if got := d.outputs["b"][0].CachedTokens; got != 32 {
		t.Errorf("next turn cached %d tokens, want 32", got)
	}
}

func TestDuplicateBlockStaysAnonymous(t *testing.T) {
	// a's second block fills with generated tokens after b, whose prompt
	// already contains those tokens, stored the same block: the hash must be
	// stored once.
	sink := newFakeSink(t)
	c := newCore(t, Config{}, sink)
	d := newDriver(c)
	prompt, output := tokens(1, 20), tokens(5000, 40)
	mustAdd(t, c, 0, &Request{ID: "a", Prompt: prompt, Output: output})
	d.step(t)
	mustAdd(t, c, d.now, &Request{ID: "b", Prompt: concat(prompt, output[:20]), Output: tokens(1, 5)})
	d.run(t)
	checkInvariants(t, c)
	if got, want := sink.cached, c.CachedBlockHashes(); len(got) != len(want) {
		t.Errorf("sink holds %d hashes, engine %d", len(got), len(want))
	}
	if n := sink.count(kvevents.BlockStored); n == 0 {
		t.Error("no BlockStored events")
	}
}

func TestReset(t *testing.T) {
	sink := newFakeSink(t)
	c := newCore(t, Config{}, sink)
	d := newDriver(c)
	mustAdd(t, c, 0, &Request{ID: "done", Prompt: tokens(1, 64), Output: tokens(1, 1)})
	d.run(t)
	mustAdd(t, c, d.now, &Request{ID: "live", Prompt: tokens(1000, 64), Output: tokens(1, 20)})
	d.step(t)
	if len(c.CachedBlockHashes()) == 0 {
		t.Fatal("nothing cached before reset")
	}
	c.Reset(d.now)
	if got := c.CachedBlockHashes(); len(got) != 0 {
		t.Errorf("cached after reset: %v", got)
	}
	if sink.count(kvevents.AllBlocksCleared) != 1 || len(sink.cached) != 0 {
		t.Errorf("AllBlocksCleared events %d, sink cache %d", sink.count(kvevents.AllBlocksCleared), len(sink.cached))
	}
	s := c.Stats()
	if s.CachedFreeBlocks != 0 || s.UsedBlocks == 0 {
		t.Errorf("after reset: cached free %d, used %d; want 0 and the live request's", s.CachedFreeBlocks, s.UsedBlocks)
	}
	d.run(t)
	mustAdd(t, c, d.now, &Request{ID: "again", Prompt: tokens(1, 64), Output: tokens(1, 1)})
	d.run(t)
	if got := d.outputs["again"][0].CachedTokens; got != 0 {
		t.Errorf("cached tokens after reset = %d, want 0", got)
	}
	checkInvariants(t, c)
}

func TestBlockHashes(t *testing.T) {
	a := chainHash(rootHash(0), tokens(1, 16))
	tests := []struct {
		name string
		h    uint64
		same bool
	}{
		{"same parent and tokens", chainHash(rootHash(0), tokens(1, 16)), true},
		{"other seed", chainHash(rootHash(1), tokens(1, 16)), false},
		{"other token", chainHash(rootHash(0), concat(tokens(1, 15), []uint32{99})), false},
		{"other parent", chainHash(a, tokens(1, 16)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if (tt.h == a) != tt.same {
				t.Errorf("hash %x vs %x: same=%v, want %v", tt.h, a, tt.h == a, tt.same)
			}
		})
	}
}

func TestCachedPrefixBlocksReadsWithoutTouching(t *testing.T) {
	c, err := NewCore(Config{GPU: "rtx4090", Model: "qwen3-8b", NumGPUBlocks: 64}, nil)
	if err != nil {
		t.Fatal(err)
	}
	prompt := make([]uint32, 16*5+3)
	for i := range prompt {
		prompt[i] = uint32(i + 1)
	}
	if n := c.CachedPrefixBlocks(prompt); n != 0 {
		t.Fatalf("empty cache: %d cached blocks", n)
	}
	if err := c.Add(0, &Request{ID: "a", Prompt: prompt, Output: []uint32{7}}); err != nil {
		t.Fatal(err)
	}
	for now := time.Duration(0); c.HasWork(); {
		now += c.Step(now).Duration
	}
	stats := c.Stats()
	if n := c.CachedPrefixBlocks(prompt); n != 5 {
		t.Errorf("after serving: %d cached blocks, want the prompt's 5 full blocks", n)
	}
	other := append([]uint32{999}, prompt[1:]...)
	if n := c.CachedPrefixBlocks(other); n != 0 {
		t.Errorf("prompt differing in its first token: %d cached blocks, want 0", n)
	}
	if after := c.Stats(); after != stats {
		t.Errorf("lookup changed the engine's counters: %+v -> %+v", stats, after)
	}
}
