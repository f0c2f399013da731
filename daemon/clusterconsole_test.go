package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock/clocktest"
	"github.com/hearth-llm/hearth/cluster"
	"github.com/hearth-llm/hearth/console"
)

// startTestNode starts a node's cluster plane on loopback.
func startTestNode(t *testing.T, id *cluster.Identity, name string, routes []string) *cluster.Node {
	t.Helper()
	n, err := cluster.New(cluster.Config{
		Identity: id, Name: name, ClusterListen: "127.0.0.1:0", RouteListen: "127.0.0.1:0", Routes: routes,
		GPUs: func() []cluster.GPUInfo {
			return []cluster.GPUInfo{{Index: 0, Name: "NVIDIA GeForce RTX 4090", MemoryMiB: 24564}}
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

// TestClusterConsoleOfRealNodes adapts two real nodes on loopback: the
// first, which created the cluster, invites with a token that names its
// cluster port and pins its CA; the second cannot invite; a revocation
// from the page reaches the plane, an unknown node is refused, and accept
// says plainly when the plane takes no join requests.
func TestClusterConsoleOfRealNodes(t *testing.T) {
	idA, err := cluster.Create(t.TempDir(), "a")
	if err != nil {
		t.Fatal(err)
	}
	a := startTestNode(t, idA, "a", nil)
	tok, err := idA.Token([]string{a.ProxyAddr()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := cluster.Join(context.Background(), t.TempDir(), "b", tok)
	if err != nil {
		t.Fatal(err)
	}
	b := startTestNode(t, res.Identity, "b", res.Routes)
	srcA := newClusterConsole(a, ClusterConfig{Listen: "127.0.0.1:0"})
	srcB := newClusterConsole(b, ClusterConfig{Listen: "127.0.0.1:0"})
	ctx := context.Background()

	var cl console.Cluster
	clocktest.WaitFor(t, "a to list both nodes up", 10*time.Second, func() bool {
		cl, err = srcA.Cluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		up := 0
		for _, n := range cl.Nodes {
			if n.State == console.NodeUp {
				up++
			}
		}
		return up == 2
	})
	if cl.ID != idA.ClusterID() || cl.SelfID != idA.NodeID() {
		t.Errorf("cluster %s self %s, want %s %s", cl.ID, cl.SelfID, idA.ClusterID(), idA.NodeID())
	}
	for _, n := range cl.Nodes {
		if n.Self != (n.ID == idA.NodeID()) || !slices.Equal(n.GPUs, []string{"RTX 4090 24 GiB"}) || n.Address == "" || n.LastSeen.IsZero() {
			t.Errorf("node %+v", n)
		}
	}
	parsed, err := cluster.ParseToken(cl.JoinToken)
	if err != nil {
		t.Fatalf("the page's token: %v", err)
	}
	if fp := idA.Fingerprint(); parsed.Fingerprint != fp || !slices.Equal(parsed.Addrs, []string{a.ProxyAddr()}) {
		t.Errorf("token pins %x at %v, want %x at %s", parsed.Fingerprint[:4], parsed.Addrs, fp[:4], a.ProxyAddr())
	}
	clB, err := srcB.Cluster(ctx)
	if err != nil || clB.JoinToken != "" {
		t.Errorf("b, which holds no CA key, shows a token %q (%v)", clB.JoinToken, err)
	}

	if err := srcA.RevokeNode(ctx, "no-such-node"); !errors.Is(err, console.ErrNoSuchNode) {
		t.Errorf("revoking an unknown node: %v, want ErrNoSuchNode", err)
	}
	if err := srcA.AcceptJoin(ctx, "jr-1"); !errors.Is(err, console.ErrNoSuchJoinRequest) {
		t.Errorf("accepting an unknown request: %v, want ErrNoSuchJoinRequest", err)
	}
	if err := srcB.AcceptJoin(ctx, "jr-1"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("accepting on b, which holds no CA key: %v, want ErrUnsupported", err)
	}
	if len(cl.JoinRequests) != 0 {
		t.Errorf("join requests %+v where none asked", cl.JoinRequests)
	}
	if err := srcA.RevokeNode(ctx, res.Identity.NodeID()); err != nil {
		t.Fatal(err)
	}
	cl, _ = srcA.Cluster(ctx)
	for _, n := range cl.Nodes {
		if n.ID == res.Identity.NodeID() && n.State != console.NodeRevoked {
			t.Errorf("b after revocation: %s", n.State)
		}
	}
}

func TestClusterNodeOf(t *testing.T) {
	m := cluster.Member{Heartbeat: cluster.Heartbeat{NodeID: "id-b", Name: "b", Proxy: "10.0.0.2:7443",
		GPUs:    []cluster.GPUInfo{{Index: 0, Name: "NVIDIA GeForce RTX 3090", MemoryMiB: 24576}, {Index: 1, Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559}, {Index: 2}},
		Engines: []cluster.EngineInfo{{Name: "sim/gpu1", Model: "qwen3-14b", Running: 3}}}, State: cluster.StateSuspect}
	remoteName := func(m cluster.Member, e cluster.EngineInfo) string { return cluster.RemoteName(m.Heartbeat, e.Name) }
	peer := clusterNodeOf(m, false, remoteName)
	if peer.Engines[0].Worker != "b/gpu1" || peer.Engines[0].Running != 3 || peer.State != "suspect" || peer.Address != "10.0.0.2:7443" {
		t.Errorf("peer %+v", peer)
	}
	if want := []string{"RTX 3090 24 GiB", "H100 80GB HBM3 80 GiB", "GPU 2"}; !slices.Equal(peer.GPUs, want) {
		t.Errorf("GPUs %q, want %q", peer.GPUs, want)
	}
	// This node's engines keep the names its router gives them.
	if self := clusterNodeOf(m, true, remoteName); self.Engines[0].Worker != "sim/gpu1" || !self.Self {
		t.Errorf("self %+v", self)
	}
}

// fakePlane is a cluster plane whose join queue records the answers.
type fakePlane struct {
	clusterPlane
	requests []cluster.JoinRequest
	answered []string
}

func (p *fakePlane) JoinRequests() []cluster.JoinRequest { return p.requests }
func (p *fakePlane) AcceptJoin(id string) error {
	p.answered = append(p.answered, "accept:"+id)
	return nil
}
func (p *fakePlane) RejectJoin(id string) error {
	if id == "gone" {
		return fmt.Errorf("%w: %q", cluster.ErrNoJoinRequest, id)
	}
	p.answered = append(p.answered, "reject:"+id)
	return nil
}

func TestJoinQueueOfPlane(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	p := &fakePlane{requests: []cluster.JoinRequest{{ID: "jr-1", Name: "laptop", Address: "10.0.0.9:7443", Code: "482-193", Received: at}}}
	got := joinRequestsOf(p)
	want := []console.JoinRequest{{ID: "jr-1", Name: "laptop", Address: "10.0.0.9:7443", Code: "482-193", Received: at}}
	if !slices.Equal(got, want) {
		t.Errorf("requests %+v, want %+v", got, want)
	}
	src := clusterConsole{node: p}
	if err := src.AcceptJoin(context.Background(), "jr-1"); err != nil {
		t.Fatal(err)
	}
	if err := src.RejectJoin(context.Background(), "jr-2"); err != nil {
		t.Fatal(err)
	}
	if err := src.RejectJoin(context.Background(), "gone"); !errors.Is(err, console.ErrNoSuchJoinRequest) {
		t.Errorf("an answered request: %v, want ErrNoSuchJoinRequest", err)
	}
	if !slices.Equal(p.answered, []string{"accept:jr-1", "reject:jr-2"}) {
		t.Errorf("answered %v", p.answered)
	}
}

func TestTokenAddrs(t *testing.T) {
	if got := TokenAddrs([]string{"10.0.0.1:7443"}, "", 9999); !slices.Equal(got, []string{"10.0.0.1:7443"}) {
		t.Errorf("named addresses: %v", got)
	}
	for _, a := range TokenAddrs(nil, "", 7555) {
		host, port, err := net.SplitHostPort(a)
		if err != nil || port != strconv.Itoa(7555) || net.ParseIP(host) == nil {
			t.Errorf("LAN address %q", a)
		}
	}
}
