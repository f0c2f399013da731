package ingest

import (
	"context"
	"slices"
	"testing"

	"github.com/hearth-llm/hearth/kvevents"
	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/router"
)

// newNodeRouter returns a router with workers, ids 0, 1, ... in order.
func newNodeRouter(t *testing.T, workers ...router.WorkerInfo) *router.Router {
	t.Helper()
	r, err := router.New(router.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range workers {
		if _, err := r.AddWorker(w); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// diskCounts returns how many disk blocks the index holds for each of the
// first n workers.
func diskCounts(t *testing.T, ix *router.Index, n int) []int {
	t.Helper()
	var out [router.MaxWorkers]int
	ix.BlockCounts(kvtier.Disk, &out)
	return out[:n:n]
}

// offloadToDisk returns a BlockStored of blocks [from, to) written to
// disk, which carries engine hashes only.
func offloadToDisk(e *fakeEngine, tokens []uint32, from, to int) kvevents.Event {
	ev := e.offload(tokens, from, to)
	ev.Medium = kvevents.MediumDisk
	return ev
}

// TestRemoveNodeBlocks: the node store's evictions, named by engine hash,
// leave the disk tier of every worker of the node, whichever engine wrote
// the blocks, and leave every other tier and node alone.
func TestRemoveNodeBlocks(t *testing.T) {
	r := newNodeRouter(t,
		router.WorkerInfo{Name: "a", Node: "n1", Model: "m"},
		router.WorkerInfo{Name: "b", Node: "n1", Model: "m"},
		router.WorkerInfo{Name: "c", Node: "n2", Model: "m"},
	)
	ix := r.Index()
	var ings [3]*Ingester
	var engines [3]*fakeEngine
	for i := range ings {
		ings[i] = NewIngester(IngesterConfig{WorkerID: router.WorkerID(i)}, ix, nil)
		engines[i] = newFakeEngine(1, 16)
		if !r.AttachIngester(router.WorkerID(i), ings[i]) {
			t.Fatalf("attach %d failed", i)
		}
	}
	feed := func(w int, events ...kvevents.Event) {
		t.Helper()
		b := engines[w].publish(events...)
		if err := ings[w].HandleLive(context.Background(), b.seq, b.payload); err != nil {
			t.Fatal(err)
		}
	}
	pa, pb := tokenRun(1, 6*16), tokenRun(5000, 4*16)
	// Engine a computes and writes pa to the node's disk; engine b writes
	// pb; engine c, on another node, writes pa to its own.
	feed(0, engines[0].store(pa, 0, 6, ""), offloadToDisk(engines[0], pa, 0, 6))
	feed(1, engines[1].store(pb, 0, 4, ""), offloadToDisk(engines[1], pb, 0, 4))
	feed(2, engines[2].store(pa, 0, 6, ""), offloadToDisk(engines[2], pa, 0, 6))
	if got, want := diskCounts(t, ix, 3), []int{10, 10, 6}; !slices.Equal(got, want) {
		t.Fatalf("disk blocks per worker %v, want %v", got, want)
	}

	sa, sb := seqHashes(pa, ""), seqHashes(pb, "")
	evict := []uint64{engineHashOf(sa[4], ""), engineHashOf(sa[5], ""), engineHashOf(sb[3], ""), 0xdead}
	if n := r.RemoveNodeBlocks("n1", "m", evict); n != 3 {
		t.Errorf("RemoveNodeBlocks removed %d blocks, want 3 (one hash is unknown)", n)
	}
	if got, want := diskCounts(t, ix, 3), []int{7, 7, 6}; !slices.Equal(got, want) {
		t.Fatalf("after the eviction: disk blocks per worker %v, want %v", got, want)
	}
	var gpu [router.MaxWorkers]int
	ix.BlockCounts(kvtier.GPU, &gpu)
	if gpu[0] != 6 || gpu[1] != 4 || gpu[2] != 6 {
		t.Errorf("GPU blocks %v, want 6, 4, 6: an eviction from disk touches only the disk", gpu[:3])
	}
	// The tables forgot the disk copies: the same eviction again finds
	// nothing, and neither does one for another model or node.
	if n := r.RemoveNodeBlocks("n1", "m", evict); n != 0 {
		t.Errorf("a repeated eviction removed %d blocks", n)
	}
	if n := r.RemoveNodeBlocks("n1", "other", []uint64{engineHashOf(sa[0], "")}); n != 0 {
		t.Errorf("an eviction for another model removed %d blocks", n)
	}
	if st := ings[0].Stats(); st.UnknownRemove != 0 || st.BlocksRemoved != 2 {
		t.Errorf("ingester a: %d unknown removals, %d removed; want 0 and 2", st.UnknownRemove, st.BlocksRemoved)
	}
	// A removed worker's table is no longer consulted.
	r.RemoveWorker(0)
	if n := r.RemoveNodeBlocks("n1", "m", []uint64{engineHashOf(sa[0], "")}); n != 0 {
		t.Errorf("eviction through a removed worker's table removed %d blocks", n)
	}
	if got := diskCounts(t, ix, 3); got[1] != 7 {
		t.Errorf("worker b holds %d disk blocks, want 7", got[1])
	}
}

// TestRemoveNodeBlocksConcurrentIngest runs node evictions while the
// ingest loop applies events (for the race detector).
func TestRemoveNodeBlocksConcurrentIngest(t *testing.T) {
	r := newNodeRouter(t, router.WorkerInfo{Name: "a", Node: "n1"}, router.WorkerInfo{Name: "b", Node: "n1"})
	in := NewIngester(IngesterConfig{WorkerID: 0}, r.Index(), nil)
	r.AttachIngester(0, in)
	e := newFakeEngine(1, 4)
	toks := tokenRun(1, 8*16)
	hashes := seqHashes(toks, "")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			b := e.publish(e.store(toks, 0, 8, ""), offloadToDisk(e, toks, 0, 8))
			_ = in.HandleLive(context.Background(), b.seq, b.payload)
		}
	}()
	evict := make([]uint64, len(hashes))
	for i, h := range hashes {
		evict[i] = engineHashOf(h, "")
	}
	for i := 0; i < 200; i++ {
		r.RemoveNodeBlocks("n1", "", evict)
	}
	<-done
	r.RemoveNodeBlocks("n1", "", evict)
	if got := diskCounts(t, r.Index(), 2); got[0] != 0 || got[1] != 0 {
		t.Errorf("disk blocks %v after the last eviction, want none", got)
	}
}

// TestOnDiskStoredNamesTheBlocksWritten: the hook hears the engine hashes
// of every disk-tier BlockStored, those whose GPU store was missed too
// (the file is on disk all the same), and nothing of the other tiers.
func TestOnDiskStoredNamesTheBlocksWritten(t *testing.T) {
	r := newNodeRouter(t, router.WorkerInfo{Name: "a", Node: "n1", Model: "m"})
	var heard []uint64
	ing := NewIngester(IngesterConfig{WorkerID: 0, OnDiskStored: func(hs []uint64) { heard = append(heard, hs...) }}, r.Index(), nil)
	e := newFakeEngine(1, 16)
	pa, pb := tokenRun(1, 6*16), tokenRun(5000, 4*16)
	toDisk := offloadToDisk(e, pa, 0, 6)
	orphan := offloadToDisk(e, pb, 0, 4) // pb never stored on the GPU
	b := e.publish(e.store(pa, 0, 6, ""), e.offload(pa, 0, 6), toDisk, orphan, e.remove(pa, 0, 2, kvtier.GPU))
	if err := ing.HandleLive(context.Background(), b.seq, b.payload); err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(toDisk.BlockHashes), orphan.BlockHashes...)
	if !slices.Equal(heard, want) {
		t.Errorf("heard %x, want the disk events' %x", heard, want)
	}
}

// TestNodeBlockPriorityThroughTables: the node store asks, by engine
// hash, which priority of request covered a block on the node's disk; the
// router answers through the ingester's engine-hash table, in the hash
// space of the prompts it routed, and forgets a block the table forgot.
func TestNodeBlockPriorityThroughTables(t *testing.T) {
	r, err := router.New(router.Config{BlockPriorities: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.AddWorker(router.WorkerInfo{Name: "a", Node: "n1", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	in := NewIngester(IngesterConfig{WorkerID: 0}, r.Index(), nil)
	r.AttachIngester(0, in)
	e := newFakeEngine(1, 16)
	pa := tokenRun(1, 6*16)
	b := e.publish(e.store(pa, 0, 6, ""), offloadToDisk(e, pa, 0, 6))
	if err := in.HandleLive(context.Background(), b.seq, b.payload); err != nil {
		t.Fatal(err)
	}
	// A side request's prompt covers all six blocks, a turn's the first
	// two.
	for _, req := range []*router.Request{
		{ID: "side", Model: "m", Tokens: pa, Hints: router.Hints{Priority: router.PrioritySide}},
		{ID: "turn", Model: "m", Tokens: pa[:2*16], Hints: router.Hints{Priority: router.PriorityTurn}},
	} {
		if _, err := r.Route(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	sa := seqHashes(pa, "")
	for i, want := range []int{router.PriorityTurn, router.PriorityTurn, router.PrioritySide, router.PrioritySide, router.PrioritySide, router.PrioritySide} {
		if p, ok := r.NodeBlockPriority("n1", "m", engineHashOf(sa[i], "")); !ok || p != want {
			t.Errorf("block %d: priority %d, %v; want %d", i, p, ok, want)
		}
	}
	// Gone from disk and GPU, the block is no longer mapped: unknown.
	r.RemoveNodeBlocks("n1", "m", []uint64{engineHashOf(sa[5], "")})
	b = e.publish(e.remove(pa, 5, 6, kvtier.GPU))
	if err := in.HandleLive(context.Background(), b.seq, b.payload); err != nil {
		t.Fatal(err)
	}
	if p, ok := r.NodeBlockPriority("n1", "m", engineHashOf(sa[5], "")); ok {
		t.Errorf("a block no tier holds has priority %d", p)
	}
}
