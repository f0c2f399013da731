package cluster

import (
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
