package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/nats-io/nats.go"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/clock/clocktest"
	"github.com/hearth-llm/hearth/kvevents"
	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/tokenizer"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testNode starts a node on loopback with its own router.
func testNode(t testing.TB, id *Identity, name string, routes []string) (*Node, *router.Router) {
	return testNodeClock(t, id, name, routes, nil)
}

// testNodeClock is testNode on a clock of the test's (nil: the real one).
func testNodeClock(t testing.TB, id *Identity, name string, routes []string, clk clock.Clock) (*Node, *router.Router) {
	t.Helper()
	rt, err := router.New(router.Config{Policy: router.PolicyHearth})
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{
		Identity: id, Name: name, ClusterListen: "127.0.0.1:0", RouteListen: "127.0.0.1:0", Routes: routes,
		Workers: rt, Load: rt, Logger: quietLog(), Clock: clk,
		GPUs: func() []GPUInfo { return []GPUInfo{{Index: 0, Name: "RTX 4090", MemoryMiB: 24564}} },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n, rt
}

// waitWorker waits until rt routes to the worker called name and returns
// its id.
func waitWorker(t testing.TB, rt *router.Router, name string) router.WorkerID {
	t.Helper()
	var id router.WorkerID
	clocktest.WaitFor(t, "the router to have "+name, 5*time.Second, func() bool {
		var ok bool
		id, ok = rt.WorkerByName(name)
		return ok
	})
	return id
}

func stateOf(n *Node, nodeID string) State {
	for _, m := range n.Members() {
		if m.NodeID == nodeID {
			return m.State
		}
	}
	return ""
}

// testCluster makes a cluster of three nodes on loopback: a creates it,
// b and c join with its token.
func testCluster(t *testing.T) (nodes [3]*Node, routers [3]*router.Router) {
	t.Helper()
	return testClusterClock(t, nil, nil)
}

// testClusterClock is testCluster on a clock of the test's; while it waits
// for the nodes to see each other it calls beat (when not nil), which is
// where a test's clock makes heartbeats.
func testClusterClock(t *testing.T, clk clock.Clock, beat func()) (nodes [3]*Node, routers [3]*router.Router) {
	t.Helper()
	return testClusterNamed(t, clk, beat, [3]string{"a", "b", "c"})
}

// testClusterNamed is testClusterClock with the nodes' names of the test's.
func testClusterNamed(t *testing.T, clk clock.Clock, beat func(), names [3]string) (nodes [3]*Node, routers [3]*router.Router) {
	t.Helper()
	idA, err := Create(t.TempDir(), names[0])
	if err != nil {
		t.Fatal(err)
	}
	nodes[0], routers[0] = testNodeClock(t, idA, names[0], nil, clk)
	tok, err := idA.Token([]string{nodes[0].ProxyAddr()})
	if err != nil {
		t.Fatal(err)
	}
	tok, err = ParseToken(tok.String())
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range names[1:] {
		res, err := Join(context.Background(), t.TempDir(), name, tok)
		if err != nil {
			t.Fatalf("join %s: %v", name, err)
		}
		if res.Identity.ClusterID() != idA.ClusterID() || res.Identity.CanInvite() {
			t.Fatalf("joined node: cluster %s (want %s), can invite %v", res.Identity.ClusterID(), idA.ClusterID(), res.Identity.CanInvite())
		}
		nodes[i+1], routers[i+1] = testNodeClock(t, res.Identity, name, res.Routes, clk)
	}
	waitAllUp(t, 10*time.Second, beat, nodes[:]...)
	return nodes, routers
}

// waitAllUp waits until every node sees every node up, calling beat (when
// not nil) between looks: where a test's clock makes heartbeats.
func waitAllUp(t testing.TB, d time.Duration, beat func(), nodes ...*Node) {
	t.Helper()
	clocktest.WaitFor(t, "every node to see every node up", d, func() bool {
		if beat != nil {
			beat()
		}
		for _, n := range nodes {
			for _, m := range nodes {
				if stateOf(n, m.id.NodeID()) != StateUp {
					return false
				}
			}
		}
		return true
	})
}

func TestTokenRoundTrip(t *testing.T) {
	tok := Token{Addrs: []string{"192.0.2.1:7443", "[2001:db8::1]:7443"}, Secret: make([]byte, 32)}
	tok.Fingerprint[0], tok.Secret[31] = 7, 9
	got, err := ParseToken("  " + tok.String() + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != tok.String() || len(got.Addrs) != 2 || got.Fingerprint != tok.Fingerprint {
		t.Fatalf("round trip: %+v, want %+v", got, tok)
	}
	for _, bad := range []string{"", "hearth1-", "hearth2-AAAA", tok.String()[:40], "hearth1-!!!!", strings.TrimPrefix(tok.String(), "hearth1-")} {
		if _, err := ParseToken(bad); !errors.Is(err, ErrBadToken) {
			t.Errorf("ParseToken(%q) = %v, want ErrBadToken", bad, err)
		}
	}
}

func FuzzParseToken(f *testing.F) {
	tok := Token{Addrs: []string{"10.0.0.1:7443"}, Secret: make([]byte, 32)}
	f.Add(tok.String())
	f.Add("hearth1-AQ")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseToken(s)
		if err != nil {
			return
		}
		again, err := ParseToken(got.String())
		if err != nil || again.String() != got.String() {
			t.Fatalf("a parsed token does not round-trip: %q → %v", s, err)
		}
	})
}

func TestOnlyTheCreatorInvites(t *testing.T) {
	dir := t.TempDir()
	id, err := Create(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Create(dir, "a"); err == nil {
		t.Fatal("Create overwrote an existing cluster")
	}
	again, err := Load(dir)
	if err != nil || again.NodeID() != id.NodeID() || !again.CanInvite() {
		t.Fatalf("Load: %v, node %s want %s", err, again.NodeID(), id.NodeID())
	}
	if _, err := Load(t.TempDir()); !errors.Is(err, ErrNoCluster) {
		t.Fatalf("Load of an empty dir: %v, want ErrNoCluster", err)
	}
}

// A token with the wrong secret is refused without a certificate; one
// whose fingerprint names another CA never reaches the join handler.
func TestWrongTokensAreRefused(t *testing.T) {
	idA, err := Create(t.TempDir(), "a")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := testNode(t, idA, "a", nil)
	var joins atomic.Int32
	inner := a.clusterSrv.Handler
	a.clusterSrv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == joinPath {
			joins.Add(1)
		}
		inner.ServeHTTP(w, r)
	})
	good, _ := idA.Token([]string{a.ProxyAddr()})

	wrongSecret := good
	wrongSecret.Secret = make([]byte, 32)
	dir := t.TempDir()
	if _, err := Join(context.Background(), dir, "x", wrongSecret); !errors.Is(err, ErrJoinRefused) {
		t.Fatalf("wrong secret: %v, want ErrJoinRefused", err)
	}
	if _, err := Load(dir); !errors.Is(err, ErrNoCluster) {
		t.Fatalf("a refused joiner holds an identity: %v", err)
	}
	if joins.Load() != 1 {
		t.Fatalf("join handler saw %d requests, want 1", joins.Load())
	}

	wrongCA := good
	wrongCA.Fingerprint[0] ^= 1
	if _, err := Join(context.Background(), t.TempDir(), "x", wrongCA); !errors.Is(err, ErrWrongCluster) {
		t.Fatalf("wrong fingerprint: %v, want ErrWrongCluster", err)
	}
	if joins.Load() != 1 {
		t.Fatal("the secret was sent to a server that failed the pin")
	}
}

// Three nodes over loopback: they find each other through the routes the
// join gave, each router gets the others' engines as workers, a request to
// a's forwarder reaches c's engine through c's proxy, and c's KV events
// reach a's index.
func TestClusterRoutesRemoteEngines(t *testing.T) {
	nodes, routers := testCluster(t)
	a, c := nodes[0], nodes[2]

	var served atomic.Int32
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		fmt.Fprintf(w, "engine of c: %s %s", r.Method, r.URL.Path)
	}))
	defer engine.Close()
	pub, kvEndpoint := startPublisher(t)
	withdraw, err := c.AddLocalEngine(LocalEngine{
		Worker:   router.WorkerInfo{Name: "c/gpu0", BaseURL: engine.URL, Model: "m", CapacityBlocks: 1000},
		KVEvents: kvEndpoint,
	})
	if err != nil {
		t.Fatal(err)
	}
	base := workerURL(t, routers[0], "c/gpu0")
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("remote worker's base URL %q is not a loopback forwarder", base)
	}
	for _, m := range a.Members() {
		if m.NodeID == c.id.NodeID() && (len(m.Engines) != 1 || !strings.HasPrefix(m.Engines[0].URL, "https://"+c.ProxyAddr()+"/engine/")) {
			t.Fatalf("c's inventory as a sees it: %+v", m.Engines)
		}
	}
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "engine of c: GET /v1/models" || served.Load() != 1 {
		t.Fatalf("through a's forwarder: %d %q", resp.StatusCode, body)
	}

	// KV events: c's engine stores a block; a's index learns it.
	tokens := make([]uint32, 16)
	for i := range tokens {
		tokens[i] = uint32(100 + i)
	}
	hashes := tokenizer.BlockHashes(tokens, 16)
	id, _ := routers[0].WorkerByName("c/gpu0")
	clocktest.WaitFor(t, "a's index to hold c's block", 5*time.Second, func() bool {
		pub.publishStored(tokens)
		var out [router.MaxWorkers]int
		routers[0].Index().Match(hashes, kvtier.GPU, &out)
		return out[id] == 1
	})

	// The engine withdrawn: it leaves a's routing.
	withdraw()
	clocktest.WaitFor(t, "c/gpu0 to leave a's router", 5*time.Second, func() bool {
		_, ok := routers[0].WorkerByName("c/gpu0")
		return !ok
	})
}

// TestWithdrawnEngineLeavesNoBlocks: an engine withdrawn while its events
// stream leaves nothing in a peer's index: a batch still in the peer's
// subscription when the worker is removed does not reach the index after.
func TestWithdrawnEngineLeavesNoBlocks(t *testing.T) {
	nodes, routers := testCluster(t)
	c := nodes[2]
	pub, kvEndpoint := startPublisher(t)
	withdraw, err := c.AddLocalEngine(LocalEngine{
		Worker:   router.WorkerInfo{Name: "c/gpu0", BaseURL: "http://127.0.0.1:1", Model: "m", CapacityBlocks: 1 << 20},
		KVEvents: kvEndpoint,
	})
	if err != nil {
		t.Fatal(err)
	}
	id := waitWorker(t, routers[0], "c/gpu0")
	holds := func(hashes [][]tokenizer.SeqHash) int {
		n := 0
		for _, h := range hashes {
			var out [router.MaxWorkers]int
			routers[0].Index().Match(h, kvtier.GPU, &out)
			n += out[id]
		}
		return n
	}
	var (
		mu        sync.Mutex
		published [][]tokenizer.SeqHash
	)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tokens := make([]uint32, 16)
		for {
			select {
			case <-stop:
				return
			default:
			}
			tokens[0]++
			pub.publishStored(tokens)
			mu.Lock()
			published = append(published, tokenizer.BlockHashes(tokens, 16))
			mu.Unlock()
			time.Sleep(50 * time.Microsecond)
		}
	}()
	clocktest.WaitFor(t, "c's blocks to stream into a's index", 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return holds(published) > 10
	})
	withdraw()
	clocktest.WaitFor(t, "c/gpu0 to leave a's router", 5*time.Second, func() bool {
		_, ok := routers[0].WorkerByName("c/gpu0")
		return !ok
	})
	close(stop)
	<-stopped
	// Whatever c sent is on a's side once a round trip on c's connection,
	// then one on a's, has returned: the server answers a PING after the
	// messages before it.
	for _, n := range []*Node{c, nodes[0]} {
		if err := n.nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if n := holds(published); n != 0 {
		t.Fatalf("a's index holds %d blocks of the withdrawn worker", n)
	}
}

// A revoked node is refused by every node at once: its heartbeats are
// ignored, its engines leave routing, and its certificate opens no proxy.
func TestRevokedNodeIsRefused(t *testing.T) {
	nodes, routers := testCluster(t)
	a, b, c := nodes[0], nodes[1], nodes[2]
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer engine.Close()
	if _, err := a.AddLocalEngine(LocalEngine{Worker: router.WorkerInfo{Name: "a/gpu0", BaseURL: engine.URL, Model: "m"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddLocalEngine(LocalEngine{Worker: router.WorkerInfo{Name: "c/gpu0", BaseURL: engine.URL, Model: "m"}}); err != nil {
		t.Fatal(err)
	}
	var cBase string
	clocktest.WaitFor(t, "c to route to a/gpu0 and b to c/gpu0", 5*time.Second, func() bool {
		_, okB := routers[1].WorkerByName("c/gpu0")
		for _, w := range routers[2].Workers() {
			if w.Info.Name == "a/gpu0" {
				cBase = w.Info.BaseURL
			}
		}
		return okB && cBase != ""
	})
	if resp, err := http.Get(cBase + "/x"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("before revocation, c reaches a's engine: %v", err)
	}
	revokedAt := time.Now()
	if err := b.Revoke(c.id.NodeID()); err != nil {
		t.Fatal(err)
	}
	clocktest.WaitFor(t, "every node to see c revoked", 2*time.Second, func() bool {
		return stateOf(a, c.id.NodeID()) == StateRevoked && stateOf(b, c.id.NodeID()) == StateRevoked
	})
	clocktest.WaitFor(t, "c/gpu0 out of a's and b's routing", 2*time.Second, func() bool {
		_, okA := routers[0].WorkerByName("c/gpu0")
		_, okB := routers[1].WorkerByName("c/gpu0")
		return !okA && !okB
	})
	t.Logf("revocation reached every node in %v", time.Since(revokedAt))
	// c's own view: it learnt it was revoked, and its certificate opens
	// nothing on a any more.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: c.mutualTLS(a.id.NodeID())}}
	resp, err := client.Get("https://" + a.ProxyAddr() + "/engine/x/y")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a revoked certificate opened a's proxy: %d", resp.StatusCode)
	}
	// A heartbeat c still sends changes nothing: a's handler is given it
	// directly, so that the check follows its handling, not a guess at
	// how long the delivery takes.
	hb, err := json.Marshal(c.heartbeat())
	if err != nil {
		t.Fatal(err)
	}
	a.onHeartbeat(&nats.Msg{Data: hb})
	if stateOf(a, c.id.NodeID()) != StateRevoked {
		t.Fatal("a heartbeat of a revoked node brought it back")
	}
}

// A node whose heartbeats stop is suspect after 3 s and down after 5 s of
// the local clock, and its engines leave routing when it is down.
func TestMembershipJudgesByLocalReceiveTime(t *testing.T) {
	m := newMembership()
	t0 := time.Unix(1000, 0)
	hb := Heartbeat{NodeID: "p", Engines: []EngineInfo{{Name: "p/gpu0", Incarnation: "1"}}}
	if !m.seen(hb, t0) {
		t.Fatal("a new node is a change")
	}
	cases := []struct {
		after time.Duration
		want  State
		lost  bool
	}{
		{2900 * time.Millisecond, StateUp, false},
		{3 * time.Second, StateSuspect, false},
		{4900 * time.Millisecond, StateSuspect, false},
		{5 * time.Second, StateDown, true},
		{9 * time.Second, StateDown, false},
	}
	for _, c := range cases {
		lost := m.judge(t0.Add(c.after), "self")
		got, _ := m.get("p")
		if got.State != c.want || (len(lost) == 1) != c.lost {
			t.Errorf("after %v: state %s lost %v, want %s lost %v", c.after, got.State, lost, c.want, c.lost)
		}
	}
	if !m.seen(hb, t0.Add(10*time.Second)) {
		t.Error("a node back from down is a change")
	}
	if got, _ := m.get("p"); got.State != StateUp {
		t.Errorf("back: %s", got.State)
	}
	m.revoke("p")
	if m.seen(hb, t0.Add(11*time.Second)) {
		t.Error("a revoked node's heartbeat changed something")
	}
	if got, _ := m.get("p"); got.State != StateRevoked {
		t.Errorf("revoked node is %s", got.State)
	}
}

// Killing a node (its plane stops without a word) takes its engines out of
// the others' routing within 5 s of its last heartbeat.
func TestDeadNodeLeavesRouting(t *testing.T) {
	nodes, routers := testCluster(t)
	c := nodes[2]
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer engine.Close()
	if _, err := c.AddLocalEngine(LocalEngine{Worker: router.WorkerInfo{Name: "c/gpu0", BaseURL: engine.URL, Model: "m"}}); err != nil {
		t.Fatal(err)
	}
	clocktest.WaitFor(t, "a to route to c/gpu0", 5*time.Second, func() bool { _, ok := routers[0].WorkerByName("c/gpu0"); return ok })
	killed := time.Now()
	c.Close()
	clocktest.WaitFor(t, "c/gpu0 to leave a's routing", 7*time.Second, func() bool { _, ok := routers[0].WorkerByName("c/gpu0"); return !ok })
	took := time.Since(killed)
	if took < SuspectAfter {
		t.Fatalf("c left routing after %v, before it could be judged down", took)
	}
	if took > DownAfter+1500*time.Millisecond {
		t.Fatalf("c left routing after %v", took)
	}
	if s := stateOf(nodes[0], c.id.NodeID()); s != StateDown {
		t.Fatalf("c is %s on a", s)
	}
	t.Logf("a dead node left routing %v after it stopped", took)
}

// publisher is a minimal engine-side KV event publisher.
type publisher struct {
	sock zmq4.Socket
	mu   sync.Mutex
	seq  uint64
	kept [][]byte // payload by seq, for replay
}

func startPublisher(t testing.TB) (*publisher, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	sock := zmq4.NewPub(ctx)
	if err := sock.Listen("tcp://" + addr); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close(); cancel() })
	return &publisher{sock: sock}, "tcp://" + addr
}

// publishStored publishes a batch storing one block of tokens and returns
// its sequence number.
func (p *publisher) publishStored(tokens []uint32) uint64 {
	seq, payload := p.next(tokens)
	_ = p.sock.Send(zmq4.NewMsgFrom(kvevents.Message(nil, seq, payload)...))
	return seq
}

// nextSeq is the sequence number the next batch will have.
func (p *publisher) nextSeq() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seq
}

// keepOnly numbers a batch and keeps it for replay without sending it: a
// batch lost on the way.
func (p *publisher) keepOnly(tokens []uint32) { p.next(tokens) }

func (p *publisher) next(tokens []uint32) (uint64, []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := kvevents.Batch{TS: kvevents.Timestamp(time.Now()), Events: []kvevents.Event{{
		Kind: kvevents.BlockStored, BlockHashes: []uint64{p.seq + 1}, TokenIDs: tokens, BlockSize: 16,
	}}}
	payload := kvevents.AppendBatch(nil, &b, kvevents.FormatMap)
	seq := p.seq
	p.seq++
	p.kept = append(p.kept, payload)
	return seq, payload
}

// replayServer answers an engine's replay requests (vLLM's ROUTER socket)
// from the batches its publisher kept.
func (p *publisher) serveReplay(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	sock := zmq4.NewRouter(ctx)
	if err := sock.Listen("tcp://" + addr); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close(); cancel() })
	go func() {
		for {
			msg, err := sock.Recv()
			if err != nil {
				return
			}
			id, from, err := kvevents.ParseReplayRequest(msg.Frames)
			if err != nil {
				continue
			}
			p.mu.Lock()
			kept := append([][]byte(nil), p.kept...)
			p.mu.Unlock()
			for seq := from; seq < uint64(len(kept)); seq++ {
				_ = sock.Send(zmq4.NewMsgFrom(kvevents.ReplayReply(id, seq, kept[seq])...))
			}
			_ = sock.Send(zmq4.NewMsgFrom(kvevents.ReplayEndReply(id)...))
		}
	}()
	return "tcp://" + addr
}

// A batch lost between c's engine and a (here: never sent live) is asked
// for by a's ingester when the next batch shows the gap, and c answers
// from its engine's replay socket over the cluster plane.
func TestRelayedGapIsReplayedFromTheOwningNode(t *testing.T) {
	nodes, routers := testCluster(t)
	c := nodes[2]
	pub, kvEndpoint := startPublisher(t)
	replay := pub.serveReplay(t)
	if _, err := c.AddLocalEngine(LocalEngine{
		Worker:   router.WorkerInfo{Name: "c/gpu0", BaseURL: "http://127.0.0.1:1", Model: "m", CapacityBlocks: 1000},
		KVEvents: kvEndpoint, KVReplay: replay,
	}); err != nil {
		t.Fatal(err)
	}
	id := waitWorker(t, routers[0], "c/gpu0")
	block := func(n uint32) ([]uint32, []tokenizer.SeqHash) {
		tokens := make([]uint32, 16)
		for i := range tokens {
			tokens[i] = n*100 + uint32(i)
		}
		return tokens, tokenizer.BlockHashes(tokens, 16)
	}
	held := func(h []tokenizer.SeqHash) bool {
		var out [router.MaxWorkers]int
		routers[0].Index().Match(h, kvtier.GPU, &out)
		return out[id] == 1
	}
	// Live batches until one gets through (the relay's subscription is up).
	n := uint32(1)
	clocktest.WaitFor(t, "a live batch to reach a", 5*time.Second, func() bool {
		tokens, h := block(n)
		pub.publishStored(tokens)
		n++
		time.Sleep(20 * time.Millisecond)
		return held(h)
	})
	lostTokens, lostHashes := block(1000)
	pub.keepOnly(lostTokens) // numbered and kept for replay, never sent live
	nextTokens, nextHashes := block(1001)
	pub.publishStored(nextTokens)
	clocktest.WaitFor(t, "the lost batch to be replayed into a's index", 5*time.Second, func() bool {
		return held(lostHashes) && held(nextHashes)
	})
}

// A node remembers its peers' routes: restarted with no route given and
// no mDNS, it finds its cluster again from them.
func TestRestartedNodeRejoinsFromKnownRoutes(t *testing.T) {
	nodes, _ := testCluster(t)
	a, b := nodes[0], nodes[1]
	clocktest.WaitFor(t, "b to remember its peers' routes", 5*time.Second, func() bool { return len(KnownRoutes(b.id.Dir)) >= 2 })
	b.Close()
	clocktest.WaitFor(t, "a to see b down", 7*time.Second, func() bool { return stateOf(a, b.id.NodeID()) == StateDown })
	id, err := Load(b.id.Dir)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := testNode(t, id, "b", KnownRoutes(id.Dir))
	clocktest.WaitFor(t, "a to see b up again", 10*time.Second, func() bool { return stateOf(a, again.id.NodeID()) == StateUp })
	for _, m := range again.Members() {
		if m.NodeID == a.id.NodeID() && m.State != StateUp {
			t.Fatalf("the restarted b sees a %s", m.State)
		}
	}
}

// workerURL waits until rt has a worker of that name and returns its base
// URL: for a peer's engine, the loopback forwarder.
func workerURL(t testing.TB, rt *router.Router, name string) string {
	t.Helper()
	var base string
	clocktest.WaitFor(t, "the router to have "+name, 5*time.Second, func() bool {
		for _, w := range rt.Workers() {
			if w.Info.Name == name {
				base = w.Info.BaseURL
				return true
			}
		}
		return false
	})
	return base
}
