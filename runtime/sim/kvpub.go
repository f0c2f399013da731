package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

// EventFormat selects how each KV event is laid out inside a batch.
type EventFormat int

const (
	// EventFormatMap writes each event as a msgpack map with a "type" key,
	// as vLLM has done since mid-2026.
	EventFormatMap EventFormat = iota
	// EventFormatArray writes each event as a positional array whose first
	// element is the class name, as older vLLM and SGLang releases do.
	EventFormatArray
	// EventFormatMapBatch writes map-form events and the batch itself as a
	// map {"ts", "events", "data_parallel_rank"}: vLLM's main branch dropped
	// msgspec's array_like from EventBatch as well as from the events.
	EventFormatMapBatch
)

// ParseEventFormat parses "map", "array" or "map-batch".
func ParseEventFormat(s string) (EventFormat, error) {
	switch s {
	case "map", "":
		return EventFormatMap, nil
	case "array":
		return EventFormatArray, nil
	case "map-batch":
		return EventFormatMapBatch, nil
	}
	return 0, fmt.Errorf("kv events: unknown event format %q (want map, array or map-batch)", s)
}

func (f EventFormat) String() string {
	switch f {
	case EventFormatArray:
		return "array"
	case EventFormatMapBatch:
		return "map-batch"
	}
	return "map"
}

// PublisherOptions configures a Publisher. Zero values take the documented
// defaults.
type PublisherOptions struct {
	// Endpoint is the address the PUB socket binds, e.g. tcp://127.0.0.1:5557
	// (port 0 picks a free one). Required.
	Endpoint string
	// ReplayEndpoint is the address the replay ROUTER socket binds; empty
	// disables replay.
	ReplayEndpoint string
	// Topic is the first frame of every message; default "kv-events".
	Topic string
	// Format selects map-form (default) or array-form events.
	Format EventFormat
	// DataParallelRank is written as the third element of every batch.
	DataParallelRank int
	// QueueSize bounds the batches waiting for the sender; default 4096.
	// When it is full a batch is not sent live, but it keeps its sequence
	// number and stays in the replay buffer, so subscribers see the gap and
	// can fetch it.
	QueueSize int
	// ReplayBuffer is how many past batches the replay socket can serve;
	// default 10000, as vLLM's buffer_steps.
	ReplayBuffer int
	// Now timestamps batches; nil means time.Now. vLLM stamps batches with
	// wall-clock seconds since the Unix epoch.
	Now    func() time.Time
	Logger *slog.Logger
}

// Publisher publishes the engine's KV events over ZMQ in vLLM's wire format.
// It implements EventSink without blocking the engine loop: batches are
// encoded and numbered by the caller, then handed to a sender goroutine
// through a bounded queue.
//
// Wire format (one ZMQ message per batch, three frames):
//
//	topic   utf-8
//	seq     uint64, 8 bytes big-endian, 0 for the first batch of the process
//	payload msgpack [ts float64, events array, data_parallel_rank int]
//	        (or, with EventFormatMapBatch, the same three as a map)
//
// Replay (vLLM's ZmqEventPublisher._service_replay): a DEALER sends
// ["", start_seq (8 bytes BE)]; the ROUTER sees [identity, "", start_seq]
// and answers with one message [identity, "", seq, payload] per buffered
// batch with seq >= start_seq, then [identity, "", 8×0xFF, ""] as the end
// marker. The DEALER therefore receives ["", seq, payload] frames; there is
// no topic frame in replies. Requests of any other shape are ignored.
type Publisher struct {
	opts  PublisherOptions
	log   *slog.Logger
	topic []byte

	pub    zmq4.Socket
	replay zmq4.Socket // nil without a replay endpoint

	mu      sync.Mutex
	nextSeq uint64
	ring    []publishedBatch // circular, len == cap once full
	ringPos int              // index of the oldest entry once full
	queue   chan publishedBatch

	dropped atomic.Int64
	runOnce sync.Once
}

type publishedBatch struct {
	seq     uint64
	payload []byte
}

var _ EventSink = (*Publisher)(nil)

// pubHighWaterMark bounds the messages the PUB socket queues.
const pubHighWaterMark = 100_000

// replayEndMarker is the sequence number (-1 as signed 64-bit) that ends a
// replay answer.
var replayEndMarker = bytes.Repeat([]byte{0xFF}, 8)

// NewPublisher binds the PUB (and replay) sockets. Run must be called to send
// anything; it closes the sockets when it returns.
func NewPublisher(opts PublisherOptions) (*Publisher, error) {
	if opts.Endpoint == "" {
		return nil, errors.New("kv events: no endpoint")
	}
	if opts.Topic == "" {
		opts.Topic = "kv-events"
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 4096
	}
	if opts.ReplayBuffer <= 0 {
		opts.ReplayBuffer = 10000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Publisher{
		opts:  opts,
		log:   log.With("component", "kv-events"),
		topic: []byte(opts.Topic),
		queue: make(chan publishedBatch, opts.QueueSize),
		ring:  make([]publishedBatch, 0, min(opts.ReplayBuffer, 1024)),
	}
	// The sockets live until Run closes them, not for one request, so they
	// get a context of their own.
	p.pub = zmq4.NewPub(context.Background())
	// The PUB socket's own queue is unbounded by default; a stuck subscriber
	// would make it grow without end. Past the mark it drops, and the
	// subscribers see the gap and replay (vLLM uses the same mark).
	if err := p.pub.SetOption(zmq4.OptionHWM, pubHighWaterMark); err != nil {
		p.pub.Close()
		return nil, fmt.Errorf("kv events: set high-water mark: %w", err)
	}
	if err := p.pub.Listen(opts.Endpoint); err != nil {
		p.pub.Close()
		return nil, fmt.Errorf("kv events: bind %s: %w", opts.Endpoint, err)
	}
	if opts.ReplayEndpoint != "" {
		p.replay = zmq4.NewRouter(context.Background())
		if err := p.replay.Listen(opts.ReplayEndpoint); err != nil {
			p.pub.Close()
			p.replay.Close()
			return nil, fmt.Errorf("kv events: bind replay %s: %w", opts.ReplayEndpoint, err)
		}
	}
	return p, nil
}

// Endpoint is the bound PUB address, with the port resolved.
func (p *Publisher) Endpoint() string { return endpointOf(p.pub.Addr()) }

// ReplayEndpoint is the bound replay address, or "" without replay.
func (p *Publisher) ReplayEndpoint() string {
	if p.replay == nil {
		return ""
	}
	return endpointOf(p.replay.Addr())
}

func endpointOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.Network() + "://" + a.String()
}

// Dropped is the number of batches that did not fit the send queue and were
// left to replay.
func (p *Publisher) Dropped() int64 { return p.dropped.Load() }

// PublishKVEvents encodes one batch, gives it the next sequence number, keeps
// it for replay and queues it for sending. It never blocks on the network.
func (p *Publisher) PublishKVEvents(_ time.Duration, events []KVEvent) {
	if len(events) == 0 {
		return
	}
	payload := EncodeEventBatch(p.opts.Now(), events, p.opts.Format, p.opts.DataParallelRank)

	p.mu.Lock()
	defer p.mu.Unlock()
	b := publishedBatch{seq: p.nextSeq, payload: payload}
	p.nextSeq++
	if len(p.ring) < p.opts.ReplayBuffer {
		p.ring = append(p.ring, b)
	} else {
		p.ring[p.ringPos] = b
		p.ringPos = (p.ringPos + 1) % len(p.ring)
	}
	// Queued under the lock so the sender sees batches in sequence order.
	select {
	case p.queue <- b:
	default:
		p.dropped.Add(1)
	}
}

// Run sends queued batches and answers replay requests until ctx is done,
// then closes both sockets. It must be called once.
func (p *Publisher) Run(ctx context.Context) error {
	ran := false
	p.runOnce.Do(func() { ran = true })
	if !ran {
		return errors.New("kv events: Run called twice")
	}
	var replayDone chan struct{}
	if p.replay != nil {
		replayDone = make(chan struct{})
		go func() {
			defer close(replayDone)
			p.serveReplay()
		}()
	}
	p.log.Info("publishing KV events", "endpoint", p.Endpoint(), "replay", p.ReplayEndpoint(),
		"topic", p.opts.Topic, "format", p.opts.Format.String())

	var seqBuf [8]byte
	for {
		select {
		case <-ctx.Done():
			p.pub.Close()
			if p.replay != nil {
				p.replay.Close()
				<-replayDone
			}
			return nil
		case b := <-p.queue:
			binary.BigEndian.PutUint64(seqBuf[:], b.seq)
			// NewMsgFrom keeps the frames; copy the sequence bytes because
			// the socket writes asynchronously.
			seq := append([]byte(nil), seqBuf[:]...)
			if err := p.pub.SendMulti(zmq4.NewMsgFrom(p.topic, seq, b.payload)); err != nil {
				p.log.Warn("send KV event batch", "seq", b.seq, "error", err)
			}
		}
	}
}

// serveReplay answers replay requests until the ROUTER socket is closed.
func (p *Publisher) serveReplay() {
	for {
		msg, err := p.replay.Recv()
		if err != nil {
			return // socket closed by Run
		}
		// [identity, "", start_seq]
		if len(msg.Frames) != 3 || len(msg.Frames[1]) != 0 || len(msg.Frames[2]) != 8 {
			p.log.Debug("ignoring malformed replay request", "frames", len(msg.Frames))
			continue
		}
		id := msg.Frames[0]
		start := binary.BigEndian.Uint64(msg.Frames[2])
		for _, b := range p.replayFrom(start) {
			seq := binary.BigEndian.AppendUint64(nil, b.seq)
			if err := p.replay.SendMulti(zmq4.NewMsgFrom(id, []byte{}, seq, b.payload)); err != nil {
				p.log.Debug("replay send", "error", err)
				break
			}
		}
		if err := p.replay.SendMulti(zmq4.NewMsgFrom(id, []byte{}, replayEndMarker, []byte{})); err != nil {
			p.log.Debug("replay end marker", "error", err)
		}
	}
}

// replayFrom returns the buffered batches with seq >= start, oldest first.
func (p *Publisher) replayFrom(start uint64) []publishedBatch {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []publishedBatch
	for i := range p.ring {
		b := p.ring[(p.ringPos+i)%len(p.ring)]
		if b.seq >= start {
			out = append(out, b)
		}
	}
	return out
}

// EncodeEventBatch returns one EventBatch payload in the given layout: the
// bytes the publisher sends as a message's third frame, and what an
// in-process simulation hands to the router's decoder. The msgpack writer
// only fails when its io.Writer does, and bytes.Buffer does not, so errors
// are impossible here.
func EncodeEventBatch(now time.Time, events []KVEvent, format EventFormat, dpRank int) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	ts := float64(now.UnixNano()) / 1e9
	if format == EventFormatMapBatch {
		_ = enc.EncodeMapLen(3)
		_ = enc.EncodeString("ts")
		_ = enc.EncodeFloat64(ts)
		_ = enc.EncodeString("events")
	} else {
		_ = enc.EncodeArrayLen(3)
		_ = enc.EncodeFloat64(ts)
	}
	_ = enc.EncodeArrayLen(len(events))
	for i := range events {
		if format == EventFormatArray {
			encodeEventArray(enc, &events[i])
		} else {
			encodeEventMap(enc, &events[i])
		}
	}
	if format == EventFormatMapBatch {
		_ = enc.EncodeString("data_parallel_rank")
	}
	_ = enc.EncodeInt(int64(dpRank))
	return buf.Bytes()
}

// Field order follows vLLM's BlockStored / BlockRemoved / AllBlocksCleared
// structs; fields without a default (lora_id, medium, lora_name) are always
// written, those with one (extra_keys, group_idx, ...) are left out.
func encodeEventMap(enc *msgpack.Encoder, ev *KVEvent) {
	switch ev.Type {
	case BlockStored:
		_ = enc.EncodeMapLen(8)
		_ = enc.EncodeString("type")
		_ = enc.EncodeString("BlockStored")
		_ = enc.EncodeString("block_hashes")
		encodeHashes(enc, ev.BlockHashes)
		_ = enc.EncodeString("parent_block_hash")
		encodeParent(enc, ev)
		_ = enc.EncodeString("token_ids")
		encodeTokens(enc, ev.TokenIDs)
		_ = enc.EncodeString("block_size")
		_ = enc.EncodeInt(int64(ev.BlockSize))
		_ = enc.EncodeString("lora_id")
		_ = enc.EncodeNil()
		_ = enc.EncodeString("medium")
		_ = enc.EncodeString(medium(ev))
		_ = enc.EncodeString("lora_name")
		_ = enc.EncodeNil()
	case BlockRemoved:
		_ = enc.EncodeMapLen(3)
		_ = enc.EncodeString("type")
		_ = enc.EncodeString("BlockRemoved")
		_ = enc.EncodeString("block_hashes")
		encodeHashes(enc, ev.BlockHashes)
		_ = enc.EncodeString("medium")
		_ = enc.EncodeString(medium(ev))
	default: // AllBlocksCleared
		_ = enc.EncodeMapLen(1)
		_ = enc.EncodeString("type")
		_ = enc.EncodeString("AllBlocksCleared")
	}
}

func encodeEventArray(enc *msgpack.Encoder, ev *KVEvent) {
	switch ev.Type {
	case BlockStored:
		_ = enc.EncodeArrayLen(8)
		_ = enc.EncodeString("BlockStored")
		encodeHashes(enc, ev.BlockHashes)
		encodeParent(enc, ev)
		encodeTokens(enc, ev.TokenIDs)
		_ = enc.EncodeInt(int64(ev.BlockSize))
		_ = enc.EncodeNil() // lora_id
		_ = enc.EncodeString(medium(ev))
		_ = enc.EncodeNil() // lora_name
	case BlockRemoved:
		_ = enc.EncodeArrayLen(3)
		_ = enc.EncodeString("BlockRemoved")
		encodeHashes(enc, ev.BlockHashes)
		_ = enc.EncodeString(medium(ev))
	default:
		_ = enc.EncodeArrayLen(1)
		_ = enc.EncodeString("AllBlocksCleared")
	}
}

// encodeHashes writes hashes as the smallest msgpack unsigned int that holds
// them, so values >= 2^63 become uint64, as Python's encoder does.
func encodeHashes(enc *msgpack.Encoder, hashes []uint64) {
	_ = enc.EncodeArrayLen(len(hashes))
	for _, h := range hashes {
		_ = enc.EncodeUint(h)
	}
}

func encodeParent(enc *msgpack.Encoder, ev *KVEvent) {
	if !ev.HasParent {
		_ = enc.EncodeNil()
		return
	}
	_ = enc.EncodeUint(ev.ParentBlockHash)
}

func encodeTokens(enc *msgpack.Encoder, ids []uint32) {
	_ = enc.EncodeArrayLen(len(ids))
	for _, id := range ids {
		_ = enc.EncodeUint(uint64(id))
	}
}

func medium(ev *KVEvent) string {
	if ev.Medium == "" {
		return "GPU"
	}
	return ev.Medium
}
