package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/clock/clocktest"
	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/nodes"
)

// gameGPUs is a rig's simulated GPUs as a driver that lists processes
// reads them: none but Hearth's at first; then a game that holds memory,
// as much as the test says.
type gameGPUs struct {
	inv  nodes.Inventory
	mu   sync.Mutex
	game uint64
}

func newGameGPUs(t *testing.T, spec string) *gameGPUs {
	t.Helper()
	src, err := daemon.Discoverer("sim", spec)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := src.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &gameGPUs{inv: inv}
}

func (g *gameGPUs) play(bytes uint64) {
	g.mu.Lock()
	g.game = bytes
	g.mu.Unlock()
}

func (g *gameGPUs) Discover(context.Context) (nodes.Inventory, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	inv := g.inv.Copy()
	for i := range inv.GPUs {
		inv.GPUs[i].ProcessesKnown = true
		if g.game > 0 && i == 0 {
			inv.GPUs[i].Processes = []nodes.Process{{PID: 4242, UsedBytes: g.game, Name: "game.exe"}}
		}
	}
	return inv, nil
}

// drainOf is how a's nodes list shows the node named name drained.
func drainOf(t *testing.T, base, name string) string {
	for _, n := range getNodes(t, base).Nodes {
		if n.Name == name {
			return n.Drained
		}
	}
	return "not listed"
}

// TestGameDrainsTheRig: two hearth up --sim daemons on loopback, a and the
// rig b. A game takes 8 GiB of b's GPU (the telemetry's other-process
// memory rises): within 10 s b is drained as the other nodes, the
// console's Cluster page, hearth cluster status and hearth node status
// show; the next turns of a session whose KV is on b's GPU are served by
// a's GPU without an error, on a's API and on b's own; round robin skips
// b. The game quits: once the memory has read free for the hold, b is
// back in routing. hearth node drain and --undo do the same by hand.
func TestGameDrainsTheRig(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: starts two daemons")
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	portA := freePort(t)
	token := clusterToken(t, dirA, "a", fmt.Sprintf("127.0.0.1:%d", portA))
	common := []string{"--sim", "1x4090", "--speedup", "100", "--mdns=false", "--cluster-routes-listen", "127.0.0.1:0", "--policy", "kv"}
	baseA, _ := serveTestUp(t, append(common, "--node", "a", "--data-dir", dirA, "--cluster-listen", fmt.Sprintf("127.0.0.1:%d", portA)))
	rig := newGameGPUs(t, "1x4090")
	hold := 500 * time.Millisecond
	baseB, _ := serveTestUp(t, append(common, "--node", "b", "--data-dir", dirB, "--cluster-listen", "127.0.0.1:0", "--join", token),
		daemon.WithGPUSource(rig), daemon.WithGPUInterval(100*time.Millisecond),
		daemon.WithGPUTakenPolicy(daemon.GPUTakenPolicy{TakenBytes: 1 << 30, FreeBytes: 512 << 20, Hold: hold}))
	for _, base := range []string{baseA, baseB} {
		clocktest.WaitFor(t, base+" to see two nodes up with an engine each", 15*time.Second, func() bool {
			up := 0
			for _, n := range getNodes(t, base).Nodes {
				if n.State == "up" && len(n.Engines) == 1 {
					up++
				}
			}
			return up == 2
		})
	}

	// A session whose context is on b's GPU: its next turn, sent to a,
	// goes back to b for its cached prefix.
	session := strings.Repeat("The rig holds this session's KV cache. ", 60)
	clocktest.WaitFor(t, "a turn served by b/gpu0", 10*time.Second, func() bool {
		w, _ := clusterChat(t, baseA, "round_robin", session)
		return w == "b/gpu0"
	})
	clocktest.WaitFor(t, "a's router to learn b's cached blocks", 10*time.Second, func() bool {
		w, cached := clusterChat(t, baseA, "kv", session)
		return w == "b/gpu0" && cached > 0
	})

	// The game starts.
	started := time.Now()
	rig.play(8 << 30)
	const byGame = "drained (GPU taken by another program)"
	clocktest.WaitFor(t, "a to see b drained", 10*time.Second, func() bool { return drainOf(t, baseA, "b") == byGame })
	t.Logf("b drained in a's view %v after the game took its GPU", time.Since(started).Round(time.Millisecond))
	if got := drainOf(t, baseB, "b"); got != byGame {
		t.Errorf("b's own nodes list shows it %q", got)
	}
	out, err := runCLI(t, "node", "status", "--addr", baseB)
	if err != nil || !strings.Contains(out, byGame) || !strings.Contains(out, "game.exe (PID 4242) holds 8.0 GiB of GPU 0") {
		t.Errorf("hearth node status on b: %v\n%s", err, out)
	}
	out, err = runCLI(t, "cluster", "status", "--addr", baseA)
	if err != nil || !strings.Contains(out, "up, "+byGame) {
		t.Errorf("hearth cluster status on a: %v\n%s", err, out)
	}
	if page := getPage(t, baseA+"/console/cluster"); !strings.Contains(page, byGame) {
		t.Errorf("a's Cluster page does not show b drained:\n%s", page)
	}
	// The session's next turns: served elsewhere, whole, on either node's
	// API; nothing new goes to b.
	for i := range 4 {
		if w, _ := clusterChat(t, baseA, "kv", session); w != "sim/gpu0" {
			t.Fatalf("turn %d of the session sent to a went to %s while b is drained", i, w)
		}
		if w, _ := clusterChat(t, baseB, "kv", session); w != "a/gpu0" {
			t.Fatalf("turn %d of the session sent to b went to %s while b is drained", i, w)
		}
		if w, _ := clusterChat(t, baseA, "round_robin", fmt.Sprintf("another session %d", i)); w != "sim/gpu0" {
			t.Fatalf("round robin sent request %d to %s while b is drained", i, w)
		}
	}

	// The game quits: b returns once its GPU has read free for the hold.
	freed := time.Now()
	rig.play(0)
	clocktest.WaitFor(t, "a to see b back", 10*time.Second, func() bool { return drainOf(t, baseA, "b") == "" })
	if back := time.Since(freed); back < hold {
		t.Errorf("b came back %v after the game quit, before the hold of %v", back, hold)
	}
	clocktest.WaitFor(t, "round robin to reach b/gpu0 again", 10*time.Second, func() bool {
		w, _ := clusterChat(t, baseA, "round_robin", "after the game")
		return w == "b/gpu0"
	})

	// By hand.
	if out, err := runCLI(t, "node", "drain", "--addr", baseB, "--data-dir", dirB); err != nil || !strings.Contains(out, "drained (manual)") {
		t.Fatalf("hearth node drain: %v\n%s", err, out)
	}
	clocktest.WaitFor(t, "a to see b drained by hand", 10*time.Second, func() bool { return drainOf(t, baseA, "b") == "drained (manual)" })
	for i := range 4 {
		if w, _ := clusterChat(t, baseA, "round_robin", fmt.Sprintf("while drained by hand %d", i)); w != "sim/gpu0" {
			t.Fatalf("round robin sent request %d to %s while b is drained by hand", i, w)
		}
	}
	if out, err := runCLI(t, "node", "drain", "--undo", "--addr", baseB, "--data-dir", dirB); err != nil || !strings.Contains(out, "serving") {
		t.Fatalf("hearth node drain --undo: %v\n%s", err, out)
	}
	clocktest.WaitFor(t, "a to see b back after --undo", 10*time.Second, func() bool { return drainOf(t, baseA, "b") == "" })
	// Without the local token a browser's cross-site POST cannot drain.
	req, _ := http.NewRequest(http.MethodPost, baseB+"/api/v1/node/drain", strings.NewReader("x"))
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("drain without the local token: %v %v, want 403", err, resp.Status)
	}
	resp.Body.Close()
	var d adminapi.NodeDrain
	resp, err = http.Get(baseB + "/api/v1/node")
	if err != nil || decodeJSON(resp, &d) != nil || d.Drained {
		t.Errorf("b's drain after --undo: %+v %v", d, err)
	}
}

// getPage reads a page and fails the test unless it answers 200.
func getPage(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return string(b)
}
