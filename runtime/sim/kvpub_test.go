package sim

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/kvevents"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// cacheMirror is what a router keeps per engine: the set of block hashes the
// engine holds, rebuilt from events alone, with gap recovery by replay.
type cacheMirror struct {
	t       *testing.T
	topic   string
	dec     kvevents.Decoder
	batch   kvevents.Batch
	blocks  map[uint64]bool
	next    uint64 // next sequence number expected
	replays int
	removed int // BlockRemoved events applied
	dealer  zmq4.Socket
}

func (m *cacheMirror) apply(seq uint64, payload []byte) {
	m.t.Helper()
	if seq < m.next {
		return // already applied through a replay
	}
	if seq > m.next {
		m.replay(m.next)
		if seq < m.next {
			return
		}
	}
	if err := m.dec.Decode(payload, &m.batch); err != nil {
		m.t.Fatalf("batch %d: %v", seq, err)
	}
	for _, ev := range m.batch.Events {
		if ev.Kind != kvevents.AllBlocksCleared && ev.Medium != kvevents.MediumGPU {
			m.t.Errorf("batch %d: %v event in medium %v, want GPU", seq, ev.Kind, ev.Medium)
		}
		switch ev.Kind {
		case kvevents.BlockStored:
			if ev.HasParent && !m.blocks[ev.ParentBlockHash] {
				m.t.Errorf("batch %d: stored block's parent %#x is not cached", seq, ev.ParentBlockHash)
			}
			if len(ev.TokenIDs) != len(ev.BlockHashes)*ev.BlockSize {
				m.t.Errorf("batch %d: %d token ids for %d blocks of %d", seq, len(ev.TokenIDs), len(ev.BlockHashes), ev.BlockSize)
			}
			for _, h := range ev.BlockHashes {
				m.blocks[h] = true
			}
		case kvevents.BlockRemoved:
			m.removed++
			for _, h := range ev.BlockHashes {
				if !m.blocks[h] {
					m.t.Errorf("batch %d: removed block %#x was not cached", seq, h)
				}
				delete(m.blocks, h)
			}
		case kvevents.AllBlocksCleared:
			clear(m.blocks)
		default:
			m.t.Errorf("batch %d: event of unknown kind", seq)
		}
	}
	m.next = seq + 1
}

// replay fetches every buffered batch from start on through the DEALER.
func (m *cacheMirror) replay(start uint64) {
	m.t.Helper()
	m.replays++
	if err := m.dealer.SendMulti(zmq4.NewMsgFrom(kvevents.ReplayRequest(start)...)); err != nil {
		m.t.Fatalf("replay request: %v", err)
	}
	for {
		msg, err := m.dealer.Recv()
		if err != nil {
			m.t.Fatalf("replay reply: %v", err)
		}
		// ["", seq, payload]: vLLM sends no topic frame in replies.
		if len(msg.Frames) != 3 {
			m.t.Fatalf("replay reply has frames %q", msg.Frames)
		}
		seq, payload, end, err := kvevents.ParseReplayReply(msg.Frames)
		if err != nil {
			m.t.Fatal(err)
		}
		if end {
			if len(msg.Frames[2]) != 0 {
				m.t.Fatalf("end marker carries a payload of %d bytes", len(msg.Frames[2]))
			}
			return
		}
		if seq != m.next {
			m.t.Fatalf("replay gave seq %d, want %d (the buffer lost it)", seq, m.next)
		}
		m.apply(seq, payload)
	}
}

// subscribe connects SUB and DEALER sockets to p and waits until p's PUB
// socket has registered the subscription: ZMQ offers no notification, so the
// test polls the publisher's own view of its subscribers.
func subscribe(t *testing.T, ctx context.Context, p *Publisher) (zmq4.Socket, *cacheMirror) {
	t.Helper()
	sub := zmq4.NewSub(ctx)
	t.Cleanup(func() { sub.Close() })
	if err := sub.Dial(p.Endpoint()); err != nil {
		t.Fatalf("dial sub: %v", err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, p.opts.Topic); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	dealer := zmq4.NewDealer(ctx, zmq4.WithID(zmq4.SocketIdentity("mirror")))
	t.Cleanup(func() { dealer.Close() })
	if err := dealer.Dial(p.ReplayEndpoint()); err != nil {
		t.Fatalf("dial replay: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(p.pub.(zmq4.Topics).Topics(), p.opts.Topic) {
		if time.Now().After(deadline) {
			t.Fatal("subscription never reached the publisher")
		}
		time.Sleep(time.Millisecond)
	}
	return sub, &cacheMirror{t: t, topic: p.opts.Topic, blocks: map[uint64]bool{}, dealer: dealer}
}

// receiveUntil reads live messages into the mirror until it has applied
// batch last, dropping every dropEvery-th message on purpose (0: none).
func receiveUntil(t *testing.T, sub zmq4.Socket, m *cacheMirror, last uint64, dropEvery int) {
	t.Helper()
	received := 0
	for m.next <= last {
		msg, err := sub.Recv()
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		seq, payload, err := kvevents.ParseMessage(msg.Frames)
		if err != nil || string(msg.Frames[0]) != m.topic {
			t.Fatalf("message frames %q: %v", msg.Frames, err)
		}
		received++
		if dropEvery > 0 && received%dropEvery == 0 {
			continue
		}
		m.apply(seq, payload)
	}
}

// syntheticCache produces a plausible event stream (prefix chains stored,
// LRU-like evictions, an occasional reset) and tracks the set it implies.
type syntheticCache struct {
	steps  int
	rng    *rand.Rand
	blocks map[uint64]bool
	order  []uint64
}

func (c *syntheticCache) step() []kvevents.Event {
	var events []kvevents.Event
	c.steps++
	if c.steps == 100 {
		clear(c.blocks)
		c.order = nil
		return []kvevents.Event{{Kind: kvevents.AllBlocksCleared}}
	}
	n := 1 + c.rng.IntN(4)
	ev := kvevents.Event{Kind: kvevents.BlockStored, BlockSize: 16, Medium: kvevents.MediumGPU}
	if len(c.order) > 0 && c.rng.IntN(2) == 0 {
		ev.ParentBlockHash, ev.HasParent = c.order[c.rng.IntN(len(c.order))], true
	}
	for range n {
		h := c.rng.Uint64() | uint64(c.rng.IntN(2))<<63 // half of them >= 2^63
		ev.BlockHashes = append(ev.BlockHashes, h)
		for range 16 {
			ev.TokenIDs = append(ev.TokenIDs, uint32(c.rng.IntN(151000)))
		}
		c.blocks[h] = true
		c.order = append(c.order, h)
	}
	events = append(events, ev)
	if len(c.order) > 24 {
		evict := c.order[:len(c.order)-24]
		events = append(events, kvevents.Event{Kind: kvevents.BlockRemoved, BlockHashes: slices.Clone(evict), Medium: kvevents.MediumGPU})
		for _, h := range evict {
			delete(c.blocks, h)
		}
		c.order = slices.Clone(c.order[len(evict):])
	}
	return events
}

func startPublisher(t *testing.T, ctx context.Context, opts PublisherOptions) (*Publisher, chan error) {
	t.Helper()
	opts.Endpoint = "tcp://127.0.0.1:0"
	opts.ReplayEndpoint = "tcp://127.0.0.1:0"
	p, err := NewPublisher(opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	return p, done
}

func TestPublisherMirrorFromEventsWithGaps(t *testing.T) {
	for _, format := range allFormats {
		t.Run(format.String(), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p, done := startPublisher(t, ctx, PublisherOptions{Format: format})
			cache := &syntheticCache{rng: rand.New(rand.NewPCG(1, uint64(format))), blocks: map[uint64]bool{}}

			// Published before anyone listens: only replay can recover them.
			var seq uint64
			for range 30 {
				p.PublishKVEvents(0, cache.step())
				seq++
			}
			sub, mirror := subscribe(t, ctx, p)
			for range 200 {
				p.PublishKVEvents(0, cache.step())
				seq++
			}
			receiveUntil(t, sub, mirror, seq-1, 7)

			if mirror.replays == 0 {
				t.Error("no replay happened, so the gap path was not exercised")
			}
			if len(mirror.blocks) == 0 {
				t.Fatal("mirror is empty; the workload stored nothing")
			}
			if !mapsEqual(mirror.blocks, cache.blocks) {
				t.Errorf("mirror has %d blocks, cache %d; they differ", len(mirror.blocks), len(cache.blocks))
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}

func mapsEqual(a, b map[uint64]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func TestPublisherReplayBufferIsBounded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, _ := startPublisher(t, ctx, PublisherOptions{ReplayBuffer: 3})
	for i := range 5 {
		p.PublishKVEvents(0, []kvevents.Event{{Kind: kvevents.BlockRemoved, BlockHashes: []uint64{uint64(i)}}})
	}
	var got []uint64
	for _, b := range p.replayFrom(0) {
		got = append(got, b.seq)
	}
	if !slices.Equal(got, []uint64{2, 3, 4}) {
		t.Errorf("replay from 0 = %v, want [2 3 4]", got)
	}

	// Over the socket: a start past the buffer gets only the end marker.
	dealer := zmq4.NewDealer(ctx, zmq4.WithID(zmq4.SocketIdentity("probe")))
	defer dealer.Close()
	if err := dealer.Dial(p.ReplayEndpoint()); err != nil {
		t.Fatal(err)
	}
	if err := dealer.SendMulti(zmq4.NewMsgFrom(kvevents.ReplayRequest(9)...)); err != nil {
		t.Fatal(err)
	}
	msg, err := dealer.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, end, err := kvevents.ParseReplayReply(msg.Frames); err != nil || !end || len(msg.Frames) != 3 || len(msg.Frames[2]) != 0 {
		t.Errorf("reply %q, want only the end marker", msg.Frames)
	}
}

// TestPublisherReplayBufferIsBoundedInBytes: batches that store long
// prompts carry every token id; the buffer keeps the newest of them within
// its byte bound, however many fit its count, and always the newest one.
func TestPublisherReplayBufferIsBoundedInBytes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const bound = 64 << 10
	p, _ := startPublisher(t, ctx, PublisherOptions{ReplayBufferBytes: bound})
	stored := func(i int) []kvevents.Event {
		hashes := make([]uint64, 64) // a 1,024-token prompt: about 4 kB
		for j := range hashes {
			hashes[j] = uint64(i*1000 + j)
		}
		return []kvevents.Event{{Kind: kvevents.BlockStored, BlockHashes: hashes, TokenIDs: make([]uint32, 64*16), BlockSize: 16}}
	}
	for i := range 1000 {
		p.PublishKVEvents(0, stored(i))
	}
	kept := p.replayFrom(0)
	size := 0
	for i, b := range kept {
		size += cap(b.payload) // the memory it holds
		if want := uint64(1000 - len(kept) + i); b.seq != want {
			t.Fatalf("batch %d has seq %d, want %d: the newest, in order", i, b.seq, want)
		}
	}
	if size > bound || len(kept) < 2 {
		t.Errorf("replay buffer holds %d batches of %d bytes, want at most %d bytes and more than one batch", len(kept), size, bound)
	}
	if p.head+len(kept) > 2*len(kept)+1 {
		t.Errorf("the buffer's slice keeps %d dropped batches for %d kept", p.head, len(kept))
	}
	// One batch over the bound is kept alone: it is the newest.
	big := make([]uint32, 2048*16)
	for i := range big {
		big[i] = 100_000 + uint32(i) // five bytes each in msgpack
	}
	p.PublishKVEvents(0, []kvevents.Event{{Kind: kvevents.BlockStored, BlockHashes: make([]uint64, 2048), TokenIDs: big, BlockSize: 16}})
	if kept := p.replayFrom(0); len(kept) != 1 || kept[0].seq != 1000 {
		t.Errorf("after a batch over the bound the buffer holds %d batches, want that one", len(kept))
	}
}

func TestPublisherFullQueueLeavesBatchesToReplay(t *testing.T) {
	p, err := NewPublisher(PublisherOptions{Endpoint: "tcp://127.0.0.1:0", QueueSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	defer p.Run(ctx) // closes the sockets

	for range 3 {
		p.PublishKVEvents(0, []kvevents.Event{{Kind: kvevents.AllBlocksCleared}})
	}
	if got := p.Dropped(); got != 2 {
		t.Errorf("Dropped() = %d, want 2", got)
	}
	if got := len(p.replayFrom(0)); got != 3 {
		t.Errorf("replay buffer holds %d batches, want 3", got)
	}
}

var allFormats = []kvevents.Format{kvevents.FormatMap, kvevents.FormatArray, kvevents.FormatMapBatch, kvevents.FormatSGLang}

// TestPublisherPayload checks what the publisher puts around the engine's
// events: the configured format, the wall-clock timestamp and the
// data-parallel rank. The format itself is kvevents' to test.
func TestPublisherPayload(t *testing.T) {
	now := time.Unix(1_700_000_000, 250_000_000)
	events := []kvevents.Event{
		{Kind: kvevents.BlockStored, BlockHashes: []uint64{1 << 63, 5}, TokenIDs: make([]uint32, 32), BlockSize: 16, Medium: kvevents.MediumGPU},
		{Kind: kvevents.BlockStored, BlockHashes: []uint64{7}, Medium: kvevents.MediumCPU},
		{Kind: kvevents.BlockRemoved, BlockHashes: []uint64{math.MaxUint64}, Medium: kvevents.MediumCPU},
		{Kind: kvevents.AllBlocksCleared},
	}
	for _, format := range allFormats {
		t.Run(format.String(), func(t *testing.T) {
			p, err := NewPublisher(PublisherOptions{
				Endpoint: "tcp://127.0.0.1:0", Format: format, DataParallelRank: 2,
				Clock: clock.NewFake(now),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			defer p.Run(ctx) // closes the sockets

			p.PublishKVEvents(0, events)
			buffered := p.replayFrom(0)
			if len(buffered) != 1 || buffered[0].seq != 0 {
				t.Fatalf("replay buffer holds %+v", buffered)
			}
			payload := buffered[0].payload
			if want := kvevents.AppendBatch(nil, &kvevents.Batch{TS: 1_700_000_000.25, DPRank: 2, HasDPRank: true, Events: events}, format); !bytes.Equal(payload, want) {
				t.Errorf("payload\n%x\nwant\n%x", payload, want)
			}
			var dec kvevents.Decoder
			var b kvevents.Batch
			if err := dec.Decode(payload, &b); err != nil {
				t.Fatal(err)
			}
			if b.TS != 1_700_000_000.25 || b.DPRank != 2 || !b.HasDPRank || len(b.Events) != len(events) {
				t.Errorf("batch ts %v rank %d/%v, %d events", b.TS, b.DPRank, b.HasDPRank, len(b.Events))
			}
		})
	}
}

// TestSpecKindsByRelease: the simulated vLLM at v0.33.0 names each stored
// block's KV-cache group kind, full attention, in its map events; at
// v0.20.0 (positional), and SGLang at v0.5.23, it names none; nor does a
// v0.33.0 told to publish another layout.
func TestSpecKindsByRelease(t *testing.T) {
	for _, tc := range []struct {
		kind    hruntime.Kind
		version string
		format  kvevents.Format // 0: the release's
		want    string
	}{
		{hruntime.KindVLLM, "0.33.0", 0, "full_attention"},
		{hruntime.KindVLLM, "", 0, "full_attention"},
		{hruntime.KindVLLM, "0.33.0", kvevents.FormatMapBatch, ""},
		{hruntime.KindVLLM, "0.20.0", 0, ""},
		{hruntime.KindSGLang, "0.5.23", 0, ""},
	} {
		format := EventFormatOf(tc.kind, tc.version)
		if tc.format != 0 {
			format = tc.format
		}
		p, err := NewPublisher(PublisherOptions{
			Endpoint: "tcp://127.0.0.1:0", Format: format, SpecKinds: namesSpecKinds(tc.kind, tc.version, format),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		p.PublishKVEvents(0, []kvevents.Event{
			{Kind: kvevents.BlockStored, BlockHashes: []uint64{5}, TokenIDs: make([]uint32, 16), BlockSize: 16, Medium: kvevents.MediumGPU},
			{Kind: kvevents.BlockRemoved, BlockHashes: []uint64{5}, Medium: kvevents.MediumGPU},
		})
		dec := kvevents.Decoder{Format: format}
		var b kvevents.Batch
		if err := dec.Decode(p.replayFrom(0)[0].payload, &b); err != nil {
			t.Fatal(err)
		}
		if got := string(b.Events[0].SpecKind); got != tc.want || len(b.Events[1].SpecKind) != 0 {
			t.Errorf("%s %q in %v: stored block of kind %q, want %q", tc.kind, tc.version, format, got, tc.want)
		}
		p.Run(ctx) // closes the sockets
	}
}

// TestComponentTypesAtIndexSeven: with component types on (SGLang's
// --enable-kv-events-component-types), the simulated SGLang's positional
// BlockStored carries "full" at index 7 and its BlockRemoved at index 3,
// read back as plain values; without them neither carries one.
func TestComponentTypesAtIndexSeven(t *testing.T) {
	for _, on := range []bool{true, false} {
		p, err := NewPublisher(PublisherOptions{Endpoint: "tcp://127.0.0.1:0", Format: kvevents.FormatSGLang, ComponentTypes: on})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		p.PublishKVEvents(0, []kvevents.Event{
			{Kind: kvevents.BlockStored, BlockHashes: []uint64{5}, TokenIDs: make([]uint32, 16), BlockSize: 16, Medium: kvevents.MediumGPU},
			{Kind: kvevents.BlockRemoved, BlockHashes: []uint64{5}, Medium: kvevents.MediumGPU},
		})
		var batch []any
		if err := msgpack.Unmarshal(p.replayFrom(0)[0].payload, &batch); err != nil {
			t.Fatal(err)
		}
		p.Run(ctx) // closes the sockets
		events := batch[1].([]any)
		stored, removed := events[0].([]any), events[1].([]any)
		if stored[0] != "BlockStored" || removed[0] != "BlockRemoved" {
			t.Fatalf("events %v", events)
		}
		if on {
			if len(stored) != 8 || stored[7] != "full" || len(removed) != 4 || removed[3] != "full" {
				t.Errorf("component types on: stored %v, removed %v", stored, removed)
			}
		} else if len(stored) != 7 || len(removed) != 3 {
			t.Errorf("component types off: stored %v, removed %v", stored, removed)
		}
	}
}
