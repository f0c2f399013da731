package kvbm

import (
	"slices"
	"sync"
	"testing"
)

// fakePriorities is a BlockPriorities of fixed priorities by hash, which
// counts the questions it is asked.
type fakePriorities struct {
	mu    sync.Mutex
	prio  map[uint64]int
	asked int
}

func (f *fakePriorities) PriorityOf(space string, hash uint64) (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	p, ok := f.prio[hash]
	return p, ok
}

const (
	testSide       = -1 // router.PrioritySide
	testBackground = -2 // router.PriorityBackground
)

// TestEvictionWeighsPriority: under capacity pressure, blocks only side
// requests or background work covered, and blocks no request covered,
// leave before turn blocks of the same age; then, in a store full of turn
// blocks, the turn blocks leave too, oldest first, each after its one
// reprieve. Without priorities the same writes evict in plain LRU order.
func TestEvictionWeighsPriority(t *testing.T) {
	const size = 100
	const capBlocks = 8
	prio := map[uint64]int{
		1: TurnPriority, 2: testSide, 3: TurnPriority, 4: testBackground,
		5: TurnPriority, 6: testSide, 7: TurnPriority, // 8: unknown
	}
	for h := uint64(9); h <= 20; h++ {
		prio[h] = TurnPriority
	}
	tests := []struct {
		name      string
		weigh     bool
		round1    []uint64 // evicted by blocks 9-12
		kept1     []uint64
		round2    []uint64 // evicted by blocks 13-20
		wantAsked int
	}{
		{
			name:   "with priorities",
			weigh:  true,
			round1: []uint64{2, 4, 6, 8},
			kept1:  []uint64{1, 3, 5, 7, 9, 10, 11, 12},
			// The store holds turn blocks only: each leaves after its
			// reprieve, the four spared in round 1 first.
			round2: []uint64{1, 3, 5, 7, 9, 10, 11, 12},
			// Once per block per reprieve: 1-16 when first reached
			// (13-16 are spared then), 17-20 never reached.
			wantAsked: 16,
		},
		{
			name:   "plain LRU",
			round1: []uint64{1, 2, 3, 4},
			kept1:  []uint64{5, 6, 7, 8, 9, 10, 11, 12},
			round2: []uint64{5, 6, 7, 8, 9, 10, 11, 12},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var evicted evictLog
			s := openTest(t, t.TempDir(), capBlocks*(HeaderSize+size), func(c *StoreConfig) { c.OnEvict = evicted.record })
			src := &fakePriorities{prio: prio}
			if tc.weigh {
				s.WeighPriorities(src)
			}
			sp := s.Space("m")
			put := func(from, to uint64) {
				t.Helper()
				for h := from; h <= to; h++ {
					if err := sp.Put(h, size, nil); err != nil {
						t.Fatal(err)
					}
					if st := s.Stats().Total; st.Bytes > s.Capacity() {
						t.Fatalf("after block %d the store holds %d bytes, capacity %d", h, st.Bytes, s.Capacity())
					}
				}
			}
			put(1, 8)
			put(9, 12)
			if got := evicted.get("m"); !slices.Equal(got, tc.round1) {
				t.Errorf("blocks 9-12 evicted %v, want %v", got, tc.round1)
			}
			for _, h := range tc.kept1 {
				if !sp.Has(h) {
					t.Errorf("block %d is gone after blocks 9-12", h)
				}
			}
			put(13, 20)
			if got := evicted.get("m"); !slices.Equal(got[min(len(got), 4):], tc.round2) {
				t.Errorf("blocks 13-20 evicted %v, want %v", got[min(len(got), 4):], tc.round2)
			}
			for h := uint64(13); h <= 20; h++ {
				if !sp.Has(h) {
					t.Errorf("block %d is gone", h)
				}
			}
			if src.asked != tc.wantAsked {
				t.Errorf("priorities asked %d times, want %d", src.asked, tc.wantAsked)
			}
		})
	}
}

// TestPriorityReprievesAreBounded: one eviction in a store full of turn
// blocks, more than maxSecondChances of them, spares at most
// maxSecondChances and then evicts, so a write never waits on a long
// walk and the store never goes over its capacity.
func TestPriorityReprievesAreBounded(t *testing.T) {
	const size = 1
	const capBlocks = maxSecondChances + 44
	var evicted evictLog
	s := openTest(t, t.TempDir(), capBlocks*(HeaderSize+size), func(c *StoreConfig) { c.OnEvict = evicted.record })
	src := &fakePriorities{prio: map[uint64]int{}}
	for h := uint64(1); h <= capBlocks+1; h++ {
		src.prio[h] = TurnPriority
	}
	s.WeighPriorities(src)
	sp := s.Space("m")
	for h := uint64(1); h <= capBlocks+1; h++ {
		if err := sp.Put(h, size, nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats().Total; st.Bytes > s.Capacity() || st.Blocks != capBlocks {
		t.Errorf("the store holds %d blocks, %d bytes; want %d blocks within %d bytes", st.Blocks, st.Bytes, capBlocks, s.Capacity())
	}
	// The oldest maxSecondChances were spared; the next oldest went.
	if got, want := evicted.get("m"), []uint64{maxSecondChances + 1}; !slices.Equal(got, want) {
		t.Errorf("evicted %v, want %v", got, want)
	}
	if src.asked != maxSecondChances {
		t.Errorf("priorities asked %d times, want %d", src.asked, maxSecondChances)
	}
}
