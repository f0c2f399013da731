package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// --- an independent msgpack reader, so the publisher's encoder is checked
// against the format itself rather than against its own library ---

type mpReader struct {
	b []byte
}

var errShort = errors.New("msgpack: short input")

func (r *mpReader) take(n int) ([]byte, error) {
	if n < 0 || len(r.b) < n {
		return nil, errShort
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out, nil
}

func (r *mpReader) uint(n int) (uint64, error) {
	b, err := r.take(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v, nil
}

// value decodes one msgpack value into nil, bool, int64, uint64, float64,
// string, []byte, []any or map[string]any.
func (r *mpReader) value() (any, error) {
	head, err := r.take(1)
	if err != nil {
		return nil, err
	}
	c := head[0]
	switch {
	case c <= 0x7f:
		return uint64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	case c&0xf0 == 0x80:
		return r.mapOf(int(c & 0x0f))
	case c&0xf0 == 0x90:
		return r.arrayOf(int(c & 0x0f))
	case c&0xe0 == 0xa0:
		b, err := r.take(int(c & 0x1f))
		return string(b), err
	}
	sized := func(n int) (int, error) { v, err := r.uint(n); return int(v), err }
	switch c {
	case 0xc0:
		return nil, nil
	case 0xc2:
		return false, nil
	case 0xc3:
		return true, nil
	case 0xcc, 0xcd, 0xce, 0xcf:
		return r.uint(1 << (c - 0xcc))
	case 0xd0, 0xd1, 0xd2, 0xd3:
		n := 1 << (c - 0xd0)
		v, err := r.uint(n)
		shift := 64 - 8*n
		return int64(v<<shift) >> shift, err
	case 0xca:
		v, err := r.uint(4)
		return float64(math.Float32frombits(uint32(v))), err
	case 0xcb:
		v, err := r.uint(8)
		return math.Float64frombits(v), err
	case 0xd9, 0xda, 0xdb:
		n, err := sized(1 << (c - 0xd9))
		if err != nil {
			return nil, err
		}
		b, err := r.take(n)
		return string(b), err
	case 0xc4, 0xc5, 0xc6:
		n, err := sized(1 << (c - 0xc4))
		if err != nil {
			return nil, err
		}
		b, err := r.take(n)
		return slices.Clone(b), err
	case 0xdc, 0xdd:
		n, err := sized(2 << (c - 0xdc))
		if err != nil {
			return nil, err
		}
		return r.arrayOf(n)
	case 0xde, 0xdf:
		n, err := sized(2 << (c - 0xde))
		if err != nil {
			return nil, err
		}
		return r.mapOf(n)
	}
	return nil, fmt.Errorf("msgpack: unsupported type byte %#x", c)
}

func (r *mpReader) arrayOf(n int) ([]any, error) {
	out := make([]any, 0, min(n, len(r.b)))
	for range n {
		v, err := r.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (r *mpReader) mapOf(n int) (map[string]any, error) {
	out := make(map[string]any, min(n, len(r.b)))
	for range n {
		k, err := r.value()
		if err != nil {
			return nil, err
		}
		ks, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("msgpack: map key %T, want string", k)
		}
		v, err := r.value()
		if err != nil {
			return nil, err
		}
		out[ks] = v
	}
	return out, nil
}

func decodeMsgpack(b []byte) (any, error) {
	r := &mpReader{b: b}
	v, err := r.value()
	if err == nil && len(r.b) != 0 {
		err = fmt.Errorf("msgpack: %d trailing bytes", len(r.b))
	}
	return v, err
}

// --- a subscriber that rebuilds an engine's cached blocks from events ---

// wireEvent is one event as decoded from the wire, in either form.
type wireEvent struct {
	kind      string
	hashes    []uint64
	parent    any // nil or uint64
	tokens    []uint64
	blockSize uint64
	medium    string
}

func asUint(v any) (uint64, error) {
	switch x := v.(type) {
	case uint64:
		return x, nil
	case int64:
		if x >= 0 {
			return uint64(x), nil
		}
	}
	return 0, fmt.Errorf("want a non-negative int, got %T %v", v, v)
}

func asUints(v any) ([]uint64, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("want an array, got %T", v)
	}
	out := make([]uint64, len(arr))
	for i, x := range arr {
		u, err := asUint(x)
		if err != nil {
			return nil, err
		}
		out[i] = u
	}
	return out, nil
}

// parseWireEvent checks one event's shape strictly against vLLM's structs.
func parseWireEvent(v any, format EventFormat) (wireEvent, error) {
	var ev wireEvent
	var fields map[string]any
	switch format {
	case EventFormatMap, EventFormatMapBatch:
		m, ok := v.(map[string]any)
		if !ok {
			return ev, fmt.Errorf("event is %T, want a map", v)
		}
		fields = m
		ev.kind, _ = m["type"].(string)
	case EventFormatArray:
		a, ok := v.([]any)
		if !ok || len(a) == 0 {
			return ev, fmt.Errorf("event is %T, want a non-empty array", v)
		}
		ev.kind, _ = a[0].(string)
		var names []string
		switch ev.kind {
		case "BlockStored":
			names = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name"}
		case "BlockRemoved":
			names = []string{"block_hashes", "medium"}
		}
		if len(a) != len(names)+1 {
			return ev, fmt.Errorf("%s array has %d elements, want %d", ev.kind, len(a), len(names)+1)
		}
		fields = map[string]any{"type": ev.kind}
		for i, n := range names {
			fields[n] = a[i+1]
		}
	}
	wantKeys := map[string]int{"BlockStored": 8, "BlockRemoved": 3, "AllBlocksCleared": 1}[ev.kind]
	if wantKeys == 0 || len(fields) != wantKeys {
		return ev, fmt.Errorf("event %q has %d fields: %v", ev.kind, len(fields), fields)
	}
	var err error
	if ev.kind == "AllBlocksCleared" {
		return ev, nil
	}
	if ev.hashes, err = asUints(fields["block_hashes"]); err != nil {
		return ev, fmt.Errorf("block_hashes: %w", err)
	}
	if ev.medium, _ = fields["medium"].(string); ev.medium != "GPU" {
		return ev, fmt.Errorf("medium %v, want GPU", fields["medium"])
	}
	if ev.kind == "BlockRemoved" {
		return ev, nil
	}
	if fields["lora_id"] != nil || fields["lora_name"] != nil {
		return ev, fmt.Errorf("lora fields %v %v, want nil", fields["lora_id"], fields["lora_name"])
	}
	if p := fields["parent_block_hash"]; p != nil {
		u, err := asUint(p)
		if err != nil {
			return ev, fmt.Errorf("parent_block_hash: %w", err)
		}
		ev.parent = u
	}
	if ev.tokens, err = asUints(fields["token_ids"]); err != nil {
		return ev, fmt.Errorf("token_ids: %w", err)
	}
	if ev.blockSize, err = asUint(fields["block_size"]); err != nil {
		return ev, fmt.Errorf("block_size: %w", err)
	}
	if uint64(len(ev.tokens)) != ev.blockSize*uint64(len(ev.hashes)) {
		return ev, fmt.Errorf("%d token ids for %d blocks of %d", len(ev.tokens), len(ev.hashes), ev.blockSize)
	}
	return ev, nil
}

// parseBatch decodes one payload: [ts float64, events, dp_rank].
func parseBatch(payload []byte, format EventFormat) ([]wireEvent, error) {
	v, err := decodeMsgpack(payload)
	if err != nil {
		return nil, err
	}
	batch, ok := v.([]any)
	if format == EventFormatMapBatch {
		m, isMap := v.(map[string]any)
		if !isMap || len(m) != 3 {
			return nil, fmt.Errorf("batch is %T %v, want a map of 3", v, v)
		}
		batch, ok = []any{m["ts"], m["events"], m["data_parallel_rank"]}, true
	}
	if !ok || len(batch) != 3 {
		return nil, fmt.Errorf("batch is %T %v, want a 3-element array", v, v)
	}
	if ts, ok := batch[0].(float64); !ok || ts <= 0 {
		return nil, fmt.Errorf("ts %T %v, want a positive float64", batch[0], batch[0])
	}
	if rank, err := asUint(batch[2]); err != nil || rank != 0 {
		return nil, fmt.Errorf("data_parallel_rank %v: %v", batch[2], err)
	}
	raw, ok := batch[1].([]any)
	if !ok {
		return nil, fmt.Errorf("events is %T, want an array", batch[1])
	}
	out := make([]wireEvent, 0, len(raw))
	for _, e := range raw {
		ev, err := parseWireEvent(e, format)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// cacheMirror is what a router keeps per engine: the set of block hashes the
// engine holds, rebuilt from events alone, with gap recovery by replay.
type cacheMirror struct {
	t       *testing.T
	format  EventFormat
	topic   string
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
	events, err := parseBatch(payload, m.format)
	if err != nil {
		m.t.Fatalf("batch %d: %v", seq, err)
	}
	for _, ev := range events {
		switch ev.kind {
		case "BlockStored":
			if p, ok := ev.parent.(uint64); ok && !m.blocks[p] {
				m.t.Errorf("batch %d: stored block's parent %#x is not cached", seq, p)
			}
			for _, h := range ev.hashes {
				m.blocks[h] = true
			}
		case "BlockRemoved":
			m.removed++
			for _, h := range ev.hashes {
				if !m.blocks[h] {
					m.t.Errorf("batch %d: removed block %#x was not cached", seq, h)
				}
				delete(m.blocks, h)
			}
		case "AllBlocksCleared":
			clear(m.blocks)
		}
	}
	m.next = seq + 1
}

// replay fetches every buffered batch from start on through the DEALER.
func (m *cacheMirror) replay(start uint64) {
	m.t.Helper()
	m.replays++
	req := zmq4.NewMsgFrom([]byte{}, binary.BigEndian.AppendUint64(nil, start))
	if err := m.dealer.SendMulti(req); err != nil {
		m.t.Fatalf("replay request: %v", err)
	}
	for {
		msg, err := m.dealer.Recv()
		if err != nil {
			m.t.Fatalf("replay reply: %v", err)
		}
		// ["", seq, payload], no topic frame.
		if len(msg.Frames) != 3 || len(msg.Frames[0]) != 0 || len(msg.Frames[1]) != 8 {
			m.t.Fatalf("replay reply has frames %q", msg.Frames)
		}
		if string(msg.Frames[1]) == string(replayEndMarkerForTest) {
			if len(msg.Frames[2]) != 0 {
				m.t.Fatalf("end marker carries a payload of %d bytes", len(msg.Frames[2]))
			}
			return
		}
		seq := binary.BigEndian.Uint64(msg.Frames[1])
		if seq != m.next {
			m.t.Fatalf("replay gave seq %d, want %d (the buffer lost it)", seq, m.next)
		}
		m.apply(seq, msg.Frames[2])
	}
}

var replayEndMarkerForTest = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// subscribe connects SUB and DEALER sockets to p and waits until p's PUB
// socket has registered the subscription: ZMQ offers no notification, so the
// test polls the publisher's own view of its subscribers.
func subscribe(t *testing.T, ctx context.Context, p *Publisher, format EventFormat) (zmq4.Socket, *cacheMirror) {
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
	return sub, &cacheMirror{t: t, format: format, topic: p.opts.Topic, blocks: map[uint64]bool{}, dealer: dealer}
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
		if len(msg.Frames) != 3 || string(msg.Frames[0]) != m.topic || len(msg.Frames[1]) != 8 {
			t.Fatalf("message frames %q", msg.Frames)
		}
		received++
		if dropEvery > 0 && received%dropEvery == 0 {
			continue
		}
		m.apply(binary.BigEndian.Uint64(msg.Frames[1]), msg.Frames[2])
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

func (c *syntheticCache) step() []KVEvent {
	var events []KVEvent
	c.steps++
	if c.steps == 100 {
		clear(c.blocks)
		c.order = nil
		return []KVEvent{{Type: AllBlocksCleared}}
	}
	n := 1 + c.rng.IntN(4)
	ev := KVEvent{Type: BlockStored, BlockSize: 16, Medium: "GPU"}
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
		events = append(events, KVEvent{Type: BlockRemoved, BlockHashes: slices.Clone(evict), Medium: "GPU"})
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
	for _, format := range []EventFormat{EventFormatMap, EventFormatArray, EventFormatMapBatch} {
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
			sub, mirror := subscribe(t, ctx, p, format)
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
		p.PublishKVEvents(0, []KVEvent{{Type: BlockRemoved, BlockHashes: []uint64{uint64(i)}}})
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
	if err := dealer.SendMulti(zmq4.NewMsgFrom([]byte{}, binary.BigEndian.AppendUint64(nil, 9))); err != nil {
		t.Fatal(err)
	}
	msg, err := dealer.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Frames) != 3 || string(msg.Frames[1]) != string(replayEndMarkerForTest) || len(msg.Frames[2]) != 0 {
		t.Errorf("reply %q, want only the end marker", msg.Frames)
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
		p.PublishKVEvents(0, []KVEvent{{Type: AllBlocksCleared}})
	}
	if got := p.Dropped(); got != 2 {
		t.Errorf("Dropped() = %d, want 2", got)
	}
	if got := len(p.replayFrom(0)); got != 3 {
		t.Errorf("replay buffer holds %d batches, want 3", got)
	}
}

func TestEncodeEventBatchWireShape(t *testing.T) {
	ts := time.Unix(1_700_000_000, 500_000_000)
	events := []KVEvent{
		{Type: BlockStored, BlockHashes: []uint64{1 << 63, 5}, TokenIDs: make([]uint32, 32), BlockSize: 16},
		{Type: BlockStored, BlockHashes: []uint64{7}, ParentBlockHash: 5, HasParent: true, TokenIDs: make([]uint32, 16), BlockSize: 16},
		{Type: BlockRemoved, BlockHashes: []uint64{math.MaxUint64}},
		{Type: AllBlocksCleared},
	}
	tests := []struct {
		name   string
		format EventFormat
		want   string // fmt of the decoded events
	}{
		{"map", EventFormatMap, "map[block_hashes:[9223372036854775808 5] block_size:16 lora_id:<nil> lora_name:<nil> medium:GPU parent_block_hash:<nil>"},
		{"array", EventFormatArray, "[BlockStored [9223372036854775808 5] <nil> ["},
		{"map-batch", EventFormatMapBatch, "map[block_hashes:[9223372036854775808 5] block_size:16 lora_id:<nil> lora_name:<nil> medium:GPU parent_block_hash:<nil>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			payload := EncodeEventBatch(ts, events, tc.format, 0)
			// The largest hash must be a msgpack uint64 (0xcf), not an int64.
			if !strings.Contains(string(payload), "\xcf\x80\x00\x00\x00\x00\x00\x00\x00") {
				t.Error("2^63 is not encoded as msgpack uint64")
			}
			v, err := decodeMsgpack(payload)
			if err != nil {
				t.Fatal(err)
			}
			batch, _ := v.([]any)
			if m, ok := v.(map[string]any); ok {
				batch = []any{m["ts"], m["events"], m["data_parallel_rank"]}
			}
			if tc.format == EventFormatMapBatch && len(v.(map[string]any)) != 3 {
				t.Errorf("map batch %v", v)
			}
			if batch[0].(float64) != 1_700_000_000.5 {
				t.Errorf("ts = %v", batch[0])
			}
			evs := batch[1].([]any)
			if len(evs) != 4 {
				t.Fatalf("%d events", len(evs))
			}
			if got := fmt.Sprint(evs[0]); !strings.HasPrefix(got, tc.want) {
				t.Errorf("first event %s, want prefix %s", got, tc.want)
			}
			parsed, err := parseBatch(payload, tc.format)
			if err != nil {
				t.Fatal(err)
			}
			if parsed[1].parent != uint64(5) || parsed[0].parent != nil {
				t.Errorf("parents %v %v, want nil 5", parsed[0].parent, parsed[1].parent)
			}
			if parsed[2].kind != "BlockRemoved" || parsed[2].hashes[0] != math.MaxUint64 {
				t.Errorf("removed event %+v", parsed[2])
			}
			if parsed[3].kind != "AllBlocksCleared" {
				t.Errorf("last event %+v", parsed[3])
			}
		})
	}
}
