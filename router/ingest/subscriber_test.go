package ingest

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/kvevents"
	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/router"
)

// testPublisher plays an engine's event publisher over real ZMQ: a PUB
// socket for live batches and a ROUTER socket that answers replay requests
// from the fake engine's buffer, as vLLM's ZmqEventPublisher does.
type testPublisher struct {
	t      *testing.T
	topic  string
	cancel context.CancelFunc
	pub    zmq4.Socket
	router zmq4.Socket
	served sync.WaitGroup

	mu     sync.Mutex
	engine *fakeEngine
}

// startTestPublisher listens on pubEP and replayEP ("tcp://127.0.0.1:0"
// picks free ports) and returns the publisher with its endpoints.
func startTestPublisher(t *testing.T, pubEP, replayEP, topic string, e *fakeEngine) (p *testPublisher, pubAddr, replayAddr string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p = &testPublisher{t: t, topic: topic, cancel: cancel, engine: e}
	p.pub = zmq4.NewPub(ctx)
	if err := p.pub.Listen(pubEP); err != nil {
		t.Fatalf("pub listen: %v", err)
	}
	p.router = zmq4.NewRouter(ctx)
	if err := p.router.Listen(replayEP); err != nil {
		t.Fatalf("router listen: %v", err)
	}
	p.served.Add(1)
	go p.serveReplay()
	return p, "tcp://" + p.pub.Addr().String(), "tcp://" + p.router.Addr().String()
}

func (p *testPublisher) serveReplay() {
	defer p.served.Done()
	for {
		msg, err := p.router.Recv()
		if err != nil {
			return // closed
		}
		id, from, err := kvevents.ParseReplayRequest(msg.Frames)
		if err != nil {
			p.t.Errorf("bad replay request: %v", err)
			continue
		}
		p.replay(id, from)
	}
}

// replay answers one request. A send fails when the requester has gone
// already, which ends the answer, not the server.
func (p *testPublisher) replay(id []byte, from uint64) {
	p.mu.Lock()
	buffer := slices.Clone(p.engine.buffer)
	p.mu.Unlock()
	for _, b := range buffer {
		if b.seq >= from {
			if err := p.router.Send(zmq4.NewMsgFrom(kvevents.ReplayReply(id, b.seq, b.payload)...)); err != nil {
				return
			}
		}
	}
	_ = p.router.Send(zmq4.NewMsgFrom(kvevents.ReplayEndReply(id)...))
}

// publish makes the engine's next batch; it goes out live only if live.
func (p *testPublisher) publish(live bool, events ...kvevents.Event) {
	p.t.Helper()
	p.mu.Lock()
	b := p.engine.publish(events...)
	p.mu.Unlock()
	if !live {
		return // dropped, as by a PUB socket past its high-water mark
	}
	if err := p.pub.Send(zmq4.NewMsgFrom(kvevents.Message([]byte(p.topic), b.seq, b.payload)...)); err != nil {
		p.t.Fatalf("publish: %v", err)
	}
}

// waitSubscribed waits until the PUB socket has a subscriber for the
// topic; a batch published before that is lost, as with any ZMQ PUB.
func (p *testPublisher) waitSubscribed() {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !slices.Contains(p.pub.(zmq4.Topics).Topics(), p.topic) {
		if time.Now().After(deadline) {
			p.t.Fatal("no subscription arrived")
		}
		runtime.Gosched()
	}
}

func (p *testPublisher) close() {
	p.pub.Close()
	p.router.Close()
	p.cancel()
	p.served.Wait()
}

// gatedClock is a fake clock.Clock for a Subscriber: durations of an hour
// or more never pass (the replay timeout), shorter ones (the reconnect
// backoff) pass when the test lets them through the gate.
type gatedClock struct {
	clock.Real // Now and NewTicker, which a Subscriber does not use
	gate       chan time.Time
}

func (c gatedClock) After(d time.Duration) <-chan time.Time {
	if d >= time.Hour {
		return nil
	}
	return c.gate
}

func TestSubscriberOverZMQ(t *testing.T) {
	const topic = "kv-events"
	const worker router.WorkerID = 7
	seqA := tokenRun(1, 12*16)
	seqB := tokenRun(70000, 4*16)

	e1 := newFakeEngine(10, 1000)
	// Blocks cached before the router subscribes: known only via replay.
	e1.publish(e1.store(seqA, 0, 2, ""))
	e1.publish(e1.store(seqA, 2, 4, ""))
	e1.publish(e1.offload(seqA, 0, 2))
	pub, pubEP, replayEP := startTestPublisher(t, "tcp://127.0.0.1:0", "tcp://127.0.0.1:0", topic, e1)

	idx := newFakeIndex()
	gated := gatedClock{gate: make(chan time.Time)}
	sub, err := NewSubscriber(SubscriberConfig{
		Endpoint:       pubEP,
		ReplayEndpoint: replayEP,
		Topic:          topic,
		Workers:        []router.WorkerID{worker},
		ReplayTimeout:  time.Hour,
		MinBackoff:     time.Millisecond,
		Logger:         testLogger(t),
		Clock:          gated,
	}, idx)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	runErr := make(chan error, 1)
	go func() { runErr <- sub.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()

	viewIs := func(e *fakeEngine) func() bool {
		return func() bool {
			return slices.Equal(idx.view(worker, kvtier.GPU), e.want(kvtier.GPU)) &&
				slices.Equal(idx.view(worker, kvtier.RAM), e.want(kvtier.RAM))
		}
	}
	idx.waitFor(t, "the start-up replay", viewIs(e1))

	// Live batches, one of them lost on the way: the next one reveals the
	// gap and the replay fills it.
	pub.waitSubscribed()
	pub.publish(true, e1.store(seqA, 4, 6, ""))
	pub.publish(false, e1.store(seqA, 6, 8, ""))
	pub.publish(true, e1.store(seqA, 8, 10, ""), e1.remove(seqA, 0, 1, kvtier.GPU))
	idx.waitFor(t, "recovery of the lost batch", viewIs(e1))
	if s := sub.Stats()[0]; s.Gaps != 1 || s.Orphans != 0 || s.WorkerID != worker {
		t.Errorf("after the gap: %+v", s)
	}

	// The engine restarts on the same ports with a fresh sequence and
	// publishes before the router is back.
	pub.close()
	e2 := newFakeEngine(99, 1000)
	e2.publish(e2.store(seqB, 0, 3, ""))
	pub2, _, _ := startTestPublisher(t, pubEP, replayEP, topic, e2)
	defer pub2.close()
	go func() { // let every reconnect backoff pass from now on
		for {
			select {
			case gated.gate <- time.Time{}:
			case <-ctx.Done():
				return
			}
		}
	}()
	idx.waitFor(t, "the view of the restarted engine", viewIs(e2))
	pub2.waitSubscribed()
	pub2.publish(true, e2.store(seqB, 3, 4, ""))
	idx.waitFor(t, "live batches of the restarted engine", viewIs(e2))

	s := sub.Stats()[0]
	if s.Restarts != 1 || s.ViewResets != 1 || s.Malformed != 0 {
		t.Errorf("after the restart: %+v", s)
	}
}

func TestRankEndpoint(t *testing.T) {
	tests := []struct {
		ep   string
		rank int
		want string
		bad  bool
	}{
		{"tcp://10.0.0.5:5557", 0, "tcp://10.0.0.5:5557", false},
		{"tcp://10.0.0.5:5557", 3, "tcp://10.0.0.5:5560", false},
		{"tcp://[::1]:5557", 1, "tcp://[::1]:5558", false},
		{"tcp://host:65535", 1, "", true},
		{"tcp://host", 0, "", true},
		{"tcp://host:port", 0, "", true},
		{"inproc://kv", 2, "inproc://kv_dp2", false},
		{"ipc:///tmp/kv", 0, "ipc:///tmp/kv", false},
		{"ipc:///tmp/kv", 1, "", true},
		{"udp://host:1", 0, "", true},
		{"localhost:5557", 0, "", true},
	}
	for _, tc := range tests {
		got, err := kvRankEndpoint(tc.ep, tc.rank)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("kvRankEndpoint(%q, %d) = %q, %v; want %q, error %v", tc.ep, tc.rank, got, err, tc.want, tc.bad)
		}
	}
}

func TestSubscriberConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  SubscriberConfig
		ok   bool
	}{
		{"one rank", SubscriberConfig{Endpoint: "tcp://h:5557", Workers: []router.WorkerID{1}}, true},
		{"ranks with replay", SubscriberConfig{Endpoint: "tcp://h:5557", ReplayEndpoint: "tcp://h:5600", Workers: []router.WorkerID{1, 2}}, true},
		{"no workers", SubscriberConfig{Endpoint: "tcp://h:5557"}, false},
		{"no endpoint", SubscriberConfig{Workers: []router.WorkerID{1}}, false},
		{"bad replay endpoint", SubscriberConfig{Endpoint: "tcp://h:5557", ReplayEndpoint: "h:1", Workers: []router.WorkerID{1}}, false},
		{"negative backoff", SubscriberConfig{Endpoint: "tcp://h:5557", Workers: []router.WorkerID{1}, MinBackoff: -1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate = %v, want ok %v", err, tc.ok)
			}
		})
	}

	s, err := NewSubscriber(SubscriberConfig{
		Endpoint: "tcp://h:5557", ReplayEndpoint: "tcp://h:5600", Workers: []router.WorkerID{4, 9},
	}, newFakeIndex())
	if err != nil {
		t.Fatal(err)
	}
	r1 := s.ranks[1]
	if r1.endpoint != "tcp://h:5558" || r1.replay.endpoint != "tcp://h:5601" || r1.ing.worker != 9 {
		t.Errorf("rank 1: endpoint %s, replay %s, worker %d", r1.endpoint, r1.replay.endpoint, r1.ing.worker)
	}
	if st := s.Stats(); len(st) != 2 || st[0].WorkerID != 4 || st[1].WorkerID != 9 {
		t.Errorf("Stats = %+v", st)
	}
}
