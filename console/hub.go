package console

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// Topic names one live page's stream.
type Topic string

// The live pages.
const (
	TopicOverview Topic = "overview"
	TopicSessions Topic = "sessions"
	TopicRequests Topic = "requests"
	TopicCluster  Topic = "cluster"
)

var topics = []Topic{TopicOverview, TopicSessions, TopicRequests, TopicCluster}

func knownTopic(t Topic) bool {
	for _, k := range topics {
		if k == t {
			return true
		}
	}
	return false
}

// Errors Subscribe returns.
var (
	ErrHubClosed          = errors.New("console: hub stopped")
	ErrTooManySubscribers = errors.New("console: too many live pages open")
	ErrUnknownTopic       = errors.New("console: unknown topic")
)

// heartbeat is an SSE comment: browsers ignore it, and writing it is how a
// vanished browser is noticed.
var heartbeat = []byte(": ping\n\n")

// producer is called by the hub once per tick: it samples the sources and
// returns the rendered fragment of every topic in want.
type producer func(ctx context.Context, now time.Time, want []Topic, emit func(Topic, []byte))

// Hub samples the sources on a ticker and pushes each live page's fragment
// to the browsers showing it. Publishing never blocks: every subscriber has
// a bounded buffer, and an update that does not fit is dropped and counted
// (the next one replaces the whole fragment anyway).
type Hub struct {
	interval, heartbeat time.Duration
	buffer, maxSubs     int
	clock               clock.Clock
	produce             producer

	mu           sync.Mutex
	subs         map[Topic]map[*Subscription]struct{}
	count        int
	last         map[Topic][]byte // latest frame, for new subscribers
	lastFragment map[Topic][]byte // the fragment of that frame, to skip repeats
	closed       bool
	seq          atomic.Uint64

	// unsubscribed, when set (tests), gets a value each time a subscription
	// ends by Close.
	unsubscribed chan struct{}

	published atomic.Int64 // frames offered to subscribers
	delivered atomic.Int64
	dropped   atomic.Int64
}

// HubStats are the hub's counters since it started.
type HubStats struct {
	Subscribers int
	Published   int64 // frames offered, one per subscriber
	Delivered   int64 // frames that fit a subscriber's buffer
	Dropped     int64 // frames a slow subscriber had no room for
}

func newHub(cfg Config, clk clock.Clock, produce producer) *Hub {
	return &Hub{
		interval:  cfg.Interval,
		heartbeat: cfg.Heartbeat,
		buffer:    cfg.SubscriberBuffer,
		maxSubs:   cfg.MaxSubscribers,
		clock:     clk,
		produce:   produce,
		subs:      make(map[Topic]map[*Subscription]struct{}),
		last:      make(map[Topic][]byte),

		lastFragment: make(map[Topic][]byte),
	}
}

// Run samples and publishes every interval and sends heartbeats until ctx
// ends; then it closes every subscription, which ends their streams.
func (h *Hub) Run(ctx context.Context) error {
	tick, stopTick := h.clock.NewTicker(h.interval)
	defer stopTick()
	beat, stopBeat := h.clock.NewTicker(h.heartbeat)
	defer stopBeat()
	defer h.close()

	h.step(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			h.step(ctx)
		case <-beat:
			h.broadcast(heartbeat)
		}
	}
}

func (h *Hub) step(ctx context.Context) {
	h.mu.Lock()
	want := make([]Topic, 0, len(topics))
	for _, t := range topics {
		if len(h.subs[t]) > 0 {
			want = append(want, t)
		}
	}
	h.mu.Unlock()
	h.produce(ctx, h.clock.Now(), want, h.Publish)
}

// Publish sends fragment as one SSE message to the subscribers of topic.
// A fragment identical to the previous one is not sent again. The hub
// keeps fragment: the caller must not change it afterwards.
func (h *Hub) Publish(topic Topic, fragment []byte) {
	h.mu.Lock()
	if h.closed || len(h.subs[topic]) == 0 || bytes.Equal(h.lastFragment[topic], fragment) && h.last[topic] != nil {
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()

	// Encode outside the lock: subscribing and unsubscribing browsers
	// never wait for a large page to be framed.
	frame := encodeEvent(h.seq.Add(1), fragment)

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || len(h.subs[topic]) == 0 {
		return
	}
	h.last[topic], h.lastFragment[topic] = frame, fragment
	h.sendLocked(h.subs[topic], frame)
}

// broadcast sends a frame to every subscriber of every topic.
func (h *Hub) broadcast(frame []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, subs := range h.subs {
		h.sendLocked(subs, frame)
	}
}

func (h *Hub) sendLocked(subs map[*Subscription]struct{}, frame []byte) {
	for s := range subs {
		h.published.Add(1)
		select {
		case s.ch <- frame:
			h.delivered.Add(1)
		default:
			s.dropped.Add(1)
			h.dropped.Add(1)
		}
	}
}

// Subscribe opens a stream of topic. The latest frame, if any, is queued at
// once so a page rendered a moment ago catches up without waiting a tick.
func (h *Hub) Subscribe(topic Topic) (*Subscription, error) {
	if !knownTopic(topic) {
		return nil, ErrUnknownTopic
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return nil, ErrHubClosed
	case h.count >= h.maxSubs:
		return nil, ErrTooManySubscribers
	}
	s := &Subscription{topic: topic, hub: h, ch: make(chan []byte, h.buffer)}
	if h.subs[topic] == nil {
		h.subs[topic] = make(map[*Subscription]struct{})
	}
	h.subs[topic][s] = struct{}{}
	h.count++
	if f := h.last[topic]; f != nil {
		s.ch <- f
	}
	return s, nil
}

func (h *Hub) unsubscribe(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s.topic][s]; !ok {
		return
	}
	delete(h.subs[s.topic], s)
	h.count--
	if len(h.subs[s.topic]) == 0 {
		// Nobody watches: the next subscriber must not get a stale frame.
		delete(h.last, s.topic)
		delete(h.lastFragment, s.topic)
	}
	close(s.ch)
	if h.unsubscribed != nil {
		h.unsubscribed <- struct{}{}
	}
}

func (h *Hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for t, subs := range h.subs {
		for s := range subs {
			close(s.ch)
		}
		delete(h.subs, t)
	}
	h.count = 0
	clear(h.last)
	clear(h.lastFragment)
}

// Stats returns the hub's counters.
func (h *Hub) Stats() HubStats {
	h.mu.Lock()
	n := h.count
	h.mu.Unlock()
	return HubStats{
		Subscribers: n,
		Published:   h.published.Load(),
		Delivered:   h.delivered.Load(),
		Dropped:     h.dropped.Load(),
	}
}

// Subscription is one browser's stream.
type Subscription struct {
	topic   Topic
	hub     *Hub
	ch      chan []byte
	dropped atomic.Int64
}

// Frames delivers complete SSE messages; it is closed when the subscription
// or the hub ends.
func (s *Subscription) Frames() <-chan []byte { return s.ch }

// Dropped is how many updates this subscriber had no room for.
func (s *Subscription) Dropped() int64 { return s.dropped.Load() }

// Close ends the subscription. It is safe to call more than once.
func (s *Subscription) Close() { s.hub.unsubscribe(s) }

// encodeEvent frames fragment as one unnamed SSE message. Every line
// break (CR, LF or CRLF, all of which end a line in SSE) starts a new data
// line, so the browser reassembles the fragment with LFs.
func encodeEvent(id uint64, fragment []byte) []byte {
	lines := 1 + bytes.Count(fragment, []byte{'\n'}) + bytes.Count(fragment, []byte{'\r'})
	out := make([]byte, 0, len(fragment)+lines*len("data: \n")+32)
	out = append(out, "id: "...)
	out = strconv.AppendUint(out, id, 10)
	out = append(out, "\ndata: "...)
	// Templ output rarely holds a CR; without one the vectorised search
	// for LF does, which matters for large pages.
	hasCR := bytes.IndexByte(fragment, '\r') >= 0
	for {
		var i int
		if hasCR {
			i = bytes.IndexAny(fragment, "\r\n")
		} else {
			i = bytes.IndexByte(fragment, '\n')
		}
		if i < 0 {
			out = append(out, fragment...)
			break
		}
		out = append(out, fragment[:i]...)
		out = append(out, "\ndata: "...)
		if fragment[i] == '\r' && i+1 < len(fragment) && fragment[i+1] == '\n' {
			i++
		}
		fragment = fragment[i+1:]
	}
	return append(out, "\n\n"...)
}
