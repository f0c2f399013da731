package ingest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/kvevents"
	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/tokenizer"
)

// fakeIndex is a brute-force model of the block index: a set of sequence
// hashes per worker and tier.
type fakeIndex struct {
	mu      sync.Mutex
	held    map[router.WorkerID]map[kvtier.Tier]map[tokenizer.SeqHash]bool
	clears  int
	changed chan struct{} // receives after every change, if nobody has yet
}

var _ BlockIndex = (*fakeIndex)(nil)

func newFakeIndex() *fakeIndex {
	return &fakeIndex{
		held:    map[router.WorkerID]map[kvtier.Tier]map[tokenizer.SeqHash]bool{},
		changed: make(chan struct{}, 1),
	}
}

func (f *fakeIndex) notify() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *fakeIndex) tier(w router.WorkerID, t kvtier.Tier) map[tokenizer.SeqHash]bool {
	if f.held[w] == nil {
		f.held[w] = map[kvtier.Tier]map[tokenizer.SeqHash]bool{}
	}
	if f.held[w][t] == nil {
		f.held[w][t] = map[tokenizer.SeqHash]bool{}
	}
	return f.held[w][t]
}

func (f *fakeIndex) Store(w router.WorkerID, t kvtier.Tier, hashes []tokenizer.SeqHash) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.tier(w, t)
	for _, h := range hashes {
		m[h] = true
	}
	f.notify()
}

func (f *fakeIndex) Remove(w router.WorkerID, t kvtier.Tier, hashes []tokenizer.SeqHash) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.tier(w, t)
	for _, h := range hashes {
		delete(m, h)
	}
	f.notify()
}

func (f *fakeIndex) ClearWorker(w router.WorkerID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.held, w)
	f.clears++
	f.notify()
}

func (f *fakeIndex) ClearWorkerTier(w router.WorkerID, t kvtier.Tier) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.held[w], t)
	f.clears++
	f.notify()
}

// view returns the sorted hashes worker w holds in tier t.
func (f *fakeIndex) view(w router.WorkerID, t kvtier.Tier) []tokenizer.SeqHash {
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

// encodeBatch encodes events as one engine batch in vLLM's current format.
func encodeBatch(ts float64, events ...kvevents.Event) []byte {
	return encodeBatchAs(kvevents.FormatMap, ts, events...)
}

func encodeBatchAs(f kvevents.Format, ts float64, events ...kvevents.Event) []byte {
	return kvevents.AppendBatch(nil, &kvevents.Batch{TS: ts, Events: events}, f)
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
	epoch     float64 // start time of this process; batch ts derive from it
	format    kvevents.Format
	seq       uint64
	bufferCap int
	buffer    []fakeBatch
	held      map[kvtier.Tier]map[tokenizer.SeqHash]bool
}

func newFakeEngine(epoch float64, bufferCap int) *fakeEngine {
	return &fakeEngine{epoch: epoch, bufferCap: bufferCap, held: map[kvtier.Tier]map[tokenizer.SeqHash]bool{}}
}

// publish makes the next batch of events and returns it; it also enters
// the replay buffer.
func (e *fakeEngine) publish(events ...kvevents.Event) fakeBatch {
	b := fakeBatch{seq: e.seq, payload: encodeBatchAs(e.format, e.epoch+float64(e.seq)/8, events...)}
	e.seq++
	e.buffer = append(e.buffer, b)
	if len(e.buffer) > e.bufferCap {
		e.buffer = e.buffer[1:]
	}
	return b
}

func (e *fakeEngine) heldIn(t kvtier.Tier) map[tokenizer.SeqHash]bool {
	if e.held == nil {
		e.held = map[kvtier.Tier]map[tokenizer.SeqHash]bool{}
	}
	if e.held[t] == nil {
		e.held[t] = map[tokenizer.SeqHash]bool{}
	}
	return e.held[t]
}

// store returns a BlockStored for blocks [from, to) of a sequence of tokens
// on the GPU, the way vLLM reports a request's newly computed blocks.
func (e *fakeEngine) store(tokens []uint32, from, to int, lora string) kvevents.Event {
	all := seqHashes(tokens, lora)
	ev := kvevents.Event{Kind: kvevents.BlockStored, BlockSize: tokenizer.DefaultBlockSize, Medium: kvevents.MediumGPU, LoRAName: []byte(lora)}
	if from > 0 {
		ev.ParentBlockHash, ev.HasParent = engineHashOf(all[from-1], lora), true
	}
	for i := from; i < to; i++ {
		ev.BlockHashes = append(ev.BlockHashes, engineHashOf(all[i], lora))
		e.heldIn(kvtier.GPU)[all[i]] = true
	}
	ev.TokenIDs = tokens[from*tokenizer.DefaultBlockSize : to*tokenizer.DefaultBlockSize]
	return ev
}

// offload returns a BlockStored of blocks [from, to) copied to host memory,
// which carries engine hashes only.
func (e *fakeEngine) offload(tokens []uint32, from, to int) kvevents.Event {
	all := seqHashes(tokens, "")
	ev := kvevents.Event{Kind: kvevents.BlockStored, Medium: kvevents.MediumCPU}
	for i := from; i < to; i++ {
		ev.BlockHashes = append(ev.BlockHashes, engineHashOf(all[i], ""))
		e.heldIn(kvtier.RAM)[all[i]] = true
	}
	return ev
}

// remove returns a BlockRemoved of blocks [from, to) in a tier.
func (e *fakeEngine) remove(tokens []uint32, from, to int, tier kvtier.Tier) kvevents.Event {
	all := seqHashes(tokens, "")
	medium := map[kvtier.Tier]kvevents.Medium{kvtier.GPU: kvevents.MediumGPU, kvtier.RAM: kvevents.MediumCPU}[tier]
	ev := kvevents.Event{Kind: kvevents.BlockRemoved, Medium: medium}
	for i := from; i < to; i++ {
		ev.BlockHashes = append(ev.BlockHashes, engineHashOf(all[i], ""))
		delete(e.heldIn(tier), all[i])
	}
	return ev
}

// clearAll is vLLM's AllBlocksCleared: its GPU cache is reset, what it
// offloaded stays.
func (e *fakeEngine) clearAll() kvevents.Event {
	delete(e.held, kvtier.GPU)
	return kvevents.Event{Kind: kvevents.AllBlocksCleared}
}

func (e *fakeEngine) want(t kvtier.Tier) []tokenizer.SeqHash {
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
func checkView(t *testing.T, idx *fakeIndex, w router.WorkerID, e *fakeEngine) {
	t.Helper()
	for _, tier := range []kvtier.Tier{kvtier.GPU, kvtier.RAM} {
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
