package sim

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/kvevents"
)

// tokens returns n token ids starting at base: distinct bases give prompts
// that share no block.
func tokens(base, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(base + i)
	}
	return out
}

func concat(parts ...[]uint32) []uint32 {
	var out []uint32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func newCore(t testing.TB, cfg Config, sink EventSink) *Core {
	t.Helper()
	if cfg.GPU == "" {
		cfg.GPU = "rtx4090"
	}
	if cfg.Model == "" {
		cfg.Model = "qwen3-14b-fp8"
	}
	c, err := NewCore(cfg, sink)
	if err != nil {
		t.Fatalf("NewCore: %v", err)
	}
	return c
}

func mustAdd(t testing.TB, c *Core, now time.Duration, r *Request) {
	t.Helper()
	if err := c.Add(now, r); err != nil {
		t.Fatalf("Add(%s): %v", r.ID, err)
	}
}

// driver steps a core in virtual time, recording when each request got its
// first token and finished.
type driver struct {
	core     *Core
	now      time.Duration
	first    map[string]time.Duration
	done     map[string]time.Duration
	outputs  map[string][]TokenOutput
	steps    int
	maxSteps int
}

func newDriver(c *Core) *driver {
	return &driver{
		core:     c,
		first:    make(map[string]time.Duration),
		done:     make(map[string]time.Duration),
		outputs:  make(map[string][]TokenOutput),
		maxSteps: 1_000_000,
	}
}

// step runs one step and records its outputs.
func (d *driver) step(t testing.TB) StepResult {
	t.Helper()
	res := d.core.Step(d.now)
	d.now += res.Duration
	d.steps++
	for _, o := range res.Outputs {
		if o.Index == 0 {
			d.first[o.RequestID] = d.now
		}
		if o.Finished {
			d.done[o.RequestID] = d.now
		}
		d.outputs[o.RequestID] = append(d.outputs[o.RequestID], o)
	}
	return res
}

// run steps until the core has no work.
func (d *driver) run(t testing.TB) {
	t.Helper()
	for d.core.HasWork() {
		if d.steps >= d.maxSteps {
			t.Fatalf("core still has work after %d steps", d.steps)
		}
		d.step(t)
	}
}

// checkInvariants verifies the pool's bookkeeping against the requests.
func checkInvariants(t testing.TB, c *Core) {
	t.Helper()
	refs := make([]int32, len(c.pool.blocks))
	for _, r := range c.running {
		for _, id := range r.blocks {
			refs[id]++
		}
		if want := (r.numComputed + r.scheduled + c.cfg.BlockSize - 1) / c.cfg.BlockSize; len(r.blocks) < want {
			t.Fatalf("request %s has %d blocks for %d computed tokens", r.id, len(r.blocks), r.numComputed)
		}
	}
	for _, r := range c.waiting.items {
		if len(r.blocks) != 0 {
			t.Fatalf("waiting request %s holds %d blocks", r.id, len(r.blocks))
		}
	}
	free, cachedFree := 0, 0
	for id := c.pool.head; id != noBlock; id = c.pool.blocks[id].next {
		free++
		if c.pool.blocks[id].hashed {
			cachedFree++
		}
		if refs[id] != 0 {
			t.Fatalf("block %d is free and used by %d requests", id, refs[id])
		}
	}
	if free != c.pool.numFree || cachedFree != c.pool.numCachedFree {
		t.Fatalf("free queue has %d blocks (%d cached), counters say %d (%d)", free, cachedFree, c.pool.numFree, c.pool.numCachedFree)
	}
	hashed := 0
	for id := range c.pool.blocks {
		b := &c.pool.blocks[id]
		if b.refs != refs[id] {
			t.Fatalf("block %d: refs %d, requests hold %d", id, b.refs, refs[id])
		}
		if b.refs == 0 && !b.inFree {
			t.Fatalf("block %d unused but not in the free queue", id)
		}
		if b.hashed {
			hashed++
			if got := c.pool.byHash[b.hash]; got != int32(id) {
				t.Fatalf("block %d hash %x maps to block %d", id, b.hash, got)
			}
		}
	}
	if hashed != len(c.pool.byHash) {
		t.Fatalf("%d hashed blocks, %d in the table", hashed, len(c.pool.byHash))
	}
}

// fakeSink rebuilds the sets of cached hashes from events, as a router
// would: cached for the GPU, cpu for the host-RAM tier.
type fakeSink struct {
	t       testing.TB
	cached  map[uint64]bool
	cpu     map[uint64]bool
	disk    map[uint64]bool
	seen    map[uint64]bool // every hash a GPU BlockStored named
	batches int
	events  []kvevents.Event // copies, for inspection
	lastAt  time.Duration
}

func newFakeSink(t testing.TB) *fakeSink {
	return &fakeSink{t: t, cached: make(map[uint64]bool), cpu: make(map[uint64]bool), disk: make(map[uint64]bool), seen: make(map[uint64]bool)}
}

// set returns the sink's hash set for a medium.
func (s *fakeSink) set(medium kvevents.Medium) map[uint64]bool {
	switch medium {
	case kvevents.MediumGPU:
		return s.cached
	case kvevents.MediumCPU:
		return s.cpu
	case kvevents.MediumDisk:
		return s.disk
	}
	s.t.Errorf("event with medium %v", medium)
	return map[uint64]bool{}
}

func (s *fakeSink) PublishKVEvents(now time.Duration, events []kvevents.Event) {
	if now < s.lastAt {
		s.t.Errorf("events at %v after events at %v", now, s.lastAt)
	}
	s.lastAt = now
	s.batches++
	for _, e := range events {
		cp := e
		cp.BlockHashes = append([]uint64(nil), e.BlockHashes...)
		cp.TokenIDs = append([]uint32(nil), e.TokenIDs...)
		s.events = append(s.events, cp)
		switch e.Kind {
		case kvevents.BlockStored:
			if len(e.TokenIDs) != len(e.BlockHashes)*e.BlockSize {
				s.t.Errorf("BlockStored with %d hashes carries %d tokens", len(e.BlockHashes), len(e.TokenIDs))
			}
			if e.Medium != kvevents.MediumGPU {
				// vLLM's offloading events: the blocks of one store, no
				// tokens, no parent, block size 0; only an engine hash
				// seen in a GPU BlockStored can be mapped.
				if len(e.BlockHashes) == 0 || len(e.TokenIDs) != 0 || e.BlockSize != 0 || e.HasParent {
					s.t.Errorf("%s BlockStored %+v, want hashes, no tokens, block size 0, no parent", e.Medium, e)
				}
				for _, h := range e.BlockHashes {
					if !s.seen[h] {
						s.t.Errorf("%s BlockStored for hash %x never stored on the GPU", e.Medium, h)
					}
				}
			}
			set := s.set(e.Medium)
			// A parent the sink does not know is legal: it may have been
			// evicted or cleared while its child was computed.
			for _, h := range e.BlockHashes {
				if set[h] {
					s.t.Errorf("%s BlockStored for hash %x already stored", e.Medium, h)
				}
				set[h] = true
				if e.Medium == kvevents.MediumGPU {
					s.seen[h] = true
				}
			}
		case kvevents.BlockRemoved:
			set := s.set(e.Medium)
			for _, h := range e.BlockHashes {
				if !set[h] {
					s.t.Errorf("%s BlockRemoved for unknown hash %x", e.Medium, h)
				}
				delete(set, h)
			}
		case kvevents.AllBlocksCleared:
			clear(s.cached)
			clear(s.cpu)
		}
	}
}

func (s *fakeSink) count(typ kvevents.Kind) int {
	n := 0
	for _, e := range s.events {
		if e.Kind == typ {
			n++
		}
	}
	return n
}

// countMedium counts the events of a type and medium.
func (s *fakeSink) countMedium(typ kvevents.Kind, medium kvevents.Medium) int {
	n := 0
	for _, e := range s.events {
		if e.Kind == typ && e.Medium == medium {
			n++
		}
	}
	return n
}

// countBlocks counts the blocks that events of a kind and medium name.
func (s *fakeSink) countBlocks(typ kvevents.Kind, medium kvevents.Medium) int {
	n := 0
	for _, e := range s.events {
		if e.Kind == typ && e.Medium == medium {
			n += len(e.BlockHashes)
		}
	}
	return n
}

func randomPrompt(rng *rand.Rand, prefixes [][]uint32, maxTail int) []uint32 {
	p := prefixes[rng.IntN(len(prefixes))]
	n := rng.IntN(len(p) + 1)
	tail := make([]uint32, 1+rng.IntN(maxTail))
	for i := range tail {
		tail[i] = uint32(rng.IntN(50_000))
	}
	return concat(p[:n], tail)
}
