package cluster

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock/clocktest"
	"github.com/hearth-llm/hearth/router"
)

// drainedIn reports whether rt holds worker name drained; ok false when
// it holds no such worker.
func drainedIn(rt *router.Router, name string) (drained, ok bool) {
	for _, w := range rt.Workers() {
		if w.Info.Name == name {
			return w.Drained, true
		}
	}
	return false, false
}

// TestDrainedNodeIsDrainedInPeersRouters: a node that drains has its
// engines drained in its peers' routers, kept as the same workers (their
// cached blocks stay), with the reason in its heartbeat; an engine it
// offers while drained arrives drained; undrained, every one returns.
func TestDrainedNodeIsDrainedInPeersRouters(t *testing.T) {
	nodes, routers := testCluster(t)
	a, c := nodes[0], nodes[2]
	engine := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer engine.Close()
	if _, err := c.AddLocalEngine(LocalEngine{Worker: router.WorkerInfo{Name: "c/gpu0", BaseURL: engine.URL, Model: "m", CapacityBlocks: 1000}}); err != nil {
		t.Fatal(err)
	}
	before := waitWorker(t, routers[0], "c/gpu0")

	c.SetDrained("manual")
	clocktest.WaitFor(t, "a's router to drain c/gpu0", 5*time.Second, func() bool {
		d, _ := drainedIn(routers[0], "c/gpu0")
		return d
	})
	if id, _ := routers[0].WorkerByName("c/gpu0"); id != before {
		t.Errorf("c/gpu0 was added again as worker %d (was %d): its index went with it", id, before)
	}
	for _, m := range a.Members() {
		if m.NodeID == c.id.NodeID() && m.Drained != "manual" {
			t.Errorf("a sees c drained %q, want manual", m.Drained)
		}
	}
	if _, err := c.AddLocalEngine(LocalEngine{Worker: router.WorkerInfo{Name: "c/gpu1", BaseURL: engine.URL, Model: "m", CapacityBlocks: 1000}}); err != nil {
		t.Fatal(err)
	}
	waitWorker(t, routers[0], "c/gpu1")
	clocktest.WaitFor(t, "c/gpu1, offered while c is drained, to be drained in a's router", 5*time.Second, func() bool {
		d, _ := drainedIn(routers[0], "c/gpu1")
		return d
	})
	if d, _ := drainedIn(routers[1], "c/gpu0"); !d {
		// b heard the same heartbeat; give it the time a heartbeat takes.
		clocktest.WaitFor(t, "b's router to drain c/gpu0", 5*time.Second, func() bool {
			d, _ := drainedIn(routers[1], "c/gpu0")
			return d
		})
	}

	c.SetDrained("")
	clocktest.WaitFor(t, "a's router to undrain c's engines", 5*time.Second, func() bool {
		d0, ok0 := drainedIn(routers[0], "c/gpu0")
		d1, ok1 := drainedIn(routers[0], "c/gpu1")
		return ok0 && ok1 && !d0 && !d1
	})
}

// TestHeartbeatSaysWhereRequestsWait: a node's heartbeat carries the
// requests its router holds waiting for KV room and, per engine, whether
// its router finds the engine's KV cache full; a peer sees both.
func TestHeartbeatSaysWhereRequestsWait(t *testing.T) {
	nodes, _ := testCluster(t)
	a := nodes[0]
	tok, err := a.id.Token([]string{a.ProxyAddr()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Join(context.Background(), t.TempDir(), "c2", tok)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{
		Identity: res.Identity, Name: "c2", ClusterListen: "127.0.0.1:0", RouteListen: "127.0.0.1:0", Routes: res.Routes, Logger: quietLog(),
		Running: func(name string) (int, bool) { return 5, name == "c/gpu0" },
		Queued:  func() int { return 3 },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	engine := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer engine.Close()
	if _, err := c.AddLocalEngine(LocalEngine{Worker: router.WorkerInfo{Name: "c/gpu0", BaseURL: engine.URL, Model: "m", CapacityBlocks: 1000}}); err != nil {
		t.Fatal(err)
	}
	clocktest.WaitFor(t, "a to hear c's queue and its full engine", 5*time.Second, func() bool {
		for _, m := range a.Members() {
			if m.NodeID == c.id.NodeID() {
				return m.Queued == 3 && len(m.Engines) == 1 && m.Engines[0].Full && m.Engines[0].Running == 5
			}
		}
		return false
	})
}
