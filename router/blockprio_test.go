package router

import (
	"context"
	"testing"

	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/tokenizer"
)

// TestBlockPrioritiesRecord: a block's priority is the highest of the
// requests that covered it; the record holds a bounded number of blocks
// and, where two compete for a slot, keeps the one noted last.
func TestBlockPrioritiesRecord(t *testing.T) {
	b := newBlockPriorities(60)
	if got := len(b.slots); got != 64 {
		t.Fatalf("%d slots for 60, want 64", got)
	}
	side, turn := chain("side", 2), chain("turn", 1)
	b.note(side, PrioritySide)
	b.note(append(side[:1:1], turn...), PriorityTurn)
	b.note(side[:1], PriorityBackground) // a lower priority lowers nothing
	for _, c := range []struct {
		h    tokenizer.SeqHash
		want int
	}{{side[0], PriorityTurn}, {side[1], PrioritySide}, {turn[0], PriorityTurn}} {
		if p, ok := b.of(c.h); !ok || p != c.want {
			t.Errorf("priority of %x: %d, %v; want %d", c.h, p, ok, c.want)
		}
	}
	if _, ok := b.of(chain("never", 1)[0]); ok {
		t.Error("a block never noted has a priority")
	}
	// Many more blocks than slots: the record stays its size and holds
	// the latest block of each slot.
	many := chain("many", 1000)
	b.note(many, PriorityBackground)
	if len(b.slots) != 64 {
		t.Errorf("the record grew to %d slots", len(b.slots))
	}
	if p, ok := b.of(many[999]); !ok || p != PriorityBackground {
		t.Errorf("the last block noted: %d, %v", p, ok)
	}
	if newBlockPriorities(0) != nil {
		t.Error("a record of no slots was made")
	}
}

// fakeBlockMap maps engine hashes to sequence hashes.
type fakeBlockMap map[uint64]tokenizer.SeqHash

func (f fakeBlockMap) DropEngineBlocks(kvtier.Tier, []uint64, []bool) {}

func (f fakeBlockMap) SeqHashOf(h uint64) (tokenizer.SeqHash, bool) {
	s, ok := f[h]
	return s, ok
}

// TestNodeBlockPriority: the router notes the priority of every prompt it
// routes and answers for a block of a node's disk by engine hash, through
// the node's ingesters' tables; it knows nothing of other nodes or models,
// nor without a record.
func TestNodeBlockPriority(t *testing.T) {
	workers := []WorkerInfo{{Name: "a", Node: "n1", Model: "m"}, {Name: "b", Node: "n2", Model: "m"}}
	turn, side := chain("turn", 3), chain("side", 3)
	shared := turn[0] // a side request's prompt covers the turn's first block too
	side[0] = shared
	maps := fakeBlockMap{}
	for i, h := range append(turn, side[1:]...) {
		maps[uint64(1000+i)] = h
	}
	for _, c := range []struct {
		name   string
		record int
		want   map[uint64]int // by engine hash; absent: unknown
	}{
		{"with a record", 1 << 10, map[uint64]int{1000: PriorityTurn, 1001: PriorityTurn, 1002: PriorityTurn, 1003: PrioritySide, 1004: PrioritySide}},
		{"without", 0, map[uint64]int{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := newTestRouter(t, Config{BlockPriorities: c.record}, workers...)
			for i := range workers {
				r.AttachIngester(WorkerID(i), maps)
			}
			for i, req := range []*Request{
				{ID: "side", Model: "m", Hashes: side, Hints: Hints{Priority: PrioritySide}},
				{ID: "turn", Model: "m", Hashes: turn, Hints: Hints{Priority: PriorityTurn}},
			} {
				if _, err := r.Route(context.Background(), req); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
			}
			for eh := uint64(1000); eh <= 1005; eh++ {
				want, known := c.want[eh]
				if p, ok := r.NodeBlockPriority("n1", "m", eh); ok != known || p != want {
					t.Errorf("block %d: %d, %v; want %d, %v", eh, p, ok, want, known)
				}
			}
			if _, ok := r.NodeBlockPriority("n3", "m", 1000); ok {
				t.Error("a node without workers knows a block")
			}
			if _, ok := r.NodeBlockPriority("n1", "other", 1000); ok {
				t.Error("a model without workers knows a block")
			}
		})
	}
}

// BenchmarkBlockPrioritiesNote is what Enqueue adds per prompt with a
// record: noting a 4,096-block prompt (64k tokens) in a record of 2^18
// blocks, alternating between two prompts that both stay in the record
// (their 8,192 slots stay in CPU cache: a warm record). ns/block is per
// prompt block.
func BenchmarkBlockPrioritiesNote(b *testing.B) {
	rec := newBlockPriorities(1 << 18)
	prompts := [][]tokenizer.SeqHash{chain("a", 4096), chain("b", 4096)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec.note(prompts[i%2], i%3-2)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4096, "ns/block")
}
