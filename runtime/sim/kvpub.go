package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/kvevents"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// ParseEventFormat parses the name of a KV-event payload format:
// kvevents.ParseFormat, for the engine's command line.
func ParseEventFormat(s string) (kvevents.Format, error) {
	return kvevents.ParseFormat(s)
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
	// Format is the payload layout: vLLM's current one by default, or that
	// of older vLLM releases or of SGLang.
	Format kvevents.Format
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
	// ReplayBufferBytes bounds the same buffer by the batches' encoded
	// size; default DefaultReplayBufferBytes. vLLM bounds it by count
	// alone, but a batch that stores a long prompt's blocks carries every
	// token id (tens of kilobytes), and 10,000 of them would be most of a
	// simulated engine's memory. The oldest batches go first, whichever
	// bound is reached; a subscriber asking for one gone sees the gap.
	ReplayBufferBytes int
	// Clock timestamps batches; nil means clock.Real. vLLM stamps batches
	// with wall-clock seconds since the Unix epoch.
	Clock clock.Clock
	// SpecKinds names every stored block's KV-cache group kind
	// ("full_attention": the simulator models full attention alone), as
	// the releases whose EngineRelease.SpecKinds is set do.
	SpecKinds bool
	// ComponentTypes labels every stored and removed block with its
	// KV-cache component ("full": the simulator models full attention
	// alone), as SGLang does when started with
	// --enable-kv-events-component-types.
	ComponentTypes bool
	// Fault, one of runtime.SimKVEventFaults, publishes events Hearth
	// cannot follow, for tests of its KV-event self-check; "" publishes
	// them as Format says.
	Fault  string
	Logger *slog.Logger
}

// Publisher publishes the engine's KV events over ZMQ as vLLM does (payloads
// and frames as package kvevents defines them): one message per batch on a
// PUB socket, sequence numbers from 0, and a ROUTER socket that answers
// replay requests from a bounded buffer of past batches, as vLLM's
// ZmqEventPublisher._service_replay does, without a topic frame in the
// replies. Requests of any other shape are ignored.
//
// It implements EventSink without blocking the engine loop: batches are
// encoded and numbered by the caller, then handed to a sender goroutine
// through a bounded queue.
type Publisher struct {
	opts  PublisherOptions
	log   *slog.Logger
	topic []byte

	pub    zmq4.Socket
	replay zmq4.Socket // nil without a replay endpoint

	mu      sync.Mutex
	nextSeq uint64
	// replayable holds the batches the replay socket serves, oldest
	// first, from index head; replayBytes is the size of their payloads.
	replayable  []publishedBatch
	head        int
	replayBytes int
	queue       chan publishedBatch

	dropped atomic.Int64
	runOnce sync.Once
}

type publishedBatch struct {
	seq     uint64
	payload []byte
}

var _ EventSink = (*Publisher)(nil)

// DefaultReplayBufferBytes is PublisherOptions.ReplayBufferBytes' default.
const DefaultReplayBufferBytes = 8 << 20

// pubHighWaterMark bounds the messages the PUB socket queues.
const pubHighWaterMark = 100_000

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
	if opts.ReplayBufferBytes <= 0 {
		opts.ReplayBufferBytes = DefaultReplayBufferBytes
	}
	opts.Clock = clock.Or(opts.Clock)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Publisher{
		opts:       opts,
		log:        log.With("component", "kv-events"),
		topic:      []byte(opts.Topic),
		queue:      make(chan publishedBatch, opts.QueueSize),
		replayable: make([]publishedBatch, 0, min(opts.ReplayBuffer, 1024)),
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
func (p *Publisher) PublishKVEvents(_ time.Duration, events []kvevents.Event) {
	if len(events) == 0 || p.opts.Fault == hruntime.SimKVEventsNone {
		return
	}
	if p.opts.SpecKinds {
		events = withSpecKinds(events)
	}
	if p.opts.ComponentTypes {
		events = withComponentTypes(events)
	}
	if p.opts.Fault == hruntime.SimKVEventsWrongHashSeed {
		events = reseedParents(events)
	}
	batch := &kvevents.Batch{
		TS:     kvevents.Timestamp(p.opts.Clock.Now()),
		DPRank: int64(p.opts.DataParallelRank), HasDPRank: true,
		Events: events,
	}
	var payload []byte
	if p.opts.Fault == hruntime.SimKVEventsUnknownLayout {
		payload = appendUnknownLayout(batch)
	} else {
		payload = kvevents.AppendBatch(nil, batch, p.opts.Format)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	b := publishedBatch{seq: p.nextSeq, payload: payload}
	p.nextSeq++
	p.keepForReplay(b)
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
			// The frames are fresh for each message (the payload is never
			// written again): the socket writes them asynchronously.
			if err := p.pub.SendMulti(zmq4.NewMsgFrom(kvevents.Message(p.topic, b.seq, b.payload)...)); err != nil {
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
		id, start, err := kvevents.ParseReplayRequest(msg.Frames)
		if err != nil {
			p.log.Debug("ignoring replay request", "error", err)
			continue
		}
		for _, b := range p.replayFrom(start) {
			if err := p.replay.SendMulti(zmq4.NewMsgFrom(kvevents.ReplayReply(id, b.seq, b.payload)...)); err != nil {
				p.log.Debug("replay send", "error", err)
				break
			}
		}
		if err := p.replay.SendMulti(zmq4.NewMsgFrom(kvevents.ReplayEndReply(id)...)); err != nil {
			p.log.Debug("replay end marker", "error", err)
		}
	}
}

// keepForReplay adds b to the replay buffer and drops the oldest batches
// beyond its bounds (ReplayBuffer, ReplayBufferBytes); the newest batch is
// always kept. Called with p.mu held.
func (p *Publisher) keepForReplay(b publishedBatch) {
	p.replayable = append(p.replayable, b)
	p.replayBytes += cap(b.payload) // what the batch holds, not what it uses
	for n := len(p.replayable) - p.head; n > 1 && (n > p.opts.ReplayBuffer || p.replayBytes > p.opts.ReplayBufferBytes); n-- {
		p.replayBytes -= cap(p.replayable[p.head].payload)
		p.replayable[p.head] = publishedBatch{} // let its payload go
		p.head++
	}
	// Move the kept batches down once the dropped ones are half the
	// slice, so that it does not grow without end.
	if p.head > len(p.replayable)/2 {
		n := copy(p.replayable, p.replayable[p.head:])
		clear(p.replayable[n:])
		p.replayable, p.head = p.replayable[:n], 0
	}
}

// replayFrom returns the buffered batches with seq >= start, oldest first.
func (p *Publisher) replayFrom(start uint64) []publishedBatch {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.replayable[p.head:]
	i, _ := slices.BinarySearchFunc(kept, start, func(b publishedBatch, seq uint64) int { return cmp.Compare(b.seq, seq) })
	return slices.Clone(kept[i:])
}

// reseedParents returns events with every BlockStored parent hash mixed
// with another seed than the blocks' own hashes (runtime.SimKVEventsWrongHashSeed):
// a parent then names no block the engine stored. events is not modified.
func reseedParents(events []kvevents.Event) []kvevents.Event {
	out := slices.Clone(events)
	for i := range out {
		if out[i].Kind == kvevents.BlockStored && out[i].HasParent {
			out[i].ParentBlockHash = chainSalt(out[i].ParentBlockHash, []byte("another seed"))
		}
	}
	return out
}

// appendUnknownLayout encodes a batch with positional events whose fields
// come in reverse order (runtime.SimKVEventsUnknownLayout), a layout no
// release of either engine publishes: a BlockStored is [tag, medium,
// block_size, token_ids, parent_block_hash, block_hashes].
func appendUnknownLayout(b *kvevents.Batch) []byte {
	events := make([]any, 0, len(b.Events))
	for _, ev := range b.Events {
		switch ev.Kind {
		case kvevents.BlockStored:
			var parent any
			if ev.HasParent {
				parent = ev.ParentBlockHash
			}
			events = append(events, []any{"BlockStored", ev.Medium.String(), ev.BlockSize, ev.TokenIDs, parent, ev.BlockHashes})
		case kvevents.BlockRemoved:
			events = append(events, []any{"BlockRemoved", ev.Medium.String(), ev.BlockHashes})
		default:
			events = append(events, []any{ev.Kind.String()})
		}
	}
	payload, err := msgpack.Marshal([]any{b.TS, events, b.DPRank})
	if err != nil {
		panic(fmt.Sprintf("sim: encoding a batch: %v", err)) // plain values always encode
	}
	return payload
}

// fullAttention is the kind of KV cache the simulator models.
var fullAttention = []byte("full_attention")

// fullComponent is SGLang's component type of full-attention pages.
var fullComponent = []byte("full")

// withComponentTypes returns events with every BlockStored and
// BlockRemoved labelled with its component type
// (PublisherOptions.ComponentTypes). events is not modified.
func withComponentTypes(events []kvevents.Event) []kvevents.Event {
	out := slices.Clone(events)
	for i := range out {
		if (out[i].Kind == kvevents.BlockStored || out[i].Kind == kvevents.BlockRemoved) && len(out[i].ComponentType) == 0 {
			out[i].ComponentType = fullComponent
		}
	}
	return out
}

// withSpecKinds returns events with every BlockStored naming its group's
// kind (PublisherOptions.SpecKinds). events is not modified.
func withSpecKinds(events []kvevents.Event) []kvevents.Event {
	out := slices.Clone(events)
	for i := range out {
		if out[i].Kind == kvevents.BlockStored && len(out[i].SpecKind) == 0 {
			out[i].SpecKind = fullAttention
		}
	}
	return out
}
