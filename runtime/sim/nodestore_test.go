package sim

import (
	"errors"
	"testing"
	"time"
)

// fakeStore is a node store in memory: a set of hashes with blocks that fail to load, and a disk that
// can be full.
type fakeStore struct {
	held    map[uint64]bool
	corrupt map[uint64]bool
	full    bool
	loads   int
}

func newFakeStore() *fakeStore {
	return &fakeStore{held: make(map[uint64]bool), corrupt: make(map[uint64]bool)}
}

func (s *fakeStore) Has(p Page) bool { return s.held[p.Hash] }

func (s *fakeStore) Load(p Page, bytes int64) error {
	h := p.Hash
	s.loads++
	if s.corrupt[h] {
		delete(s.held, h) // a store drops what fails its check
		return errors.New("checksum mismatch")
	}
	return nil
}

func (s *fakeStore) Store(p Page, bytes int64) error {
	if s.full {
		return errors.New("no space left on device")
	}
	s.held[p.Hash] = true
	return nil
}

// TestNodeStoreShared: blocks one engine computes are written through to
// the node store with DISK events, and a second engine of the same model
// loads them instead of recomputing, faster than the recompute.
func TestNodeStoreShared(t *testing.T) {
	const bs = 16
	prefix := tokens(0, 40*bs)
	next := concat(prefix, tokens(90_000, 3*bs+5))
	store := newFakeStore()
	sinkA := newFakeSink(t)
	a := newCore(t, Config{NumGPUBlocks: 64, Store: store, MaxModelLen: 1024}, sinkA)
	runOne(t, newDriver(a), "turn1", prefix, 1)
	if got := len(store.held); got != 40 {
		t.Fatalf("store holds %d blocks after a 40-block prompt, want 40", got)
	}
	if got := len(sinkA.disk); got != 40 {
		t.Errorf("DISK BlockStored named %d blocks, want 40", got)
	}
	if s := a.Stats(); s.DiskStoredBlocks != 40 {
		t.Errorf("DiskStoredBlocks = %d, want 40", s.DiskStoredBlocks)
	}

	ttft := func(st NodeStore) (time.Duration, Stats, TokenOutput) {
		b := newCore(t, Config{NumGPUBlocks: 64, Store: st, MaxModelLen: 1024}, newFakeSink(t))
		d := newDriver(b)
		out := runOne(t, d, "turn2", next, 1)
		return d.first["turn2"], b.Stats(), out[0]
	}
	loaded, s, out := ttft(store)
	if s.DiskLoadedBlocks != 40 || out.CachedTokens != 40*bs {
		t.Errorf("second engine loaded %d blocks, cached tokens %d; want 40 and %d", s.DiskLoadedBlocks, out.CachedTokens, 40*bs)
	}
	if s.ExternalPrefixHits != 40*bs {
		t.Errorf("external prefix hits %d, want %d", s.ExternalPrefixHits, 40*bs)
	}
	recomputed, _, _ := ttft(nil)
	if loaded >= recomputed {
		t.Errorf("TTFT loading from the store %v, recomputing %v: the load must be faster", loaded, recomputed)
	}
}

// TestNodeStoreFaults: a block that fails its check ends the match (the
// rest is recomputed), and a full disk stores nothing and is retried.
func TestNodeStoreFaults(t *testing.T) {
	const bs = 16
	prefix := tokens(0, 40*bs)
	next := concat(prefix, tokens(90_000, 3*bs+5))

	t.Run("corrupt block", func(t *testing.T) {
		store := newFakeStore()
		runOne(t, newDriver(newCore(t, Config{NumGPUBlocks: 64, Store: store}, nil)), "turn1", prefix, 1)
		b := newCore(t, Config{NumGPUBlocks: 64, Store: store}, nil)
		store.corrupt[b.blockHashOf(prefix, 25)] = true
		out := runOne(t, newDriver(b), "turn2", next, 1)
		if s := b.Stats(); s.DiskLoadedBlocks != 25 || s.DiskLoadErrors != 1 || out[0].CachedTokens != 25*bs {
			t.Errorf("loaded %d, errors %d, cached tokens %d; want 25, 1, %d", s.DiskLoadedBlocks, s.DiskLoadErrors, out[0].CachedTokens, 25*bs)
		}
	})
	t.Run("full disk", func(t *testing.T) {
		store := newFakeStore()
		store.full = true
		sink := newFakeSink(t)
		c := newCore(t, Config{NumGPUBlocks: 64, Store: store}, sink)
		d := newDriver(c)
		mustAdd(t, c, d.now, &Request{ID: "turn1", Prompt: prefix, Output: tokens(7, 8)})
		d.step(t) // the prefill: every write fails
		if s := c.Stats(); s.DiskStoreErrors == 0 || len(store.held) != 0 || len(sink.disk) != 0 {
			t.Fatalf("full disk: %d errors, %d held, %d events", s.DiskStoreErrors, len(store.held), len(sink.disk))
		}
		store.full = false
		d.run(t)
		if len(store.held) != 40 || len(sink.disk) != 40 {
			t.Errorf("after the disk freed up: %d held, %d in events; want 40", len(store.held), len(sink.disk))
		}
	})
}

// blockHashOf is the engine hash of prompt's i-th block.
func (c *Core) blockHashOf(prompt []uint32, i int) uint64 {
	r := &request{tokens: prompt, promptLen: len(prompt)}
	return c.blockHash(r, i)
}
