package cluster

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock/clocktest"
	"github.com/hearth-llm/hearth/router"
)

// beatClock is a clock whose tickers fire only when the test says: time
// stands still, so no node is ever judged down, and a heartbeat goes out
// only on fire(HeartbeatEvery).
type beatClock struct {
	mu      sync.Mutex
	now     time.Time
	tickers map[time.Duration][]chan time.Time
	beats   int
}

func newBeatClock() *beatClock {
	return &beatClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), tickers: map[time.Duration][]chan time.Time{}}
}

func (c *beatClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *beatClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

func (c *beatClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	c.tickers[d] = append(c.tickers[d], ch)
	c.mu.Unlock()
	return ch, func() {}
}

// fire ticks every ticker of period d once.
func (c *beatClock) fire(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d == HeartbeatEvery {
		c.beats++
	}
	for _, ch := range c.tickers[d] {
		select {
		case ch <- c.now:
		default:
		}
	}
}

func (c *beatClock) heartbeats() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.beats
}

func hasWorker(rt *router.Router, name string) bool {
	_, ok := rt.WorkerByName(name)
	return ok
}

// setLocalEngineState publishes a state change of n's local engine (by
// its worker name), as a node whose fleet reports restarts would: the
// fleet reports only registration and removal, but the plane carries
// states and peers act on them.
func setLocalEngineState(n *Node, name, state string) {
	n.mu.Lock()
	var found *localEngine
	for _, l := range n.local {
		if l.info.Name == name {
			found = l
		}
	}
	if found == nil || found.info.State == state {
		n.mu.Unlock()
		return
	}
	found.info.State = state
	info, gen := found.info, n.nextEngineGenLocked()
	n.mu.Unlock()
	n.publishEngine(state, info, gen)
}

// An engine's registration, state changes and removal reach the peers'
// routers on the engine subject, with no heartbeat in between: the nodes'
// clock makes none after the cluster formed.
func TestEngineChangesReachPeersBeforeTheNextHeartbeat(t *testing.T) {
	clk := newBeatClock()
	nodes, routers := testClusterClock(t, clk, func() { clk.fire(HeartbeatEvery) })
	a, c := nodes[0], nodes[2]
	beats := clk.heartbeats()

	engine := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer engine.Close()
	withdraw, err := c.AddLocalEngine(LocalEngine{Worker: router.WorkerInfo{Name: "c/gpu0", BaseURL: engine.URL, Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	clocktest.WaitFor(t, "a and b to route to c's new engine", 5*time.Second, func() bool {
		return hasWorker(routers[0], "c/gpu0") && hasWorker(routers[1], "c/gpu0")
	})

	setLocalEngineState(c, "c/gpu0", EngineRestarting)
	clocktest.WaitFor(t, "c's restarting engine to leave a's routing", 5*time.Second, func() bool { return !hasWorker(routers[0], "c/gpu0") })
	for _, m := range a.Members() {
		if m.NodeID == c.id.NodeID() && (len(m.Engines) != 1 || m.Engines[0].State != EngineRestarting) {
			t.Fatalf("a's view of c's engines while one restarts: %+v", m.Engines)
		}
	}
	setLocalEngineState(c, "c/gpu0", EngineReady)
	clocktest.WaitFor(t, "c's engine to come back to a's routing when ready", 5*time.Second, func() bool { return hasWorker(routers[0], "c/gpu0") })

	withdraw()
	clocktest.WaitFor(t, "c's removed engine to leave a's and b's routing", 5*time.Second, func() bool {
		return !hasWorker(routers[0], "c/gpu0") && !hasWorker(routers[1], "c/gpu0")
	})
	if got := clk.heartbeats(); got != beats {
		t.Fatalf("%d heartbeats went out during the test: it cannot tell events from heartbeats", got-beats)
	}

	// The heartbeat repairs: an engine whose event a peer missed (here: a
	// node that learns of c only now) is there after c's next heartbeat.
	if _, err := c.AddLocalEngine(LocalEngine{Worker: router.WorkerInfo{Name: "c/gpu1", BaseURL: engine.URL, Model: "m"}}); err != nil {
		t.Fatal(err)
	}
	clocktest.WaitFor(t, "a to route to c/gpu1", 5*time.Second, func() bool { return hasWorker(routers[0], "c/gpu1") })
	a.members.mu.Lock()
	a.members.nodes[c.id.NodeID()].Engines, a.members.nodes[c.id.NodeID()].EngineGen = nil, 0
	a.members.mu.Unlock()
	a.reconcile()
	if hasWorker(routers[0], "c/gpu1") {
		t.Fatal("a still routes to an engine it no longer knows of")
	}
	clk.fire(HeartbeatEvery)
	clocktest.WaitFor(t, "c's heartbeat to bring c/gpu1 back to a", 5*time.Second, func() bool { return hasWorker(routers[0], "c/gpu1") })
}

// An engine event and a heartbeat arrive on different subscriptions and
// may cross: an older heartbeat does not undo a newer event, and a newer
// heartbeat wins.
func TestEngineEventsAndHeartbeatsCross(t *testing.T) {
	m := newMembership()
	now := time.Now()
	x, y := EngineInfo{Name: "gpu0", Incarnation: "x"}, EngineInfo{Name: "gpu1", Incarnation: "y"}
	if m.engineEvent(EngineEvent{NodeID: "n", Gen: 1, State: EngineReady, Engine: x}) {
		t.Fatal("an event of a node never heard from changed routing")
	}
	m.seen(Heartbeat{NodeID: "n", EngineGen: 5, Engines: []EngineInfo{x}}, now)
	if !m.engineEvent(EngineEvent{NodeID: "n", Gen: 6, State: EngineRemoved, Engine: x}) {
		t.Fatal("a removal did not change routing")
	}
	if m.engineEvent(EngineEvent{NodeID: "n", Gen: 4, State: EngineReady, Engine: y}) {
		t.Fatal("an older event was applied")
	}
	if changed := m.seen(Heartbeat{NodeID: "n", EngineGen: 5, Engines: []EngineInfo{x}}, now); changed {
		t.Fatal("a heartbeat older than the removal brought the engine back")
	}
	if got, _ := m.get("n"); len(got.Engines) != 0 {
		t.Fatalf("engines after a stale heartbeat: %+v", got.Engines)
	}
	if changed := m.seen(Heartbeat{NodeID: "n", EngineGen: 7, Engines: []EngineInfo{y}}, now); !changed {
		t.Fatal("a newer heartbeat's engines were not taken")
	}
}

// Each node's router learns the load the other nodes' routers put on the
// cluster's workers, local and remote, and sees it go when they free it.
func TestRoutersShareTheirLoad(t *testing.T) {
	nodes, routers := testCluster(t)
	c := nodes[2]
	engine := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer engine.Close()
	info := router.WorkerInfo{Name: "c/gpu0", BaseURL: engine.URL, Model: "m", CapacityBlocks: 1000}
	if _, err := routers[2].AddWorker(info); err != nil { // c's own router, as c's fleet does
		t.Fatal(err)
	}
	if _, err := c.AddLocalEngine(LocalEngine{Worker: info}); err != nil {
		t.Fatal(err)
	}
	clocktest.WaitFor(t, "a and b to route to c/gpu0", 5*time.Second, func() bool {
		return hasWorker(routers[0], "c/gpu0") && hasWorker(routers[1], "c/gpu0")
	})
	peer := func(rt *router.Router) router.PeerLoad {
		for _, w := range rt.Workers() {
			if w.Info.Name == "c/gpu0" {
				return w.Peer
			}
		}
		return router.PeerLoad{}
	}
	for i := 0; i < 2; i++ {
		if _, err := routers[0].Route(context.Background(), &router.Request{ID: string(rune('p' + i)), Model: "m", PromptTokens: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	clocktest.WaitFor(t, "b's and c's routers to count a's two requests on c/gpu0", 5*time.Second, func() bool {
		return peer(routers[1]).Running == 2 && peer(routers[2]).Running == 2 && peer(routers[2]).PendingPrefillTokens == 2000
	})
	if own := peer(routers[0]); own != (router.PeerLoad{}) {
		t.Fatalf("a counts its own load as a peer's: %+v", own)
	}
	routers[0].Free("p")
	routers[0].Free("q")
	clocktest.WaitFor(t, "b's and c's routers to see a's load gone", 5*time.Second, func() bool {
		return peer(routers[1]) == (router.PeerLoad{}) && peer(routers[2]) == (router.PeerLoad{})
	})
}
