package cluster

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock/clocktest"
	"github.com/hearth-llm/hearth/router"
)

// TestNodesWithOneHostNameKeepTheirGPUsApart: three machines that share a
// host name (a distribution's default) each serve a GPU 0. Node a's router
// gets three workers of distinct names, its own and one for each peer's
// GPU, each reaching its own engine.
func TestNodesWithOneHostNameKeepTheirGPUsApart(t *testing.T) {
	nodes, routers := testClusterNamed(t, nil, nil, [3]string{"vm", "vm", "vm"})
	ownEngine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer ownEngine.Close()
	// a's own GPU, as hearth up registers it.
	if _, err := routers[0].AddWorker(router.WorkerInfo{Name: "vm/gpu0", BaseURL: ownEngine.URL, Model: "m", CapacityBlocks: 1000}); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes[1:] {
		engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "engine of %s", n.id.NodeID())
		}))
		defer engine.Close()
		if _, err := n.AddLocalEngine(LocalEngine{Worker: router.WorkerInfo{Name: "vm/gpu0", BaseURL: engine.URL, Model: "m", CapacityBlocks: 1000 + i}}); err != nil {
			t.Fatal(err)
		}
	}
	clocktest.WaitFor(t, "a's router to have three workers", 5*time.Second, func() bool { return len(routers[0].Workers()) == 3 })
	// Let a few more heartbeats pass: the names must stay apart for good.
	time.Sleep(300 * time.Millisecond)
	names := map[string]bool{}
	for _, w := range routers[0].Workers() {
		names[w.Info.Name] = true
	}
	if len(names) != 3 || len(routers[0].Workers()) != 3 {
		t.Fatalf("a's workers: %v (%d), want three distinct names", names, len(routers[0].Workers()))
	}
	for _, n := range nodes[1:] {
		name := n.id.NodeID() + "/gpu0"
		if !names[name] {
			t.Fatalf("no worker %s among %v", name, names)
		}
		resp, err := http.Get(workerURL(t, routers[0], name) + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "engine of " + n.id.NodeID(); string(body) != want {
			t.Errorf("%s answers %q, want %q", name, body, want)
		}
	}
	// The console names them as the router does.
	for _, m := range nodes[0].Members() {
		for _, e := range m.Engines {
			if got := nodes[0].RemoteWorkerName(m, e); !names[got] {
				t.Errorf("console name %s of %s's engine is no worker of a's router %v", got, m.NodeID, names)
			}
		}
	}
}
