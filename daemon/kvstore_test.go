package daemon

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/router"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// engineHashMap is an ingester's engine-hash table (router.EngineBlockMap):
// engine hash h names the block of sequence hash h+seqOffset.
type engineHashMap struct{}

const seqOffset = 1 << 40

func (engineHashMap) DropEngineBlocks(kvtier.Tier, []uint64, []bool) {}

func (engineHashMap) SeqHashOf(h uint64) (tokenizer.SeqHash, bool) {
	return tokenizer.SeqHash(h + seqOffset), true
}

// TestNodeStoreWeighsRoutedPriorities: the daemon's wiring from the
// router to the node store. A side request and a turn are routed to a
// simulated engine of the node; their blocks, written to the engine's
// space of the store by engine hash, are evicted side's first when the
// store is full, as the router's record says, through the engine-hash
// tables; a block of a space no engine owns is asked about no one.
func TestNodeStoreWeighsRoutedPriorities(t *testing.T) {
	spec := hruntime.Spec{
		Name: "e0", Engine: hruntime.KindVLLM, Simulated: true, Model: "m",
		GPU: hruntime.GPU{Node: "sim"}, KVStoreDir: t.TempDir(),
	}
	rt, err := router.New(router.Config{BlockPriorities: nodeStoreBlockPriorities})
	if err != nil {
		t.Fatal(err)
	}
	id, err := rt.AddWorker(router.WorkerInfo{Name: spec.Name, Node: "sim", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	rt.AttachIngester(id, engineHashMap{})
	// Engine hashes 1-4 are the side request's prompt, 11-14 the turn's.
	prompt := func(from uint64) []tokenizer.SeqHash {
		var hs []tokenizer.SeqHash
		for h := from; h < from+4; h++ {
			hs = append(hs, tokenizer.SeqHash(h+seqOffset))
		}
		return hs
	}
	for _, req := range []*router.Request{
		{ID: "side", Model: "m", Hashes: prompt(1), Hints: router.Hints{Priority: router.PrioritySide}},
		{ID: "turn", Model: "m", Hashes: prompt(11), Hints: router.Hints{Priority: router.PriorityTurn}},
	} {
		if _, err := rt.Route(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}

	const size = 64
	var mu sync.Mutex
	var evicted []uint64
	st, err := kvbm.OpenStore(kvbm.StoreConfig{
		Dir: spec.KVStoreDir, CapacityBytes: 8 * (kvbm.HeaderSize + size), Logger: slog.New(slog.DiscardHandler),
		OnEvict: func(_ string, hs []uint64) { mu.Lock(); evicted = append(evicted, hs...); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.WeighPriorities(newNodeStorePriorities(rt, []hruntime.Spec{spec}))
	sp := st.Space(StoreSpace(sim.ConfigOf(spec)))
	// Side and turn blocks alike old, then four blocks of an answer.
	for _, h := range []uint64{1, 11, 2, 12, 3, 13, 4, 14, 21, 22, 23, 24} {
		if err := sp.Put(h, size, nil); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []uint64{1, 2, 3, 4}; !slices.Equal(evicted, want) {
		t.Errorf("evicted %v, want the side request's blocks %v", evicted, want)
	}
	if p, ok := newNodeStorePriorities(rt, []hruntime.Spec{spec}).PriorityOf("other-space", 11); ok {
		t.Errorf("a space no engine owns has a priority %d", p)
	}
}
