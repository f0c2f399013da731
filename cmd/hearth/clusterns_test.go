package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/cluster"
)

// netnsLab is three network namespaces, each with one veth (lan0) to a
// bridge in a fourth namespace: a LAN with real multicast that touches
// nothing of the host's.
type netnsLab struct {
	t      *testing.T
	prefix string
	bin    string
	nodes  []string // namespace per node
	addrs  []string // lan0 address per node
	procs  map[string]*exec.Cmd
	logs   map[string]*syncBuffer
}

func requireNetns(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping: builds hearth and runs three daemons in network namespaces")
	}
	if os.Geteuid() != 0 {
		t.Skip("skipping: network namespaces need root")
	}
	for _, tool := range []string{"ip", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s is not installed", tool)
		}
	}
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil {
		t.Skipf("skipping: ip netns does not work here: %v %s", err, out)
	}
}

func (l *netnsLab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func newNetnsLab(t *testing.T, n int) *netnsLab {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	l := &netnsLab{t: t, prefix: "hc" + hex.EncodeToString(b), procs: map[string]*exec.Cmd{}, logs: map[string]*syncBuffer{}}
	l.bin = filepath.Join(t.TempDir(), "hearth")
	if out, err := exec.Command("go", "build", "-o", l.bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	br := l.prefix + "br"
	l.ip("netns", "add", br)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", br).Run() })
	l.ip("-n", br, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
	l.ip("-n", br, "link", "set", "br0", "up")
	for i := 0; i < n; i++ {
		ns := fmt.Sprintf("%sn%d", l.prefix, i)
		l.ip("netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		in, out := fmt.Sprintf("%si%d", l.prefix, i), fmt.Sprintf("%so%d", l.prefix, i)
		l.ip("link", "add", in, "type", "veth", "peer", "name", out)
		l.ip("link", "set", in, "netns", ns)
		l.ip("link", "set", out, "netns", br)
		l.ip("-n", ns, "link", "set", in, "name", "lan0")
		addr := fmt.Sprintf("10.77.0.%d", i+1)
		l.ip("-n", ns, "addr", "add", addr+"/24", "dev", "lan0")
		l.ip("-n", ns, "link", "set", "lan0", "up")
		l.ip("-n", ns, "link", "set", "lo", "up")
		l.ip("-n", ns, "route", "add", "224.0.0.0/4", "dev", "lan0")
		l.ip("-n", br, "link", "set", out, "master", "br0")
		l.ip("-n", br, "link", "set", out, "up")
		l.nodes, l.addrs = append(l.nodes, ns), append(l.addrs, addr)
	}
	return l
}

// exec runs hearth (or any command) in node i's namespace and returns its
// output.
func (l *netnsLab) run(i int, args ...string) (string, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", l.nodes[i]}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// start runs hearth up in node i's namespace. Its API answers on the
// namespace's loopback, where the test asks it; nodes reach each other on
// the cluster ports only.
func (l *netnsLab) start(i int, name, dataDir string, extra ...string) {
	l.t.Helper()
	args := append([]string{"netns", "exec", l.nodes[i], l.bin, "up", "--sim", "1x4090", "--speedup", "100",
		"--node", name, "--data-dir", dataDir, "--listen", "127.0.0.1:8000", "--advertise-iface", "lan0", "--policy", "round_robin"}, extra...)
	cmd := exec.Command("ip", args...)
	buf := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = buf, buf
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	l.procs[name], l.logs[name] = cmd, buf
	l.t.Cleanup(func() { l.kill(name) })
}

// kill ends a node's daemon with SIGKILL: its simulated engines run inside
// it and die with it.
func (l *netnsLab) kill(name string) {
	if cmd := l.procs[name]; cmd != nil && cmd.ProcessState == nil {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}
}

func (l *netnsLab) nodesOf(i int) nodesAnswer {
	out, err := l.run(i, "curl", "-s", "--max-time", "2", "http://127.0.0.1:8000/api/v1/nodes")
	var a nodesAnswer
	if err == nil {
		_ = json.Unmarshal([]byte(out), &a)
	}
	return a
}

func (l *netnsLab) stateOn(i int, name string) string {
	for _, n := range l.nodesOf(i).Nodes {
		if n.Name == name {
			return n.State
		}
	}
	return ""
}

// chat sends a turn to node i's API and returns the worker that served it.
func (l *netnsLab) chat(i int, text string) string {
	l.t.Helper()
	body := fmt.Sprintf(`{"model":"qwen3-14b-fp8","max_tokens":4,"messages":[{"role":"user","content":%q}]}`, text)
	out, err := l.run(i, "curl", "-s", "-o", "/dev/null", "-D", "-", "--max-time", "20", "-H", "Content-Type: application/json",
		"-H", "x-hearth-policy: round_robin", "--data", body, "http://127.0.0.1:8000/v1/chat/completions")
	if err != nil {
		l.t.Fatalf("chat: %v %s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "x-hearth-worker") {
			return strings.TrimSpace(v)
		}
	}
	l.t.Fatalf("chat: no worker in the answer:\n%s", out)
	return ""
}

func (l *netnsLab) dumpLogs() {
	for name, b := range l.logs {
		l.t.Logf("--- %s ---\n%s", name, lastLines(b.String(), 40))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestClusterInNetworkNamespaces runs three hearth up --sim daemons, each
// in its own network namespace on a bridged LAN: b and c join a with its
// token and find each other over real multicast (mDNS); a request sent to
// a is served by c's GPU; a wrong token is refused; c's link going down
// takes it out of a's routing and its return brings it back; a kill -9
// of c takes its engine out of routing within 5 s of its last heartbeat;
// a revoked node is refused by the others.
func TestClusterInNetworkNamespaces(t *testing.T) {
	requireNetns(t)
	l := newNetnsLab(t, 3)
	defer func() {
		if t.Failed() {
			l.dumpLogs()
		}
	}()
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	out, err := l.run(0, l.bin, "cluster", "token", "--data-dir", dirs[0], "--node", "a", "--advertise-iface", "lan0")
	if err != nil {
		t.Fatalf("hearth cluster token: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	token := lines[len(lines)-1]
	if !strings.Contains(out, "10.77.0.1:7443") {
		t.Fatalf("the token names no LAN address:\n%s", out)
	}
	l.start(0, "a", dirs[0])
	waitUntil(t, "a to serve", 60*time.Second, func() bool { return l.stateOn(0, "a") == "up" })

	// A wrong token: refused, and the joiner keeps no identity.
	tok, err := cluster.ParseToken(token)
	if err != nil {
		t.Fatal(err)
	}
	tok.Secret[5] ^= 0x40
	bad, _ := l.run(1, l.bin, "up", "--sim", "1x4090", "--node", "x", "--data-dir", dirs[1], "--listen", "127.0.0.1:0",
		"--advertise-iface", "lan0", "--join", tok.String())
	if !strings.Contains(bad, "join refused") {
		t.Fatalf("a wrong token was not refused:\n%s", lastLines(bad, 10))
	}
	if _, err := os.Stat(filepath.Join(dirs[1], "cluster", "node.pem")); err == nil {
		t.Fatal("a refused joiner holds a certificate")
	}

	l.start(1, "b", dirs[1], "--join", token)
	l.start(2, "c", dirs[2], "--join", token)
	for i := range 3 {
		waitUntil(t, fmt.Sprintf("node %d to see a, b and c up", i), 60*time.Second, func() bool {
			return l.stateOn(i, "a") == "up" && l.stateOn(i, "b") == "up" && l.stateOn(i, "c") == "up"
		})
	}
	// Real multicast: c's mDNS browse found its peers' announcements.
	waitUntil(t, "c to find a peer by mDNS", 30*time.Second, func() bool {
		return strings.Contains(l.logs["c"].String(), "mdns: peer found")
	})

	served := map[string]bool{}
	for i := 0; i < 12 && len(served) < 3; i++ {
		served[l.chat(0, fmt.Sprintf("question %d", i))] = true
	}
	if !served["c/gpu0"] || !served["b/gpu0"] {
		t.Fatalf("a's turns were served by %v; want c/gpu0 and b/gpu0 among them", served)
	}

	// c's link down: a judges it down and stops routing to it; back up,
	// it returns.
	if out, err := l.run(2, "ip", "link", "set", "lan0", "down"); err != nil {
		t.Fatalf("link down: %v %s", err, out)
	}
	down := time.Now()
	waitUntil(t, "a to see c down", 8*time.Second, func() bool { return l.stateOn(0, "c") == "down" })
	t.Logf("c judged down %v after its link went down", time.Since(down).Round(10*time.Millisecond))
	for i := range 4 {
		if w := l.chat(0, fmt.Sprintf("while c is away %d", i)); w == "c/gpu0" {
			t.Fatal("a routed to c while c was down")
		}
	}
	if out, err := l.run(2, "ip", "link", "set", "lan0", "up"); err != nil {
		t.Fatalf("link up: %v %s", err, out)
	}
	l.run(2, "ip", "route", "add", "224.0.0.0/4", "dev", "lan0")
	up := time.Now()
	waitUntil(t, "a to see c up again", 30*time.Second, func() bool { return l.stateOn(0, "c") == "up" })
	t.Logf("c back up %v after its link returned", time.Since(up).Round(10*time.Millisecond))

	// kill -9: c's engine leaves a's routing within 5 s of its last
	// heartbeat (6 s of wall time, a heartbeat period of slack).
	l.kill("c")
	killed := time.Now()
	waitUntil(t, "a to see c down after kill -9", 7*time.Second, func() bool { return l.stateOn(0, "c") == "down" })
	t.Logf("c down %v after kill -9", time.Since(killed).Round(10*time.Millisecond))
	for i := range 4 {
		if w := l.chat(0, fmt.Sprintf("after the kill %d", i)); w == "c/gpu0" {
			t.Fatal("a routed to a killed node")
		}
	}

	// Revoke b through a's API: a and b's peers refuse it.
	var idB string
	for _, n := range l.nodesOf(0).Nodes {
		if n.Name == "b" {
			idB = n.ID
		}
	}
	if out, err := l.run(0, l.bin, "cluster", "revoke", idB); err != nil {
		t.Fatalf("hearth cluster revoke: %v %s", err, out)
	}
	waitUntil(t, "a to see b revoked", 3*time.Second, func() bool { return l.stateOn(0, "b") == "revoked" })
	time.Sleep(300 * time.Millisecond)
	for i := range 4 {
		if w := l.chat(0, fmt.Sprintf("after revoking b %d", i)); w == "b/gpu0" {
			t.Fatal("a routed to a revoked node")
		}
	}
}
