package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock/clocktest"
)

// dropMulticast makes node i's namespace drop every multicast datagram it
// sends or receives (224.0.0.0/4, mDNS's 224.0.0.251 among them), as
// WSL2's NAT and many home routers do.
func (l *netnsLab) dropMulticast(i int) {
	l.t.Helper()
	for _, rule := range [][]string{
		{"add", "table", "ip", "nomcast"},
		{"add", "chain", "ip", "nomcast", "in", "{ type filter hook input priority 0 ; }"},
		{"add", "chain", "ip", "nomcast", "out", "{ type filter hook output priority 0 ; }"},
		{"add", "rule", "ip", "nomcast", "in", "ip", "daddr", "224.0.0.0/4", "counter", "drop"},
		{"add", "rule", "ip", "nomcast", "out", "ip", "daddr", "224.0.0.0/4", "counter", "drop"},
	} {
		if out, err := l.run(i, append([]string{"nft"}, rule...)...); err != nil {
			l.t.Skipf("skipping: nft cannot drop multicast in a namespace here: %v %s", err, out)
		}
	}
}

// multicastDropped is how many multicast datagrams node i's namespace
// dropped.
func (l *netnsLab) multicastDropped(i int) string {
	out, _ := l.run(i, "nft", "list", "chain", "ip", "nomcast", "out")
	if _, rest, ok := strings.Cut(out, "counter packets "); ok {
		n, _, _ := strings.Cut(rest, " ")
		return n
	}
	return "?"
}

// TestClusterFormsWithStaticPeersOnly: three nodes in network namespaces
// whose multicast is dropped, so that mDNS finds nothing, form a cluster
// from --peer alone and route to each other's GPUs; a node that forgot
// its peers comes back with one --peer; the first node, restarted without
// any flag naming a peer, dials the peers it remembers (its data
// directory), is dialled again by the others, and serves their turns.
// After forming and after each restart, every node routes to the GPUs of
// both others.
func TestClusterFormsWithStaticPeersOnly(t *testing.T) {
	skipUnderRaceForChildBinaries(t)
	requireNetns(t)
	if _, err := os.Stat("/usr/sbin/nft"); err != nil {
		t.Skip("skipping: nft is not installed")
	}
	t.Parallel()
	l := newNetnsLab(t, 3)
	defer func() {
		if t.Failed() {
			l.dumpLogs()
		}
	}()
	for i := range 3 {
		l.dropMulticast(i)
	}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	out, err := l.run(0, l.bin, "cluster", "token", "--data-dir", dirs[0], "--node", "a", "--advertise-iface", "lan0")
	if err != nil {
		t.Fatalf("hearth cluster token: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	token := lines[len(lines)-1]

	peers := func(self int) []string {
		var args []string
		for i, addr := range l.addrs {
			if i != self {
				args = append(args, "--peer", addr)
			}
		}
		return args
	}
	l.start(0, "a", dirs[0], peers(0)...)
	clocktest.WaitFor(t, "a to serve", 60*time.Second, func() bool { return l.stateOn(0, "a") == "up" })
	l.start(1, "b", dirs[1], append([]string{"--join", token}, peers(1)...)...)
	l.start(2, "c", dirs[2], append([]string{"--join", token}, peers(2)...)...)
	allUp := func(what string) {
		t.Helper()
		for i := range 3 {
			clocktest.WaitFor(t, fmt.Sprintf("node %d to see a, b and c up %s", i, what), 60*time.Second, func() bool {
				return l.stateOn(i, "a") == "up" && l.stateOn(i, "b") == "up" && l.stateOn(i, "c") == "up"
			})
		}
	}
	allUp("with --peer only")
	servedOn := func(i int, want ...string) {
		t.Helper()
		// A peer's engine joins a node's routing a moment after the
		// peer shows up there: turns go on until each wanted GPU has
		// served one, pausing after the first 16.
		served := map[string]bool{}
		deadline := time.Now().Add(30 * time.Second)
		for n := 0; !all(served, want); n++ {
			if time.Now().After(deadline) {
				t.Fatalf("node %d's %d turns were served by %v; want %v among them", i, n, served, want)
			}
			if n >= 16 {
				time.Sleep(100 * time.Millisecond)
			}
			served[l.chat(i, fmt.Sprintf("turn %d from node %d at %d", n, i, time.Now().UnixNano()))] = true
		}
	}
	// everyRoute checks that each node's turns reach the GPUs of both
	// others (a node calls its own "sim/gpu0", a peer's "name/gpu0").
	everyRoute := func() {
		t.Helper()
		for i := range 3 {
			var others []string
			for j, name := range []string{"a", "b", "c"} {
				if j != i {
					others = append(others, name+"/gpu0")
				}
			}
			servedOn(i, others...)
		}
	}
	everyRoute()
	servedOn(2, "sim/gpu0")

	// b restarts having forgotten its peers, with one --peer: it dials
	// that peer (as its log says) and is back in the cluster.
	l.kill("b")
	clocktest.WaitFor(t, "a to see b down", 10*time.Second, func() bool { return l.stateOn(0, "b") == "down" })
	if err := os.Remove(filepath.Join(dirs[1], "cluster", "routes.json")); err != nil {
		t.Fatalf("b remembered no peer: %v", err)
	}
	l.start(1, "b", dirs[1], "--peer", l.addrs[0])
	clocktest.WaitFor(t, "b to dial a, named by --peer", 60*time.Second, func() bool {
		return strings.Contains(l.logs["b"].String(), "dialling=nats-route://"+l.addrs[0]+":7422")
	})
	allUp("after b's restart with one --peer")
	everyRoute()

	// a, the first node, restarts with no flag naming a peer: it dials the
	// peers it remembers (its data directory), b and c dial it again, and
	// they route to its GPU.
	l.kill("a")
	clocktest.WaitFor(t, "c to see a down", 10*time.Second, func() bool { return l.stateOn(2, "a") == "down" })
	l.start(0, "a", dirs[0])
	clocktest.WaitFor(t, "a to dial the peers it remembers", 60*time.Second, func() bool {
		log := l.logs["a"].String()
		return strings.Contains(log, "nats-route://"+l.addrs[1]+":7422") && strings.Contains(log, "nats-route://"+l.addrs[2]+":7422")
	})
	allUp("after a's restart from its remembered peers")
	everyRoute()

	for i, name := range []string{"a", "b", "c"} {
		if strings.Contains(l.logs[name].String(), "mdns: peer found") {
			t.Errorf("%s found a peer by mDNS: multicast was not dropped", name)
		}
		t.Logf("%s: %s multicast datagrams dropped", name, l.multicastDropped(i))
	}
}

func all(set map[string]bool, want []string) bool {
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}
