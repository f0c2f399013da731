package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/hearth-llm/hearth/cluster"
	"github.com/hearth-llm/hearth/console"
)

// clusterPlane is what the console's Cluster page needs of the node's
// cluster plane (a *cluster.Node): its members, identity, revocation and
// the machines asking to join until the owner answers.
type clusterPlane interface {
	Members() []cluster.Member
	Identity() *cluster.Identity
	Revoke(nodeID string) error
	JoinRequests() []cluster.JoinRequest
	AcceptJoin(id string) error
	RejectJoin(id string) error
	RemoteWorkerName(cluster.Member, cluster.EngineInfo) string
}

// clusterConsole adapts the node's cluster plane to the console.
type clusterConsole struct {
	node clusterPlane
	// inviteAddrs are the addresses of this node's cluster port that a
	// join token carries.
	inviteAddrs func() []string
}

var _ console.ClusterSource = clusterConsole{}

// newClusterConsole adapts a running node. The token carries the address
// peers dial when the cluster port listens on one address or one is
// advertised; on a wildcard listener, every LAN address on its port, as
// hearth cluster token does.
func newClusterConsole(node *cluster.Node, c ClusterConfig) clusterConsole {
	return clusterConsole{node: node, inviteAddrs: func() []string {
		host, _, _ := net.SplitHostPort(c.Listen)
		ip := net.ParseIP(host)
		if c.AdvertiseHost != "" || (host != "" && (ip == nil || !ip.IsUnspecified())) {
			return []string{node.ProxyAddr()}
		}
		port := 0
		if a, ok := node.ClusterPort().(*net.TCPAddr); ok {
			port = a.Port
		}
		if addrs := TokenAddrs(nil, c.AdvertiseIface, port); len(addrs) > 0 {
			return addrs
		}
		return []string{node.ProxyAddr()}
	}}
}

func (s clusterConsole) Cluster(context.Context) (console.Cluster, error) {
	id := s.node.Identity()
	out := console.Cluster{ID: id.ClusterID(), SelfID: id.NodeID()}
	if id.CanInvite() {
		if tok, err := id.Token(s.inviteAddrs()); err == nil {
			out.JoinToken = tok.String()
		}
	}
	for _, m := range s.node.Members() {
		out.Nodes = append(out.Nodes, clusterNodeOf(m, m.NodeID == out.SelfID, s.node.RemoteWorkerName))
	}
	out.JoinRequests = joinRequestsOf(s.node)
	return out, nil
}

// clusterNodeOf is a member as the page shows it. A peer's engines carry
// the worker names this node's router gives them (workerName: "node/gpuN",
// or the node's id for node where names clash); this node's own, their
// local names.
func clusterNodeOf(m cluster.Member, self bool, workerName func(cluster.Member, cluster.EngineInfo) string) console.ClusterNode {
	n := console.ClusterNode{ID: m.NodeID, Name: m.Name, Address: m.Proxy, State: string(m.State), Self: self, LastSeen: m.LastSeen, Drained: DrainText(m.Drained), Queued: m.Queued}
	for _, g := range m.GPUs {
		n.GPUs = append(n.GPUs, gpuLabel(g))
	}
	for _, e := range m.Engines {
		worker := e.Name
		if !self {
			worker = workerName(m, e)
		}
		n.Engines = append(n.Engines, console.ClusterEngine{Worker: worker, Model: e.Model, Running: e.Running, Full: e.Full})
	}
	return n
}

// gpuLabel names a GPU with its memory: "RTX 4090 24 GiB".
func gpuLabel(g cluster.GPUInfo) string {
	name := strings.TrimPrefix(strings.TrimPrefix(g.Name, "NVIDIA "), "GeForce ")
	if name == "" {
		name = "GPU " + strconv.Itoa(g.Index)
	}
	if g.MemoryMiB <= 0 {
		return name
	}
	return fmt.Sprintf("%s %.0f GiB", name, float64(g.MemoryMiB)/1024)
}

func (s clusterConsole) RevokeNode(_ context.Context, nodeID string) error {
	known := false
	for _, m := range s.node.Members() {
		known = known || m.NodeID == nodeID
	}
	if !known {
		return fmt.Errorf("%w: %q", console.ErrNoSuchNode, nodeID)
	}
	return s.node.Revoke(nodeID)
}

func (s clusterConsole) AcceptJoin(_ context.Context, requestID string) error {
	return joinAnswer(s.node.AcceptJoin(requestID))
}

func (s clusterConsole) RejectJoin(_ context.Context, requestID string) error {
	return joinAnswer(s.node.RejectJoin(requestID))
}

// joinAnswer puts the plane's refusals in the console's words: an unknown
// request id is answered as an unknown node is (404), a node without the
// CA key as one that takes no requests.
func joinAnswer(err error) error {
	switch {
	case errors.Is(err, cluster.ErrNoJoinRequest):
		return fmt.Errorf("%w: %w", console.ErrNoSuchJoinRequest, err)
	case errors.Is(err, cluster.ErrNotInviter):
		return fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
	}
	return err
}

// joinRequestsOf lists the machines waiting for the owner as the page
// shows them.
func joinRequestsOf(node clusterPlane) []console.JoinRequest {
	var out []console.JoinRequest
	for _, r := range node.JoinRequests() {
		out = append(out, console.JoinRequest{ID: r.ID, Name: r.Name, Address: r.Address, Code: r.Code, Received: r.Received})
	}
	return out
}
