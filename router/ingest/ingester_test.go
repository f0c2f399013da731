package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"log/slog"
	"slices"
	"testing"

	"github.com/hearth-llm/hearth/kvevents"
	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/tokenizer"

	"github.com/vmihailenco/msgpack/v5"
)

const testWorker router.WorkerID = 3

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func newTestIngester(t *testing.T, idx *fakeIndex, src ReplaySource) *Ingester {
	t.Helper()
	return NewIngester(IngesterConfig{WorkerID: testWorker, Logger: testLogger(t)}, idx, src)
}

// live feeds batches to the ingester as if they arrived on the live stream.
func live(t *testing.T, in *Ingester, batches ...fakeBatch) {
	t.Helper()
	for _, b := range batches {
		if err := in.HandleLive(t.Context(), b.seq, b.payload); err != nil {
			t.Fatalf("HandleLive(%d): %v", b.seq, err)
		}
	}
}

func TestIngestEvents(t *testing.T) {
	a := tokenRun(1000, 5*16+3) // 5 full blocks and a partial one
	b := append(slices.Clone(a[:2*16]), tokenRun(9000, 2*16)...)
	lora := tokenRun(1000, 2*16)

	tests := []struct {
		name  string
		steps func(e *fakeEngine) []kvevents.Event
		check func(t *testing.T, s Stats)
	}{
		{
			name: "a chain stored in two events",
			steps: func(e *fakeEngine) []kvevents.Event {
				return []kvevents.Event{e.store(a, 0, 3, ""), e.store(a, 3, 5, "")}
			},
			check: func(t *testing.T, s Stats) {
				if s.BlocksStored != 5 || s.MappedBlocks != 5 {
					t.Errorf("stored %d, mapped %d; want 5, 5", s.BlocksStored, s.MappedBlocks)
				}
			},
		},
		{
			name: "positional events",
			steps: func(e *fakeEngine) []kvevents.Event {
				e.format = kvevents.FormatArray
				return []kvevents.Event{e.store(a, 0, 2, ""), e.store(a, 2, 4, ""), e.remove(a, 3, 4, kvtier.GPU)}
			},
		},
		{
			name: "a branch chains from the shared prefix",
			steps: func(e *fakeEngine) []kvevents.Event {
				return []kvevents.Event{e.store(a, 0, 4, ""), e.store(b, 2, 4, "")}
			},
		},
		{
			name: "a LoRA adapter hashes in its own space",
			steps: func(e *fakeEngine) []kvevents.Event {
				return []kvevents.Event{e.store(lora, 0, 2, "my-lora"), e.store(lora, 0, 2, "")}
			},
			check: func(t *testing.T, s Stats) {
				if s.BlocksStored != 4 {
					t.Errorf("stored %d blocks, want 4", s.BlocksStored)
				}
			},
		},
		{
			name: "offloaded copies map through engine hashes",
			steps: func(e *fakeEngine) []kvevents.Event {
				return []kvevents.Event{e.store(a, 0, 4, ""), e.offload(a, 0, 3), e.remove(a, 0, 2, kvtier.GPU)}
			},
			check: func(t *testing.T, s Stats) {
				// Blocks 0 and 1 live on in RAM, so their mappings stay.
				if s.MappedBlocks != 4 || s.BlocksRemoved != 2 {
					t.Errorf("mapped %d, removed %d; want 4, 2", s.MappedBlocks, s.BlocksRemoved)
				}
			},
		},
		{
			name: "a block removed from every tier leaves the mapping",
			steps: func(e *fakeEngine) []kvevents.Event {
				return []kvevents.Event{
					e.store(a, 0, 3, ""), e.offload(a, 0, 1),
					e.remove(a, 0, 1, kvtier.RAM), e.remove(a, 0, 1, kvtier.GPU), e.remove(a, 2, 3, kvtier.GPU),
				}
			},
			check: func(t *testing.T, s Stats) {
				if s.MappedBlocks != 1 {
					t.Errorf("mapped %d, want 1", s.MappedBlocks)
				}
			},
		},
		{
			name: "removing what a tier does not hold changes nothing",
			steps: func(e *fakeEngine) []kvevents.Event {
				ev := e.store(a, 0, 2, "")
				rm := e.remove(a, 0, 1, kvtier.RAM)
				return []kvevents.Event{ev, rm}
			},
			check: func(t *testing.T, s Stats) {
				if s.UnknownRemove != 1 || s.BlocksRemoved != 0 {
					t.Errorf("unknown removes %d, removed %d; want 1, 0", s.UnknownRemove, s.BlocksRemoved)
				}
			},
		},
		{
			name: "all blocks cleared",
			steps: func(e *fakeEngine) []kvevents.Event {
				return []kvevents.Event{e.store(a, 0, 3, ""), e.offload(a, 0, 1), e.clearAll(), e.store(b, 0, 1, "")}
			},
			check: func(t *testing.T, s Stats) {
				if s.MappedBlocks != 1 {
					t.Errorf("mapped %d, want 1", s.MappedBlocks)
				}
			},
		},
		{
			name: "unknown parent: the blocks are orphans, not guessed",
			steps: func(e *fakeEngine) []kvevents.Event {
				orphan := e.store(a, 2, 4, "")
				// The engine holds them, but the view cannot know their
				// hashes; the expected view leaves them out.
				all := seqHashes(a, "")
				delete(e.heldIn(kvtier.GPU), all[2])
				delete(e.heldIn(kvtier.GPU), all[3])
				return []kvevents.Event{orphan}
			},
			check: func(t *testing.T, s Stats) {
				if s.Orphans != 2 || s.BlocksStored != 0 {
					t.Errorf("orphans %d, stored %d; want 2, 0", s.Orphans, s.BlocksStored)
				}
			},
		},
		{
			name: "offload of unknown blocks is an orphan",
			steps: func(e *fakeEngine) []kvevents.Event {
				ev := e.offload(a, 0, 2)
				e.held = nil
				return []kvevents.Event{ev}
			},
			check: func(t *testing.T, s Stats) {
				if s.Orphans != 2 {
					t.Errorf("orphans %d, want 2", s.Orphans)
				}
			},
		},
		{
			name: "events ingest cannot use are skipped",
			steps: func(e *fakeEngine) []kvevents.Event {
				tape := kvevents.Event{Kind: kvevents.BlockStored, BlockHashes: []uint64{1}, TokenIDs: a[:16], BlockSize: 16, Medium: kvevents.MediumUnknown}
				group := kvevents.Event{Kind: kvevents.BlockStored, BlockHashes: []uint64{2}, TokenIDs: a[:16], BlockSize: 16, GroupIdx: 1}
				big := kvevents.Event{Kind: kvevents.BlockStored, BlockHashes: []uint64{3}, TokenIDs: a[:32], BlockSize: 32}
				return []kvevents.Event{tape, group, big}
			},
			check: func(t *testing.T, s Stats) {
				if s.Skipped != 3 || s.MappedBlocks != 0 {
					t.Errorf("skipped %d, mapped %d; want 3, 0", s.Skipped, s.MappedBlocks)
				}
			},
		},
		{
			name: "token count that does not fill the blocks is malformed",
			steps: func(e *fakeEngine) []kvevents.Event {
				return []kvevents.Event{{Kind: kvevents.BlockStored, BlockHashes: []uint64{1, 2}, TokenIDs: a[:20], BlockSize: 16}}
			},
			check: func(t *testing.T, s Stats) {
				if s.Malformed != 1 {
					t.Errorf("malformed %d, want 1", s.Malformed)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx := newFakeIndex()
			e := newFakeEngine(100, 1000)
			in := newTestIngester(t, idx, nil)
			// One event per batch, so a rejected event cannot hide others.
			for _, ev := range tc.steps(e) {
				live(t, in, e.publish(ev))
			}
			checkView(t, idx, testWorker, e)
			if tc.check != nil {
				tc.check(t, in.Stats())
			}
		})
	}
}

func TestIngestMatchesRequestHashes(t *testing.T) {
	// The point of re-hashing: a request for the same tokens must find the
	// blocks, whatever the engine calls them.
	idx := newFakeIndex()
	e := newFakeEngine(1, 10)
	in := newTestIngester(t, idx, nil)
	prompt := tokenRun(7, 3*16)
	live(t, in, e.publish(e.store(prompt, 0, 1, ""), e.store(prompt, 1, 3, "")))
	want := tokenizer.BlockHashes(prompt, 16)
	slices.Sort(want)
	if got := idx.view(testWorker, kvtier.GPU); !slices.Equal(got, want) {
		t.Errorf("index holds %x, request hashes %x", got, want)
	}
}

func TestIngestExtraKeys(t *testing.T) {
	toks := tokenRun(500, 3*16)
	loraKey := []byte("\x91\xa7my-lora") // ["my-lora"]
	mmKey := []byte("\x91\xa4abcd")      // ["abcd"], a multimodal input's hash
	nilKey := []byte{0xc0}
	tests := []struct {
		name      string
		lora      string
		extra     [][]byte
		plain     int // leading blocks whose hash is the plain token hash
		stored    int
		malformed uint64
	}{
		{name: "LoRA name only hashes like the request", lora: "my-lora", extra: [][]byte{loraKey, loraKey, loraKey}, plain: 3, stored: 3},
		{name: "nil keys change nothing", extra: [][]byte{nilKey, nilKey, nilKey}, plain: 3, stored: 3},
		{name: "an image in block 1 sets it and its children apart", extra: [][]byte{nilKey, mmKey, nilKey}, plain: 1, stored: 3},
		{name: "keys that do not match the blocks", extra: [][]byte{nilKey}, malformed: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx := newFakeIndex()
			e := newFakeEngine(1, 10)
			in := newTestIngester(t, idx, nil)
			ev := e.store(toks, 0, 3, tc.lora)
			ev.ExtraKeys = tc.extra
			live(t, in, e.publish(ev))

			got := idx.view(testWorker, kvtier.GPU)
			if len(got) != tc.stored {
				t.Fatalf("index holds %d blocks, want %d", len(got), tc.stored)
			}
			for i, s := range seqHashes(toks, tc.lora) {
				if _, found := slices.BinarySearch(got, s); found != (i < tc.plain) {
					t.Errorf("block %d: plain hash indexed %v, want %v", i, found, i < tc.plain)
				}
			}
			if s := in.Stats(); s.Malformed != tc.malformed {
				t.Errorf("malformed %d, want %d", s.Malformed, tc.malformed)
			}
		})
	}
}

func TestIngestMalformedBatchIsSkipped(t *testing.T) {
	idx := newFakeIndex()
	e := newFakeEngine(1, 10)
	in := newTestIngester(t, idx, nil)
	a := tokenRun(1, 32)
	live(t, in, e.publish(e.store(a, 0, 1, "")))
	live(t, in, fakeBatch{seq: 1, payload: []byte{0x92, 0xc1}})
	e.seq++ // the engine's batch 1 was the garbage above
	live(t, in, e.publish(e.store(a, 1, 2, "")))
	checkView(t, idx, testWorker, e)
	if s := in.Stats(); s.Malformed != 1 || s.Gaps != 0 || s.ViewResets != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestIngestRecovery(t *testing.T) {
	seqA := tokenRun(1, 40*16)
	seqB := tokenRun(50000, 40*16)
	// Each batch stores the next block of A, so a lost batch without
	// recovery leaves every later block of A an orphan.
	storeA := func(e *fakeEngine, i int) fakeBatch { return e.publish(e.store(seqA, i, i+1, "")) }

	tests := []struct {
		name string
		run  func(t *testing.T, idx *fakeIndex, in *Ingester, src *fakeReplay) *fakeEngine
		want Stats // the counters checked; zero fields must be zero
	}{
		{
			name: "gap recovered by replay",
			run: func(t *testing.T, idx *fakeIndex, in *Ingester, src *fakeReplay) *fakeEngine {
				e := newFakeEngine(10, 100)
				src.engine = e
				var bs []fakeBatch
				for i := range 10 {
					bs = append(bs, storeA(e, i))
				}
				live(t, in, bs[0], bs[1], bs[2], bs[3])
				live(t, in, bs[7], bs[8], bs[9]) // 4..6 lost
				if !slices.Equal(src.froms, []uint64{4}) {
					t.Errorf("replays from %v, want [4]", src.froms)
				}
				return e
			},
			// live 7 arrives, replay brings 4..9 (all buffered), so live 8
			// and 9 are duplicates too.
			want: Stats{Gaps: 1, Replays: 1, ReplayBatches: 6, Duplicates: 3, Batches: 10},
		},
		{
			name: "gap beyond the replay buffer resets the view",
			run: func(t *testing.T, idx *fakeIndex, in *Ingester, src *fakeReplay) *fakeEngine {
				e := newFakeEngine(10, 3)
				src.engine = e
				live(t, in, storeA(e, 0), storeA(e, 1))
				for i := 2; i < 6; i++ {
					storeA(e, i) // lost; the buffer keeps only 3..5
				}
				b6 := e.publish(e.store(seqB, 0, 2, ""))
				live(t, in, b6)
				// A's blocks are gone from the view: 4 and 5, all the
				// buffer still had, are orphans, and 0 and 1 were dropped
				// with everything else. B, stored after the loss, is known.
				e.held = nil
				e.heldIn(kvtier.GPU)
				for _, s := range seqHashes(seqB, "")[:2] {
					e.held[kvtier.GPU][s] = true
				}
				return e
			},
			want: Stats{Gaps: 1, Replays: 1, ReplayBatches: 3, ViewResets: 1, Duplicates: 1, Orphans: 2, Batches: 5},
		},
		{
			name: "gap without a replay source resets the view",
			run: func(t *testing.T, idx *fakeIndex, in *Ingester, src *fakeReplay) *fakeEngine {
				e := newFakeEngine(10, 100)
				src.err = errFakeReplay
				live(t, in, storeA(e, 0))
				storeA(e, 1)
				b2 := e.publish(e.store(seqB, 0, 1, ""))
				live(t, in, b2)
				e.held = nil
				e.heldIn(kvtier.GPU)[seqHashes(seqB, "")[0]] = true
				return e
			},
			want: Stats{Gaps: 1, Replays: 1, ReplayErrors: 1, ViewResets: 1, Batches: 2},
		},
		{
			name: "sequence reset on the live stream: restart, clear, replay",
			run: func(t *testing.T, idx *fakeIndex, in *Ingester, src *fakeReplay) *fakeEngine {
				old := newFakeEngine(10, 100)
				src.engine = old
				for i := range 5 {
					live(t, in, storeA(old, i))
				}
				e := newFakeEngine(99, 100) // the new process
				src.engine = e
				e.publish(e.store(seqB, 0, 2, "")) // missed: we were not subscribed yet
				b1 := e.publish(e.store(seqB, 2, 3, ""))
				live(t, in, b1)
				live(t, in, e.publish(e.remove(seqB, 2, 3, kvtier.GPU)))
				return e
			},
			want: Stats{Restarts: 1, ViewResets: 1, Replays: 1, ReplayBatches: 2, Duplicates: 1, Batches: 8, BlocksRemoved: 1},
		},
		{
			name: "start-up replays blocks cached before the subscription",
			run: func(t *testing.T, idx *fakeIndex, in *Ingester, src *fakeReplay) *fakeEngine {
				e := newFakeEngine(10, 100)
				src.engine = e
				var bs []fakeBatch
				for i := range 4 {
					bs = append(bs, storeA(e, i))
				}
				if err := in.Sync(t.Context()); err != nil {
					t.Fatal(err)
				}
				checkView(t, idx, testWorker, e)
				live(t, in, bs[3], storeA(e, 4)) // 3 arrived live too, during the replay
				return e
			},
			want: Stats{Replays: 1, ReplayBatches: 4, Duplicates: 1, Batches: 5},
		},
		{
			name: "start-up with an empty buffer, then a gap from seq 0",
			run: func(t *testing.T, idx *fakeIndex, in *Ingester, src *fakeReplay) *fakeEngine {
				e := newFakeEngine(10, 100)
				src.engine = e
				if err := in.Sync(t.Context()); err != nil {
					t.Fatal(err)
				}
				storeA(e, 0) // published before the subscription took effect
				live(t, in, storeA(e, 1))
				return e
			},
			want: Stats{Gaps: 1, Replays: 2, ReplayBatches: 2, Duplicates: 1, Batches: 2},
		},
		{
			name: "reconnect to the same process replays only what was missed",
			run: func(t *testing.T, idx *fakeIndex, in *Ingester, src *fakeReplay) *fakeEngine {
				e := newFakeEngine(10, 100)
				src.engine = e
				for i := range 3 {
					live(t, in, storeA(e, i))
				}
				storeA(e, 3)
				storeA(e, 4) // while disconnected
				if err := in.Sync(t.Context()); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(src.froms, []uint64{2}) {
					t.Errorf("replays from %v, want [2]", src.froms)
				}
				live(t, in, storeA(e, 5))
				return e
			},
			want: Stats{Replays: 1, ReplayBatches: 3, Batches: 6},
		},
		{
			name: "reconnect to a restarted process with fewer batches",
			run: func(t *testing.T, idx *fakeIndex, in *Ingester, src *fakeReplay) *fakeEngine {
				old := newFakeEngine(10, 100)
				src.engine = old
				for i := range 5 {
					live(t, in, storeA(old, i))
				}
				e := newFakeEngine(50, 100)
				src.engine = e
				e.publish(e.store(seqB, 0, 1, ""))
				e.publish(e.store(seqB, 1, 2, ""))
				if err := in.Sync(t.Context()); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(src.froms, []uint64{4, 0}) {
					t.Errorf("replays from %v, want [4 0]", src.froms)
				}
				return e
			},
			want: Stats{Restarts: 1, ViewResets: 1, Replays: 2, ReplayBatches: 2, Batches: 7},
		},
		{
			name: "reconnect to a restarted process with more batches",
			run: func(t *testing.T, idx *fakeIndex, in *Ingester, src *fakeReplay) *fakeEngine {
				old := newFakeEngine(10, 100)
				src.engine = old
				for i := range 2 {
					live(t, in, storeA(old, i))
				}
				e := newFakeEngine(50, 100)
				src.engine = e
				for i := range 4 {
					e.publish(e.store(seqB, i, i+1, ""))
				}
				if err := in.Sync(t.Context()); err != nil {
					t.Fatal(err)
				}
				return e
			},
			// The replay from 1 returns 3 batches; the first has another ts.
			want: Stats{Restarts: 1, ViewResets: 1, Replays: 2, ReplayBatches: 7, Batches: 6},
		},
		{
			name: "reconnect without replay: an older first batch means a restart",
			run: func(t *testing.T, idx *fakeIndex, in *Ingester, src *fakeReplay) *fakeEngine {
				old := newFakeEngine(10, 100)
				src.err = errFakeReplay
				for i := range 4 {
					live(t, in, storeA(old, i))
				}
				if err := in.Sync(t.Context()); err != nil {
					t.Fatal(err)
				}
				e := newFakeEngine(50, 100)
				e.publish(e.store(seqB, 0, 1, "")) // missed
				live(t, in, e.publish(e.store(seqB, 1, 2, "")))
				// Block 1's parent was in the missed batch.
				e.held = nil
				return e
			},
			want: Stats{Restarts: 1, ViewResets: 1, Replays: 2, ReplayErrors: 2, Orphans: 1, Batches: 5},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx := newFakeIndex()
			src := &fakeReplay{}
			in := newTestIngester(t, idx, src)
			e := tc.run(t, idx, in, src)
			checkView(t, idx, testWorker, e)

			got := in.Stats()
			got = Stats{
				Gaps: got.Gaps, Restarts: got.Restarts, Replays: got.Replays, ReplayBatches: got.ReplayBatches,
				ReplayErrors: got.ReplayErrors, ViewResets: got.ViewResets, Duplicates: got.Duplicates,
				Orphans: got.Orphans, Batches: got.Batches, BlocksRemoved: got.BlocksRemoved,
			}
			if got != tc.want {
				t.Errorf("stats\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestIngestReplayStopsWithContext(t *testing.T) {
	idx := newFakeIndex()
	e := newFakeEngine(1, 100)
	src := &fakeReplay{engine: e}
	in := newTestIngester(t, idx, src)
	live(t, in, e.publish(e.store(tokenRun(1, 16), 0, 1, "")))
	e.publish()
	b2 := e.publish()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := in.HandleLive(ctx, b2.seq, b2.payload); !errors.Is(err, context.Canceled) {
		t.Errorf("HandleLive = %v, want context.Canceled", err)
	}
	if err := in.Sync(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Sync = %v, want context.Canceled", err)
	}
}

func TestIngestApplyAllocations(t *testing.T) {
	idx := &countingIndex{}
	in := NewIngester(IngesterConfig{WorkerID: 1, Logger: slog.New(slog.DiscardHandler)}, idx, nil)
	e := newFakeEngine(1, 1)
	toks := tokenRun(1, 8*16)
	payload := encodeBatch(1, e.store(toks, 0, 8, ""), e.store(toks, 0, 2, "lora-a"), e.remove(toks, 0, 8, kvtier.GPU))
	in.apply(0, payload) // grow buffers and the table once
	allocs := testing.AllocsPerRun(100, func() { in.apply(0, payload) })
	if allocs != 0 {
		t.Errorf("applying a batch allocates %v times, want 0", allocs)
	}
	if idx.stored == 0 || idx.removed == 0 {
		t.Errorf("index saw %d stores and %d removes", idx.stored, idx.removed)
	}
}

// countingIndex is the trivial index of the allocation test and benchmark.
type countingIndex struct{ stored, removed, clears int }

func (c *countingIndex) Store(_ router.WorkerID, _ kvtier.Tier, h []tokenizer.SeqHash) {
	c.stored += len(h)
}
func (c *countingIndex) Remove(_ router.WorkerID, _ kvtier.Tier, h []tokenizer.SeqHash) {
	c.removed += len(h)
}
func (c *countingIndex) ClearWorker(router.WorkerID)                  { c.clears++ }
func (c *countingIndex) ClearWorkerTier(router.WorkerID, kvtier.Tier) { c.clears++ }

// FuzzIngest feeds arbitrary payloads, with arbitrary sequence numbers, to
// an ingester: nothing may panic, and the mapping never holds more blocks
// than the index was told about.
func FuzzIngest(f *testing.F) {
	e := newFakeEngine(1, 10)
	toks := tokenRun(1, 4*16)
	f.Add(uint64(0), encodeBatch(1, e.store(toks, 0, 2, ""), e.offload(toks, 0, 1)), uint64(1), encodeBatch(2, e.store(toks, 2, 4, ""), e.remove(toks, 0, 1, kvtier.GPU)))
	lora := e.store(toks, 0, 2, "lora-a")
	lora.ExtraKeys = [][]byte{nil, []byte("\x91\xa4abcd")}
	f.Add(uint64(5), encodeBatchAs(kvevents.FormatArray, 3, lora, e.offload(toks, 0, 1)), uint64(2), encodeBatchAs(kvevents.FormatSGLang, 4, e.store(toks, 0, 4, ""), e.clearAll()))
	f.Fuzz(func(t *testing.T, seq1 uint64, p1 []byte, seq2 uint64, p2 []byte) {
		idx := newFakeIndex()
		e := newFakeEngine(1, 10)
		e.publish()
		in := NewIngester(IngesterConfig{WorkerID: 1, Logger: slog.New(slog.DiscardHandler)}, idx, &fakeReplay{engine: e})
		for _, m := range []struct {
			seq     uint64
			payload []byte
		}{{seq1, p1}, {seq2, p2}, {seq1, p2}} {
			if err := in.HandleLive(t.Context(), m.seq, m.payload); err != nil {
				t.Fatalf("HandleLive: %v", err)
			}
		}
		held := 0
		for _, tier := range []kvtier.Tier{kvtier.GPU, kvtier.RAM, kvtier.Disk} {
			held += len(idx.view(1, tier))
		}
		if s := in.Stats(); s.MappedBlocks > held && s.MappedBlocks > 0 {
			// A mapping entry without an indexed block can only come from
			// distinct engine hashes that chain to the same sequence hash.
			if s.MappedBlocks > int(s.BlocksStored) {
				t.Fatalf("mapped %d blocks, stored only %d", s.MappedBlocks, s.BlocksStored)
			}
		}
	})
}

// ingestSGLang applies one batch of SGLang events, given as plain values in
// its classes' field order and encoded with the msgpack library as msgspec
// encodes SGLang's EventBatch ([ts, events, attn_dp_rank]), to a new
// ingester reading SGLang's layout.
func ingestSGLang(t *testing.T, idx *fakeIndex, events []any) *Ingester {
	t.Helper()
	payload, err := msgpack.Marshal([]any{5.0, events, 0})
	if err != nil {
		t.Fatal(err)
	}
	in := NewIngester(IngesterConfig{WorkerID: testWorker, EventFormat: kvevents.FormatSGLang, Logger: testLogger(t)}, idx, nil)
	if err := in.HandleLive(t.Context(), 0, payload); err != nil {
		t.Fatal(err)
	}
	return in
}

// TestIngestSGLangSaltedBatch: SGLang (kv_events.py, 0.5.18+) sends a
// salted request's blocks as BlockStoredWithMetadata, its positional
// BlockStored with a {"cache_salt": ...} map after medium. The batch is
// built here from plain values in SGLang's field order. Both events of a
// batch with one salted and one unsalted event are applied; the salted
// block is indexed apart from an unsalted prompt with the same tokens, and
// the blocks stored after it chain from it.
func TestIngestSGLangSaltedBatch(t *testing.T) {
	salted, plain := tokenRun(100, 16), tokenRun(900, 16)
	next := tokenRun(300, 16)
	idx := newFakeIndex()
	in := ingestSGLang(t, idx, []any{
		// [tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, metadata]
		[]any{"BlockStored", []int64{-7}, nil, salted, 16, nil, "GPU", map[string]any{"cache_salt": "alice"}},
		[]any{"BlockStored", []int64{8}, nil, plain, 16, nil, "GPU"},
		[]any{"BlockStored", []int64{9}, int64(-7), next, 16, nil, "GPU", map[string]any{"cache_salt": "alice"}},
	})
	s := in.Stats()
	if s.Malformed != 0 || s.Orphans != 0 || s.BlocksStored != 3 {
		t.Fatalf("stats %+v, want 3 blocks stored, none malformed or orphaned", s)
	}
	got := idx.view(testWorker, kvtier.GPU)
	if _, ok := slices.BinarySearch(got, tokenizer.BlockHashes(plain, 16)[0]); !ok {
		t.Error("the unsalted block is not indexed under its prompt's hash")
	}
	if _, ok := slices.BinarySearch(got, tokenizer.BlockHashes(salted, 16)[0]); ok {
		t.Error("the salted block matches an unsalted prompt")
	}
}

// TestIngestSGLangMedia: SGLang's StorageMedium values (kv_events.py:
// "GPU", "CPU_PINNED", "DISK", "EXTERNAL"), in a batch built here from
// plain values. The first three are the node's tiers; EXTERNAL, a shared or
// remote pool Hearth cannot load from, is counted and not indexed.
func TestIngestSGLangMedia(t *testing.T) {
	toks := tokenRun(40, 16)
	stored := func(medium string, tokens []uint32) []any {
		return []any{"BlockStored", []int64{-5}, nil, tokens, 16, nil, medium}
	}
	idx := newFakeIndex()
	in := ingestSGLang(t, idx, []any{
		stored("GPU", toks), stored("CPU_PINNED", []uint32{}), stored("DISK", []uint32{}), stored("EXTERNAL", []uint32{}),
		[]any{"BlockRemoved", []int64{-5}, "EXTERNAL"},
	})
	want := tokenizer.BlockHashes(toks, 16)
	slices.Sort(want)
	for _, tier := range []kvtier.Tier{kvtier.GPU, kvtier.RAM, kvtier.Disk} {
		if got := idx.view(testWorker, tier); !slices.Equal(got, want) {
			t.Errorf("%v holds %x, want %x", tier, got, want)
		}
	}
	if s := in.Stats(); s.External != 2 || s.Skipped != 0 || s.Orphans != 0 {
		t.Errorf("external %d, skipped %d, orphans %d; want 2, 0, 0", s.External, s.Skipped, s.Orphans)
	}
}

// TestIngestVLLMOffloadedBlocks: vLLM v0.20's GPU cache reports a block by
// the low 64 bits of its hash read big-endian (maybe_convert_block_hash);
// its OffloadingConnector reports the copy in host RAM by the raw hash (32
// bytes), with no parent, no token ids, block_size 0 and medium "CPU"
// (docs/engine-conformance.md V1-V3). Built here from plain values in
// vLLM's map layout, with SHA-256 digests standing in for block hashes: the
// CPU events land on, and leave, the RAM tier of the GPU blocks they name.
func TestIngestVLLMOffloadedBlocks(t *testing.T) {
	toks := tokenRun(500, 48)
	var digests [][]byte
	var ints []uint64
	for i := range 3 {
		d := sha256.Sum256([]byte{byte(i)})
		digests = append(digests, d[:])
		ints = append(ints, binary.BigEndian.Uint64(d[24:]))
	}
	vllmBatch := func(events ...map[string]any) []byte {
		payload, err := msgpack.Marshal([]any{5.0, events, 0})
		if err != nil {
			t.Fatal(err)
		}
		return payload
	}
	cpuStored := func(hashes ...[]byte) map[string]any {
		return map[string]any{
			"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": nil, "token_ids": []uint32{},
			"block_size": 0, "lora_id": nil, "medium": "CPU", "lora_name": nil,
		}
	}
	idx := newFakeIndex()
	in := newTestIngester(t, idx, nil)
	live(t, in,
		fakeBatch{seq: 0, payload: vllmBatch(map[string]any{
			"type": "BlockStored", "block_hashes": ints, "parent_block_hash": nil, "token_ids": toks,
			"block_size": 16, "lora_id": nil, "medium": "GPU", "lora_name": nil,
		})},
		fakeBatch{seq: 1, payload: vllmBatch(cpuStored(digests[0], digests[1]), cpuStored(digests[2]))},
		fakeBatch{seq: 2, payload: vllmBatch(map[string]any{"type": "BlockRemoved", "block_hashes": [][]byte{digests[0]}, "medium": "CPU"})},
	)
	want := tokenizer.BlockHashes(toks, 16)
	gpu := slices.Sorted(slices.Values(want))
	ram := slices.Sorted(slices.Values(want[1:]))
	if got := idx.view(testWorker, kvtier.GPU); !slices.Equal(got, gpu) {
		t.Errorf("GPU tier holds %x, want %x", got, gpu)
	}
	if got := idx.view(testWorker, kvtier.RAM); !slices.Equal(got, ram) {
		t.Errorf("RAM tier holds %x, want %x (blocks 1 and 2)", got, ram)
	}
	if s := in.Stats(); s.Orphans != 0 || s.UnknownRemove != 0 || s.BlocksStored != 6 || s.BlocksRemoved != 1 {
		t.Errorf("stats %+v: want 6 blocks stored, 1 removed, no orphans or unknown removals", s)
	}
}

// TestIngesterKeepsNoLargeDecodeBuffers: a batch that stores a long prompt
// decodes into large token lists; they are not kept for the next batch.
func TestIngesterKeepsNoLargeDecodeBuffers(t *testing.T) {
	idx := newFakeIndex()
	in := newTestIngester(t, idx, nil)
	e := newFakeEngine(1000, 16)
	long := tokenRun(1, 8192*tokenizer.DefaultBlockSize) // a 128k-token prompt: 512 kB of token ids
	var events []kvevents.Event
	for i := 0; i < 8192; i += 64 {
		events = append(events, e.store(long, i, i+64, ""))
	}
	short := tokenRun(7, 2*tokenizer.DefaultBlockSize)
	live(t, in, e.publish(events...), e.publish(e.store(short, 0, 2, "")))
	if got := batchBufferBytes(&in.batch); got > maxKeptBatchBytes {
		t.Errorf("after the long prompt's batch the ingester keeps %d bytes of decode buffers, want at most %d", got, maxKeptBatchBytes)
	}
	if s := in.Stats(); s.BlocksStored != 8194 {
		t.Errorf("stored %d blocks, want 8194", s.BlocksStored)
	}
}

// ingestPayload applies one payload to a new ingester reading the given
// layout.
func ingestPayload(t *testing.T, idx *fakeIndex, format kvevents.Format, batch any) *Ingester {
	t.Helper()
	payload, err := msgpack.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	in := NewIngester(IngesterConfig{WorkerID: testWorker, EventFormat: format, Logger: testLogger(t)}, idx, nil)
	if err := in.HandleLive(t.Context(), 0, payload); err != nil {
		t.Fatal(err)
	}
	return in
}

// TestIngestSaltedBlocksAsTheRouterHashes: a salted request's blocks, in
// each form an engine sends them, are indexed under the hashes the router
// gives the same prompt with the same cache_salt
// (tokenizer.SaltedBlockHashes), never under the unsalted prompt's. The
// events are plain values in the engines' field order:
//   - SGLang positional (sgl-project/sglang python/sglang/srt/disaggregation/
//     kv_events.py, v0.5.19 and v0.5.23): BlockStoredWithMetadata, its
//     metadata map after medium, on every page of the request;
//   - SGLang map events (v0.5.23): "cache_salt" at the top level, with
//     "session_id";
//   - vLLM (vllm/v1/core/kv_cache_utils.py generate_block_hash_extra_keys,
//     v0.20.0 and v0.33.0's untagged form): the salt in the extra keys of
//     the request's first block only, after the LoRA name when there is one.
func TestIngestSaltedBlocksAsTheRouterHashes(t *testing.T) {
	t.Parallel()
	toks := tokenRun(100, 48)
	b0, b1, b2 := toks[:16], toks[16:32], toks[32:]
	tests := []struct {
		name   string
		format kvevents.Format
		batch  any
		lora   string
	}{
		{"sglang positional", kvevents.FormatSGLang, []any{5.0, []any{
			[]any{"BlockStored", []int64{-7, 8}, nil, toks[:32], 16, nil, "GPU", map[string]any{"cache_salt": "alice"}},
			[]any{"BlockStored", []int64{9}, int64(8), b2, 16, nil, "GPU", map[string]any{"cache_salt": "alice"}},
		}, 0}, ""},
		{"sglang map", kvevents.FormatSGLang, []any{5.0, []any{
			map[string]any{"type": "BlockStored", "block_hashes": []int64{-7, 8}, "parent_block_hash": nil,
				"token_ids": toks[:32], "block_size": 16, "lora_id": nil, "medium": "GPU",
				"cache_salt": "alice", "session_id": "conv-1"},
			map[string]any{"type": "BlockStored", "block_hashes": []int64{9}, "parent_block_hash": 8,
				"token_ids": b2, "block_size": 16, "lora_id": nil, "medium": "GPU",
				"cache_salt": "alice", "session_id": "conv-1"},
		}, 0}, ""},
		{"vllm array", kvevents.FormatArray, []any{5.0, []any{
			// [tag, block_hashes, parent, token_ids, block_size, lora_id, medium, lora_name, extra_keys]
			[]any{"BlockStored", []uint64{1, 2}, nil, toks[:32], 16, nil, "GPU", nil, []any{[]any{"alice"}, nil}},
			[]any{"BlockStored", []uint64{3}, uint64(2), b2, 16, nil, "GPU", nil, []any{nil}},
		}, 0}, ""},
		{"vllm map with lora", kvevents.FormatMap, []any{5.0, []any{
			map[string]any{"type": "BlockStored", "block_hashes": []uint64{1}, "parent_block_hash": nil,
				"token_ids": b0, "block_size": 16, "lora_id": 1, "medium": "GPU", "lora_name": "ad",
				"extra_keys": []any{[]any{"ad", "alice"}}},
			map[string]any{"type": "BlockStored", "block_hashes": []uint64{2, 3}, "parent_block_hash": 1,
				"token_ids": append(slices.Clone(b1), b2...), "block_size": 16, "lora_id": 1, "medium": "GPU", "lora_name": "ad",
				"extra_keys": []any{[]any{"ad"}, []any{"ad"}}},
		}, 0}, "ad"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx := newFakeIndex()
			in := ingestPayload(t, idx, tc.format, tc.batch)
			if s := in.Stats(); s.BlocksStored != 3 || s.Malformed != 0 || s.Orphans != 0 {
				t.Fatalf("stats %+v, want 3 blocks stored", s)
			}
			h := tokenizer.NewHasher(tc.lora)
			want := h.WithSalt("alice").AppendBlockHashes(nil, nil, toks, 16)
			unsalted := h.AppendBlockHashes(nil, nil, toks, 16)
			got := idx.view(testWorker, kvtier.GPU)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("indexed %x\nwant the salted prompt's %x", got, want)
			}
			for _, u := range unsalted {
				if _, ok := slices.BinarySearch(got, u); ok {
					t.Errorf("unsalted prompt's block %x indexed from salted blocks", u)
				}
			}
		})
	}
}

// TestIngestSGLangComponentTypes: with --enable-kv-events-component-types
// SGLang appends a component type string to its positional events
// (BlockStoredWithComponentType at position 7, before a salted request's
// metadata; BlockRemovedWithComponentType at position 3; sgl-project/sglang
// python/sglang/srt/disaggregation/kv_events.py, v0.5.23). The batch is
// applied whole: full-attention pages are indexed, sliding-window pages and
// Mamba checkpoints skipped, and a full page's removal applied.
func TestIngestSGLangComponentTypes(t *testing.T) {
	t.Parallel()
	full, swa, salted := tokenRun(100, 16), tokenRun(200, 16), tokenRun(300, 16)
	idx := newFakeIndex()
	in := ingestSGLang(t, idx, []any{
		[]any{"BlockStored", []int64{1}, nil, full, 16, nil, "GPU", "full"},
		[]any{"BlockStored", []int64{2}, nil, swa, 16, nil, "GPU", "swa"},
		[]any{"BlockStored", []int64{3}, nil, swa, 16, nil, "GPU", "mamba"},
		[]any{"BlockStored", []int64{4}, nil, salted, 16, nil, "GPU", "full", map[string]any{"cache_salt": "alice"}},
		[]any{"BlockRemoved", []int64{2}, "GPU", "swa"},
		[]any{"BlockStored", []int64{5}, nil, full, 16, nil, "CPU_PINNED", "full"},
		[]any{"BlockRemoved", []int64{5}, "CPU_PINNED", "full"},
	})
	s := in.Stats()
	if s.Malformed != 0 || s.BlocksStored != 3 || s.Skipped != 3 {
		t.Fatalf("stats %+v, want 3 blocks stored, 3 events skipped, none malformed", s)
	}
	want := []tokenizer.SeqHash{tokenizer.BlockHashes(full, 16)[0], tokenizer.SaltedBlockHashes(salted, 16, "alice")[0]}
	slices.Sort(want)
	if got := idx.view(testWorker, kvtier.GPU); !slices.Equal(got, want) {
		t.Errorf("GPU holds %x, want %x", got, want)
	}
	if got := idx.view(testWorker, kvtier.RAM); len(got) != 0 {
		t.Errorf("RAM holds %x after its removal", got)
	}
}

// TestIngestVLLMSpecKinds: vLLM's stored blocks name their KV-cache
// group's kind and window (BlockStored's kv_cache_spec_kind and
// kv_cache_spec_sliding_window after group_idx; vllm-project/vllm
// vllm/distributed/kv_events.py at 0181ea3173e53eea8cf04a86891488e3dc89bb34,
// untagged), its removals the group alone. A hybrid model whose
// sliding-window layers are group 0 and full attention group 1: the
// full-attention blocks are indexed and their removal applied, the
// sliding-window blocks skipped, in the map and the positional forms.
func TestIngestVLLMSpecKinds(t *testing.T) {
	t.Parallel()
	toks := tokenRun(500, 32)
	tests := []struct {
		name   string
		format kvevents.Format
		events []any
	}{
		{"map", kvevents.FormatMap, []any{
			map[string]any{"type": "BlockStored", "block_hashes": []uint64{1, 2}, "parent_block_hash": nil, "token_ids": toks,
				"block_size": 16, "lora_id": nil, "medium": "GPU", "lora_name": nil, "group_idx": 0,
				"kv_cache_spec_kind": "sliding_window", "kv_cache_spec_sliding_window": 128},
			map[string]any{"type": "BlockStored", "block_hashes": []uint64{11, 12}, "parent_block_hash": nil, "token_ids": toks,
				"block_size": 16, "lora_id": nil, "medium": "GPU", "lora_name": nil, "group_idx": 1,
				"kv_cache_spec_kind": "full_attention"},
			map[string]any{"type": "BlockRemoved", "block_hashes": []uint64{11}, "medium": "GPU", "group_idx": 1},
			map[string]any{"type": "BlockRemoved", "block_hashes": []uint64{2}, "medium": "GPU"},
		}},
		{"positional", kvevents.FormatArray, []any{
			[]any{"BlockStored", []uint64{1, 2}, nil, toks, 16, nil, "GPU", nil, nil, 0, "sliding_window", 128},
			[]any{"BlockStored", []uint64{11, 12}, nil, toks, 16, nil, "GPU", nil, nil, 1, "full_attention"},
			[]any{"BlockRemoved", []uint64{11}, "GPU", 1},
			[]any{"BlockRemoved", []uint64{2}, "GPU"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx := newFakeIndex()
			in := ingestPayload(t, idx, tc.format, []any{5.0, tc.events, 0})
			s := in.Stats()
			if s.Malformed != 0 || s.BlocksStored != 2 || s.BlocksRemoved != 1 || s.Skipped != 2 {
				t.Fatalf("stats %+v, want the full-attention group's 2 blocks stored and 1 removed, the sliding window's 2 events skipped", s)
			}
			want := tokenizer.BlockHashes(toks, 16)[1:]
			if got := idx.view(testWorker, kvtier.GPU); !slices.Equal(got, want) {
				t.Errorf("GPU holds %x, want the second full-attention block %x", got, want)
			}
		})
	}
}
