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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/clock/clocktest"
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

// namespaceHearth builds the hearth binary the namespaces run, once per
// test process (the labs of parallel tests share it), and returns its path.
func namespaceHearth(t *testing.T) string {
	t.Helper()
	nsBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "hearth-netns-")
		if err != nil {
			nsBuild.err = err
			return
		}
		nsBuild.path = filepath.Join(dir, "hearth")
		if out, err := exec.Command("go", "build", "-o", nsBuild.path, ".").CombinedOutput(); err != nil {
			nsBuild.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if nsBuild.err != nil {
		t.Fatal(nsBuild.err)
	}
	return nsBuild.path
}

var nsBuild struct {
	once sync.Once
	path string
	err  error
}

func newNetnsLab(t *testing.T, n int) *netnsLab {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	l := &netnsLab{t: t, prefix: "hc" + hex.EncodeToString(b), procs: map[string]*exec.Cmd{}, logs: map[string]*syncBuffer{}}
	l.bin = namespaceHearth(t)
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

func (l *netnsLab) nodesOf(i int) adminapi.NodeList {
	out, err := l.run(i, "curl", "-s", "--max-time", "2", "http://127.0.0.1:8000/api/v1/nodes")
	var a adminapi.NodeList
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

// stream starts a streamed turn on node i's API in the background, in
// the OpenAI or the Anthropic dialect, long enough to be in flight when
// the test cuts its GPU's node off. wait returns curl's output: headers,
// then the event stream.
func (l *netnsLab) stream(i int, dialect, text string) (out *syncBuffer, wait func() string) {
	path, body := "/v1/chat/completions", fmt.Sprintf(`{"model":"qwen3-14b-fp8","stream":true,"max_tokens":30000,"messages":[{"role":"user","content":%q}]}`, text)
	if dialect == "anthropic" {
		path, body = "/v1/messages", fmt.Sprintf(`{"model":"qwen3-14b-fp8","stream":true,"max_tokens":30000,"messages":[{"role":"user","content":%q}]}`, text)
	}
	cmd := exec.Command("ip", "netns", "exec", l.nodes[i], "curl", "-sN", "-D", "-", "--max-time", "60", "-H", "Content-Type: application/json",
		"-H", "x-hearth-policy: round_robin", "--data", body, "http://127.0.0.1:8000"+path)
	out = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	return out, func() string { _ = cmd.Wait(); return out.String() }
}

// streamWorker is the x-hearth-worker header in curl -D output.
func streamWorker(out string) string {
	head, _, _ := strings.Cut(out, "\r\n\r\n")
	for _, line := range strings.Split(head, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "x-hearth-worker") {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// servedBy counts the workers in a daemon's request log lines.
func servedBy(log string) map[string]int {
	count := map[string]int{}
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "path=/v1/") {
			continue
		}
		if _, rest, ok := strings.Cut(line, " worker="); ok {
			w, _, _ := strings.Cut(rest, " ")
			count[w]++
		}
	}
	return count
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
// a is served by c's GPU; a wrong token is refused; hearth bench agentic
// through a is served by several nodes' GPUs without an error; a partition
// (c's link down) leaves a serving with a's and b's GPUs and c with its
// own, and the views merge when the link returns; streams in flight on c
// when it is killed end with their dialect's error event, the others
// finish, and c's engine leaves routing within 5 s of its last heartbeat;
// a revoked node is refused by the others.
func TestClusterInNetworkNamespaces(t *testing.T) {
	skipUnderRaceForChildBinaries(t)
	requireNetns(t)
	t.Parallel()
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
	clocktest.WaitFor(t, "a to serve", 60*time.Second, func() bool { return l.stateOn(0, "a") == "up" })

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
	// c's simulated GPU runs in real time, so that a stream on it is still
	// in flight when the test kills c.
	l.start(2, "c", dirs[2], "--join", token, "--speedup", "1")
	for i := range 3 {
		clocktest.WaitFor(t, fmt.Sprintf("node %d to see a, b and c up", i), 60*time.Second, func() bool {
			return l.stateOn(i, "a") == "up" && l.stateOn(i, "b") == "up" && l.stateOn(i, "c") == "up"
		})
	}
	// Real multicast: c's mDNS browse found its peers' announcements.
	clocktest.WaitFor(t, "c to find a peer by mDNS", 30*time.Second, func() bool {
		return strings.Contains(l.logs["c"].String(), "mdns: peer found")
	})

	served := map[string]bool{}
	for i := 0; i < 12 && len(served) < 3; i++ {
		served[l.chat(0, fmt.Sprintf("question %d", i))] = true
	}
	if !served["c/gpu0"] || !served["b/gpu0"] {
		t.Fatalf("a's turns were served by %v; want c/gpu0 and b/gpu0 among them", served)
	}

	// An agentic workload through a's API for a short while: hearth bench
	// agentic --target, every request routed by a's router across the
	// cluster's three GPUs.
	report := filepath.Join(t.TempDir(), "bench.json")
	logBefore := len(l.logs["a"].String())
	benchStart := time.Now()
	out, err = l.run(0, l.bin, "bench", "agentic", "--target", "http://127.0.0.1:8000/v1", "--policies", "hearth",
		"--sessions", "6", "--duration", "15s", "--steps", "4", "--prefix-tokens", "2000", "--osl", "20-40",
		"--tool-pause", "const:100ms", "--json", report)
	if err != nil {
		t.Fatalf("hearth bench agentic --target a: %v\n%s", err, lastLines(out, 30))
	}
	var rep struct {
		Runs []struct {
			Requests int `json:"requests"`
			Errors   int `json:"errors"`
		} `json:"runs"`
	}
	if b, err := os.ReadFile(report); err != nil || json.Unmarshal(b, &rep) != nil || len(rep.Runs) == 0 {
		t.Fatalf("bench report: %v\n%s", err, lastLines(out, 30))
	}
	byWorker := servedBy(l.logs["a"].String()[logBefore:])
	nodesServing := map[string]bool{}
	for w := range byWorker {
		node, _, _ := strings.Cut(w, "/")
		nodesServing[node] = true
	}
	t.Logf("bench agentic through a (%v): %d requests, %d errors, served by %v", time.Since(benchStart).Round(time.Second), rep.Runs[0].Requests, rep.Runs[0].Errors, byWorker)
	// Errors: none, and no request that a did not answer 200.
	var failed []string
	for _, line := range strings.Split(l.logs["a"].String()[logBefore:], "\n") {
		if strings.Contains(line, "msg=request ") && !strings.Contains(line, "status=200") {
			failed = append(failed, line)
		}
	}
	if rep.Runs[0].Requests == 0 || rep.Runs[0].Errors > 0 || len(failed) > 0 {
		t.Fatalf("bench through a: %d requests, %d errors\n%s\nfailed on a:\n%s",
			rep.Runs[0].Requests, rep.Runs[0].Errors, lastLines(out, 30), strings.Join(failed, "\n"))
	}
	if len(nodesServing) < 2 {
		t.Fatalf("the bench's requests were served by the GPUs of %d node(s) only: %v", len(nodesServing), byWorker)
	}

	// A partition: c's link down. a judges c down and keeps serving with
	// a's and b's GPUs; c, alone, judges a and b down and keeps serving
	// what is sent to its own API with its own GPU. Back up, the views
	// merge without a restart.
	if out, err := l.run(2, "ip", "link", "set", "lan0", "down"); err != nil {
		t.Fatalf("link down: %v %s", err, out)
	}
	down := time.Now()
	clocktest.WaitFor(t, "a to see c down", 8*time.Second, func() bool { return l.stateOn(0, "c") == "down" })
	t.Logf("c judged down by a %v after its link went down", time.Since(down).Round(10*time.Millisecond))
	clocktest.WaitFor(t, "c to see a and b down", 8*time.Second, func() bool { return l.stateOn(2, "a") == "down" && l.stateOn(2, "b") == "down" })
	t.Logf("a and b judged down by c %v after its link went down", time.Since(down).Round(10*time.Millisecond))
	seen := map[string]bool{}
	for i := range 4 {
		w := l.chat(0, fmt.Sprintf("while c is away %d", i))
		if w == "c/gpu0" {
			t.Fatal("a routed to c while c was cut off")
		}
		seen[w] = true
	}
	if !seen["sim/gpu0"] || !seen["b/gpu0"] {
		t.Fatalf("during the partition a served with %v; want its own sim/gpu0 and b/gpu0", seen)
	}
	for i := range 3 {
		if w := l.chat(2, fmt.Sprintf("c on its own %d", i)); w != "sim/gpu0" {
			t.Fatalf("during the partition c served its own API's turn with %q; want its own sim/gpu0", w)
		}
	}
	if out, err := l.run(2, "ip", "link", "set", "lan0", "up"); err != nil {
		t.Fatalf("link up: %v %s", err, out)
	}
	l.run(2, "ip", "route", "add", "224.0.0.0/4", "dev", "lan0")
	up := time.Now()
	clocktest.WaitFor(t, "a to see c up again and c to see a and b up", 30*time.Second, func() bool {
		return l.stateOn(0, "c") == "up" && l.stateOn(2, "a") == "up" && l.stateOn(2, "b") == "up"
	})
	t.Logf("views merged %v after c's link returned", time.Since(up).Round(10*time.Millisecond))
	clocktest.WaitFor(t, "a turn to a to be served by c again", 20*time.Second, func() bool {
		return l.chat(0, fmt.Sprintf("after the partition %d", time.Now().UnixNano())) == "c/gpu0"
	})

	// Streams in flight when c dies (kill -9): the ones c's GPU serves end
	// with an error in their client's dialect; the others finish. Turns
	// sent after the kill go elsewhere at once: a dead node's port refuses,
	// and a refused worker is retried on another before any byte.
	type flight struct {
		dialect string
		out     *syncBuffer
		wait    func() string
	}
	var flights []flight
	onCNow := map[string]bool{}
	for i := 0; i < 12 && len(onCNow) < 2; i++ {
		dialect := []string{"openai", "anthropic"}[i%2]
		o, w := l.stream(0, dialect, fmt.Sprintf("a long answer %d", i))
		flights = append(flights, flight{dialect, o, w})
		clocktest.WaitFor(t, "a stream to start", 10*time.Second, func() bool { return streamWorker(o.String()) != "" })
		if streamWorker(o.String()) == "c/gpu0" {
			onCNow[dialect] = true
		}
	}
	l.kill("c")
	killed := time.Now()
	var after string
	for i := 0; ; i++ {
		after = l.chat(0, fmt.Sprintf("right after the kill %d", i))
		if after != "c/gpu0" || i == 3 {
			break
		}
	}
	t.Logf("first turn after kill -9 of c served by %s, %v after the kill", after, time.Since(killed).Round(time.Millisecond))
	if after == "c/gpu0" {
		t.Fatal("a's turns still went to c after its kill")
	}
	onC := 0
	for _, f := range flights {
		got := f.wait()
		w := streamWorker(got)
		done := strings.Contains(got, "data: [DONE]") || strings.Contains(got, "event: message_stop")
		var errEvent bool
		if f.dialect == "openai" {
			errEvent = strings.Contains(got, "data: {\"error\"")
		} else {
			errEvent = strings.Contains(got, "event: error\ndata: {\"type\":\"error\"")
		}
		switch {
		case w == "c/gpu0" && done && !errEvent:
			t.Logf("a %s stream on c finished before the kill", f.dialect)
		case w == "c/gpu0":
			onC++
			if !errEvent || done {
				t.Errorf("a %s stream on c when c died ended without its dialect's error event:\n%s", f.dialect, lastLines(got, 4))
			}
		case !done || errEvent:
			t.Errorf("a %s stream on %s did not finish when c died:\n%s", f.dialect, w, lastLines(got, 4))
		}
	}
	if onC == 0 {
		t.Fatal("none of the streams in flight was on c: the test proves nothing")
	}
	clocktest.WaitFor(t, "a to see c down after kill -9", 7*time.Second, func() bool { return l.stateOn(0, "c") == "down" })
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
	if out, err := l.run(0, l.bin, "cluster", "revoke", idB, "--data-dir", dirs[0]); err != nil {
		t.Fatalf("hearth cluster revoke: %v %s", err, out)
	}
	clocktest.WaitFor(t, "a to see b revoked", 3*time.Second, func() bool { return l.stateOn(0, "b") == "revoked" })
	time.Sleep(300 * time.Millisecond)
	for i := range 4 {
		if w := l.chat(0, fmt.Sprintf("after revoking b %d", i)); w == "b/gpu0" {
			t.Fatal("a routed to a revoked node")
		}
	}
}
