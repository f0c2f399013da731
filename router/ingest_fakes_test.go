package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/tokenizer"
)

// fakeIndex is a brute-force model of the block index: a set of sequence
// hashes per worker and tier.
type fakeIndex struct {
	mu      sync.Mutex
	held    map[WorkerID]map[kvbm.Tier]map[tokenizer.SeqHash]bool
	clears  int
	changed chan struct{} // receives after every change, if nobody has yet
}

var _ blockIndex = (*fakeIndex)(nil)

func newFakeIndex() *fakeIndex {
	return &fakeIndex{
		held:    map[WorkerID]map[kvbm.Tier]map[tokenizer.SeqHash]bool{},
		changed: make(chan struct{}, 1),
	}
}

func (f *fakeIndex) notify() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *fakeIndex) tier(w WorkerID, t kvbm.Tier) map[tokenizer.SeqHash]bool {
	if f.held[w] == nil {
		f.held[w] = map[kvbm.Tier]map[tokenizer.SeqHash]bool{}
	}
	if f.held[w][t] == nil {
		f.held[w][t] = map[tokenizer.SeqHash]bool{}
	}
	return f.held[w][t]
}

func (f *fakeIndex) Store(w WorkerID, t kvbm.Tier, hashes []tokenizer.SeqHash) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.tier(w, t)
	for _, h := range hashes {
		m[h] = true
	}
	f.notify()
}

func (f *fakeIndex) Remove(w WorkerID, t kvbm.Tier, hashes []tokenizer.SeqHash) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.tier(w, t)
	for _, h := range hashes {
		delete(m, h)
	}
	f.notify()
}

func (f *fakeIndex) ClearWorker(w WorkerID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.held, w)
	f.clears++
	f.notify()
}

// view returns the sorted hashes worker w holds in tier t.
func (f *fakeIndex) view(w WorkerID, t kvbm.Tier) []tokenizer.SeqHash {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.held[w][t]))
}

// waitFor waits until cond holds, re-checking after every change of the
// index; it fails the test if that takes longer than a generous limit.
func (f *fakeIndex) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	limit := time.After(20 * time.Second)
	for !cond() {
		select {
		case <-f.changed:
		case <-limit:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// testEvent describes one event for encodeBatch.
type testEvent struct {
	kind      kvEventKind
	hashes    []uint64
	parent    *uint64
	tokens    []uint32
	blockSize int
	medium    string // "" encodes nil
	lora      string
	groupIdx  int
	extraKeys [][]byte // msgpack of each block's extra keys, map form only
	arrayForm bool     // positional encoding instead of a map
}

// encodeBatch encodes a batch the way vLLM does, for tests of the ingest
// logic (the decoder itself is tested against hand-written vectors).
func encodeBatch(t testing.TB, ts float64, events ...testEvent) []byte {
	t.Helper()
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	optStr := func(s string) {
		if s == "" {
			must(e.EncodeNil())
		} else {
			must(e.EncodeString(s))
		}
	}
	must(e.EncodeArrayLen(3))
	must(e.EncodeFloat64(ts))
	must(e.EncodeArrayLen(len(events)))
	for _, ev := range events {
		hashes := func() {
			must(e.EncodeArrayLen(len(ev.hashes)))
			for _, h := range ev.hashes {
				must(e.EncodeUint(h))
			}
		}
		parent := func() {
			if ev.parent == nil {
				must(e.EncodeNil())
			} else {
				must(e.EncodeUint(*ev.parent))
			}
		}
		tokens := func() {
			must(e.EncodeArrayLen(len(ev.tokens)))
			for _, tok := range ev.tokens {
				must(e.EncodeUint(uint64(tok)))
			}
		}
		switch {
		case ev.kind == kvBlockStored && ev.arrayForm:
			must(e.EncodeArrayLen(10))
			must(e.EncodeString("BlockStored"))
			hashes()
			parent()
			tokens()
			must(e.EncodeInt(int64(ev.blockSize)))
			must(e.EncodeNil())
			optStr(ev.medium)
			optStr(ev.lora)
			must(e.EncodeNil())
			must(e.EncodeInt(int64(ev.groupIdx)))
		case ev.kind == kvBlockStored:
			if ev.extraKeys != nil {
				must(e.EncodeMapLen(10))
				must(e.EncodeString("extra_keys"))
				must(e.EncodeArrayLen(len(ev.extraKeys)))
				for _, raw := range ev.extraKeys {
					must(e.Encode(msgpack.RawMessage(raw)))
				}
			} else {
				must(e.EncodeMapLen(9))
			}
			must(e.EncodeString("type"))
			must(e.EncodeString("BlockStored"))
			must(e.EncodeString("block_hashes"))
			hashes()
			must(e.EncodeString("parent_block_hash"))
			parent()
			must(e.EncodeString("token_ids"))
			tokens()
			must(e.EncodeString("block_size"))
			must(e.EncodeInt(int64(ev.blockSize)))
			must(e.EncodeString("lora_id"))
			must(e.EncodeNil())
			must(e.EncodeString("medium"))
			optStr(ev.medium)
			must(e.EncodeString("lora_name"))
			optStr(ev.lora)
			must(e.EncodeString("group_idx"))
			must(e.EncodeInt(int64(ev.groupIdx)))
		case ev.kind == kvBlockRemoved && ev.arrayForm:
			must(e.EncodeArrayLen(4))
			must(e.EncodeString("BlockRemoved"))
			hashes()
			optStr(ev.medium)
			must(e.EncodeInt(int64(ev.groupIdx)))
		case ev.kind == kvBlockRemoved:
			must(e.EncodeMapLen(4))
			must(e.EncodeString("type"))
			must(e.EncodeString("BlockRemoved"))
			must(e.EncodeString("block_hashes"))
			hashes()
			must(e.EncodeString("medium"))
			optStr(ev.medium)
			must(e.EncodeString("group_idx"))
			must(e.EncodeInt(int64(ev.groupIdx)))
		case ev.kind == kvAllBlocksCleared:
			must(e.EncodeMapLen(1))
			must(e.EncodeString("type"))
			must(e.EncodeString("AllBlocksCleared"))
		default:
			t.Fatalf("cannot encode event kind %v", ev.kind)
		}
	}
	must(e.EncodeNil())
	return buf.Bytes()
}

// engineHashOf is the fake engine's own id for a block: any function of the
// block's identity that differs from the router's hash will do.
func engineHashOf(s tokenizer.SeqHash, lora string) uint64 {
	return bits.RotateLeft64(uint64(s), 17) ^ 0x5eed ^ uint64(len(lora))
}

// seqHashes returns the router's sequence hashes of every full block of
// tokens, hashed in one go from the start of the sequence: the independent
// reference the ingester's event-by-event chaining must agree with.
func seqHashes(tokens []uint32, lora string) []tokenizer.SeqHash {
	return tokenizer.NewHasher(lora).AppendBlockHashes(nil, nil, tokens, tokenizer.DefaultBlockSize)
}

// tokenRun returns n tokens starting at first, first+1, ...
func tokenRun(first uint32, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = first + uint32(i)
	}
	return out
}

type fakeBatch struct {
	seq     uint64
	payload []byte
}

// fakeEngine plays one engine process: it publishes batches with sequence
// numbers from 0, keeps a bounded replay buffer, and knows which blocks it
// holds, by the router's hashes, as the expected view.
type fakeEngine struct {
	t         testing.TB
	epoch     float64 // start time of this process; batch ts derive from it
	seq       uint64
	bufferCap int
	buffer    []fakeBatch
	held      map[kvbm.Tier]map[tokenizer.SeqHash]bool
}

func newFakeEngine(t testing.TB, epoch float64, bufferCap int) *fakeEngine {
	return &fakeEngine{t: t, epoch: epoch, bufferCap: bufferCap, held: map[kvbm.Tier]map[tokenizer.SeqHash]bool{}}
}

// publish makes the next batch of events and returns it; it also enters
// the replay buffer.
func (e *fakeEngine) publish(events ...testEvent) fakeBatch {
	b := fakeBatch{seq: e.seq, payload: encodeBatch(e.t, e.epoch+float64(e.seq)/8, events...)}
	e.seq++
	e.buffer = append(e.buffer, b)
	if len(e.buffer) > e.bufferCap {
		e.buffer = e.buffer[1:]
	}
	return b
}

func (e *fakeEngine) heldIn(t kvbm.Tier) map[tokenizer.SeqHash]bool {
	if e.held == nil {
		e.held = map[kvbm.Tier]map[tokenizer.SeqHash]bool{}
	}
	if e.held[t] == nil {
		e.held[t] = map[tokenizer.SeqHash]bool{}
	}
	return e.held[t]
}

// store returns a BlockStored for blocks [from, to) of a sequence of tokens
// on the GPU, the way vLLM reports a request's newly computed blocks.
func (e *fakeEngine) store(tokens []uint32, from, to int, lora string) testEvent {
	all := seqHashes(tokens, lora)
	ev := testEvent{kind: kvBlockStored, blockSize: tokenizer.DefaultBlockSize, medium: "GPU", lora: lora}
	if from > 0 {
		p := engineHashOf(all[from-1], lora)
		ev.parent = &p
	}
	for i := from; i < to; i++ {
		ev.hashes = append(ev.hashes, engineHashOf(all[i], lora))
		e.heldIn(kvbm.TierGPU)[all[i]] = true
	}
	ev.tokens = tokens[from*tokenizer.DefaultBlockSize : to*tokenizer.DefaultBlockSize]
	return ev
}

// offload returns a BlockStored of blocks [from, to) copied to host memory,
// which carries engine hashes only.
func (e *fakeEngine) offload(tokens []uint32, from, to int) testEvent {
	all := seqHashes(tokens, "")
	ev := testEvent{kind: kvBlockStored, medium: "CPU"}
	for i := from; i < to; i++ {
		ev.hashes = append(ev.hashes, engineHashOf(all[i], ""))
		e.heldIn(kvbm.TierRAM)[all[i]] = true
	}
	return ev
}

// remove returns a BlockRemoved of blocks [from, to) in a tier.
func (e *fakeEngine) remove(tokens []uint32, from, to int, tier kvbm.Tier) testEvent {
	all := seqHashes(tokens, "")
	medium := map[kvbm.Tier]string{kvbm.TierGPU: "GPU", kvbm.TierRAM: "CPU"}[tier]
	ev := testEvent{kind: kvBlockRemoved, medium: medium}
	for i := from; i < to; i++ {
		ev.hashes = append(ev.hashes, engineHashOf(all[i], ""))
		delete(e.heldIn(tier), all[i])
	}
	return ev
}

func (e *fakeEngine) clearAll() testEvent {
	e.held = map[kvbm.Tier]map[tokenizer.SeqHash]bool{}
	return testEvent{kind: kvAllBlocksCleared}
}

func (e *fakeEngine) want(t kvbm.Tier) []tokenizer.SeqHash {
	return slices.Sorted(maps.Keys(e.held[t]))
}

// fakeReplay serves replays from whichever fake engine is current.
type fakeReplay struct {
	engine *fakeEngine
	err    error // returned after serving nothing, when set
	froms  []uint64
}

func (r *fakeReplay) Replay(ctx context.Context, from uint64, fn func(uint64, []byte)) error {
	r.froms = append(r.froms, from)
	if r.err != nil {
		return r.err
	}
	for _, b := range r.engine.buffer {
		if err := ctx.Err(); err != nil {
			return err
		}
		if b.seq >= from {
			fn(b.seq, b.payload)
		}
	}
	return nil
}

var errFakeReplay = errors.New("replay endpoint unreachable")

// checkView fails the test unless the index holds exactly what the engine
// holds, in both tiers.
func checkView(t *testing.T, idx *fakeIndex, w WorkerID, e *fakeEngine) {
	t.Helper()
	for _, tier := range []kvbm.Tier{kvbm.TierGPU, kvbm.TierRAM} {
		got, want := idx.view(w, tier), e.want(tier)
		if !slices.Equal(got, want) {
			t.Errorf("%v tier: index holds %d blocks, engine %d\n got %v\nwant %v", tier, len(got), len(want), fmtHashes(got), fmtHashes(want))
		}
	}
}

func fmtHashes(hs []tokenizer.SeqHash) string {
	if len(hs) > 8 {
		return fmt.Sprintf("%x … (%d)", hs[:8], len(hs))
	}
	return fmt.Sprintf("%x", hs)
}
