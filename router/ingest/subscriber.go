package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/go-zeromq/zmq4"
	"golang.org/x/sync/errgroup"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/kvevents"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/zmtp"
)

// SubscriberConfig configures the subscription to one engine's KV events.
type SubscriberConfig struct {
	// Endpoint is the engine's ZMQ PUB endpoint for data-parallel rank 0,
	// as the router dials it, e.g. "tcp://10.0.0.5:5557". Rank r publishes
	// on port+r. Required.
	Endpoint string
	// ReplayEndpoint is the engine's replay ROUTER endpoint for rank 0
	// (rank r: port+r). Empty: no replay, so batches missed while
	// disconnected or dropped by the engine cost the worker's view.
	ReplayEndpoint string
	// Topic is the topic the engine publishes on ("" subscribes to all).
	Topic string
	// Workers maps data-parallel rank r to its worker, Workers[r]; each
	// rank is a worker of its own. At least one.
	Workers []router.WorkerID
	// EventFormat is the engine's payload layout
	// (runtime.EngineKind.EventFormat); the zero value is vLLM's.
	EventFormat kvevents.Format
	// ReplayTimeout bounds the wait for each replayed batch (default 5s).
	ReplayTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between reconnects
	// (defaults 250ms and 30s); it doubles after each failed connection.
	MinBackoff, MaxBackoff time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Clock times the reconnect backoff and the replay timeout (default
	// real time).
	Clock clock.Clock
	// OnDiskStored is every rank's IngesterConfig.OnDiskStored.
	OnDiskStored func(engineHashes []uint64)
}

// Validate reports the first thing wrong with c.
func (c *SubscriberConfig) Validate() error {
	if len(c.Workers) == 0 {
		return errors.New("kv events: no worker for rank 0")
	}
	for r := range c.Workers {
		if _, err := kvRankEndpoint(c.Endpoint, r); err != nil {
			return fmt.Errorf("kv events endpoint: %w", err)
		}
		if c.ReplayEndpoint != "" {
			if _, err := kvRankEndpoint(c.ReplayEndpoint, r); err != nil {
				return fmt.Errorf("kv events replay endpoint: %w", err)
			}
		}
	}
	if c.MinBackoff < 0 || c.MaxBackoff < 0 || c.ReplayTimeout < 0 {
		return errors.New("kv events: negative duration")
	}
	return nil
}

func (c *SubscriberConfig) setDefaults() {
	if c.ReplayTimeout == 0 {
		c.ReplayTimeout = 5 * time.Second
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = 250 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 30 * time.Second
	}
	c.MaxBackoff = max(c.MaxBackoff, c.MinBackoff)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Clock = clock.Or(c.Clock)
}

// kvRankEndpoint returns the endpoint data-parallel rank r uses when rank 0
// uses ep: the TCP port plus r, or an "_dp<r>" suffix for inproc, as vLLM
// and SGLang derive them.
func kvRankEndpoint(ep string, r int) (string, error) {
	scheme, addr, ok := strings.Cut(ep, "://")
	if !ok || addr == "" {
		return "", fmt.Errorf("%q is not a ZMQ endpoint", ep)
	}
	switch scheme {
	case "tcp":
		i := strings.LastIndexByte(addr, ':')
		if i < 0 {
			return "", fmt.Errorf("%q has no port", ep)
		}
		port, err := strconv.Atoi(addr[i+1:])
		if err != nil || port <= 0 || port+r > 65535 {
			return "", fmt.Errorf("%q has no usable port for rank %d", ep, r)
		}
		if r == 0 {
			return ep, nil
		}
		return "tcp://" + addr[:i+1] + strconv.Itoa(port+r), nil
	case "inproc", "ipc":
		if r == 0 {
			return ep, nil
		}
		if scheme == "ipc" {
			return "", fmt.Errorf("%q: engines derive no ipc endpoint for rank %d", ep, r)
		}
		return ep + "_dp" + strconv.Itoa(r), nil
	}
	return "", fmt.Errorf("%q: unsupported transport %q", ep, scheme)
}

// Subscriber follows one engine's KV-event streams, one per data-parallel
// rank, and keeps each rank's worker up to date in the block index.
type Subscriber struct {
	cfg   SubscriberConfig
	ranks []*kvRankSubscriber
}

// kvRankSubscriber follows the stream of one data-parallel rank.
type kvRankSubscriber struct {
	cfg      *SubscriberConfig
	endpoint string
	replay   *zmqReplayer // nil without a replay endpoint
	ing      *Ingester
	log      *slog.Logger
}

// NewSubscriber returns a Subscriber that writes into index. The index must
// be safe for concurrent use: each rank runs on its own goroutine.
func NewSubscriber(cfg SubscriberConfig, index BlockIndex) (*Subscriber, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	s := &Subscriber{cfg: cfg}
	for r, w := range cfg.Workers {
		ep, _ := kvRankEndpoint(cfg.Endpoint, r)
		log := cfg.Logger.With("component", "kvevents", "endpoint", ep, "rank", r)
		rs := &kvRankSubscriber{cfg: &s.cfg, endpoint: ep, log: log}
		var src ReplaySource
		if cfg.ReplayEndpoint != "" {
			rep, _ := kvRankEndpoint(cfg.ReplayEndpoint, r)
			rs.replay = &zmqReplayer{endpoint: rep, timeout: cfg.ReplayTimeout, clock: cfg.Clock}
			src = rs.replay
		}
		rs.ing = NewIngester(IngesterConfig{WorkerID: w, EventFormat: cfg.EventFormat, Logger: log, OnDiskStored: cfg.OnDiskStored}, index, src)
		s.ranks = append(s.ranks, rs)
	}
	return s, nil
}

// Stats returns the counters of each rank's worker, in rank order.
func (s *Subscriber) Stats() []Stats {
	out := make([]Stats, len(s.ranks))
	for i, r := range s.ranks {
		out[i] = r.ing.Stats()
	}
	return out
}

// Ingesters returns each rank's ingester, in rank order, for
// Router.AttachIngester.
func (s *Subscriber) Ingesters() []*Ingester {
	out := make([]*Ingester, len(s.ranks))
	for i, r := range s.ranks {
		out[i] = r.ing
	}
	return out
}

// Run follows the event streams until ctx ends, reconnecting with backoff
// whenever a connection fails. It returns nil when ctx ends.
func (s *Subscriber) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, r := range s.ranks {
		g.Go(func() error { return r.run(ctx) })
	}
	return g.Wait()
}

func (r *kvRankSubscriber) run(ctx context.Context) error {
	backoff := r.cfg.MinBackoff
	for {
		received, err := r.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if received {
			backoff = r.cfg.MinBackoff
		}
		r.log.Warn("kv events: connection lost, reconnecting", "error", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-r.cfg.Clock.After(backoff):
		}
		backoff = min(2*backoff, r.cfg.MaxBackoff)
	}
}

// session connects, syncs the view and applies live batches until the
// connection fails. received reports whether any batch arrived.
func (r *kvRankSubscriber) session(ctx context.Context) (received bool, err error) {
	sub, err := zmtp.Dial(ctx, r.endpoint, zmq4.Sub)
	if err != nil {
		return false, fmt.Errorf("dial: %w", err)
	}
	defer sub.Close()
	// Subscribe before replaying: batches published during the replay then
	// arrive live, and the ingester drops the ones the replay also brought.
	// A ZMTP 3.0 subscription is a message: 1, then the topic.
	if err := sub.Send(append([]byte{1}, r.cfg.Topic...)); err != nil {
		return false, fmt.Errorf("subscribe: %w", err)
	}
	r.log.Info("kv events: connected")
	if err := r.ing.Sync(ctx); err != nil {
		return false, err
	}
	for {
		frames, err := sub.Recv()
		if err != nil {
			return received, fmt.Errorf("receive: %w", err)
		}
		received = true
		seq, payload, err := kvevents.ParseMessage(frames)
		if err != nil {
			r.ing.stats.malformed.Add(1)
			r.log.Debug("kv events: skipping message", "error", err)
			continue
		}
		if err := r.ing.HandleLive(ctx, seq, payload); err != nil {
			return received, err
		}
	}
}

// errReplayTimeout means the engine stopped answering a replay request.
var errReplayTimeout = errors.New("replay timed out")

// zmqReplayer asks an engine's replay ROUTER socket for buffered batches.
type zmqReplayer struct {
	endpoint string
	timeout  time.Duration // longest wait for the next reply
	clock    clock.Clock
}

var _ ReplaySource = (*zmqReplayer)(nil)

// Replay sends a replay request for from over a fresh DEALER connection and
// hands every reply to fn until the end marker.
func (z *zmqReplayer) Replay(ctx context.Context, from uint64, fn func(seq uint64, payload []byte)) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// A watchdog on the injected clock cancels the request when no reply
	// arrives for z.timeout.
	progress, done := make(chan struct{}, 1), make(chan struct{})
	defer close(done)
	timedOut := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-progress:
			case <-z.clock.After(z.timeout):
				close(timedOut)
				cancel()
				return
			}
		}
	}()

	d, err := zmtp.Dial(rctx, z.endpoint, zmq4.Dealer)
	if err != nil {
		select {
		case <-timedOut:
			return errReplayTimeout
		default:
		}
		return fmt.Errorf("replay dial %s: %w", z.endpoint, err)
	}
	defer d.Close()
	if err := d.Send(kvevents.ReplayRequest(from)...); err != nil {
		return fmt.Errorf("replay request: %w", err)
	}
	for {
		frames, err := d.Recv()
		if err != nil {
			select {
			case <-timedOut:
				return errReplayTimeout
			default:
			}
			return fmt.Errorf("replay receive: %w", err)
		}
		select {
		case progress <- struct{}{}:
		default:
		}
		seq, payload, end, err := kvevents.ParseReplayReply(frames)
		if err != nil {
			return fmt.Errorf("replay reply: %w", err)
		}
		if end {
			return nil
		}
		fn(seq, payload)
	}
}
