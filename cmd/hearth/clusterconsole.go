package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/cluster"
	"github.com/hearth-llm/hearth/console"
)

// clusterPlane is what the console's Cluster page needs of the node's
// cluster plane (a *cluster.Node).
type clusterPlane interface {
	Members() []cluster.Member
	Identity() *cluster.Identity
	Revoke(nodeID string) error
}

// joinQueue is the part of a node that holds machines asking to join until
// the owner answers. The plane has it when it admits discovered machines
// after a code comparison; without it nodes join with a token only, and
// the page lists no requests.
type joinQueue interface {
	AcceptJoin(id string) error
	RejectJoin(id string) error
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
func newClusterConsole(node *cluster.Node, c clusterConfig) clusterConsole {
	return clusterConsole{node: node, inviteAddrs: func() []string {
		host, _, _ := net.SplitHostPort(c.listen)
		ip := net.ParseIP(host)
		if c.advertiseHost != "" || (host != "" && (ip == nil || !ip.IsUnspecified())) {
			return []string{node.ProxyAddr()}
		}
		port := 0
		if a, ok := node.ClusterPort().(*net.TCPAddr); ok {
			port = a.Port
		}
		if addrs := tokenAddrs(nil, c.advertiseIface, port); len(addrs) > 0 {
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
		out.Nodes = append(out.Nodes, clusterNodeOf(m, m.NodeID == out.SelfID))
	}
	out.JoinRequests = joinRequestsOf(s.node)
	return out, nil
}

// clusterNodeOf is a member as the page shows it. A peer's engines carry
// the worker names this node's router gives them ("node/gpuN"); this
// node's own, their local names.
func clusterNodeOf(m cluster.Member, self bool) console.ClusterNode {
	n := console.ClusterNode{ID: m.NodeID, Name: m.Name, Address: m.Proxy, State: string(m.State), Self: self, LastSeen: m.LastSeen}
	for _, g := range m.GPUs {
		n.GPUs = append(n.GPUs, gpuLabel(g))
	}
	for _, e := range m.Engines {
		worker := e.Name
		if !self {
			worker = cluster.RemoteName(m.Heartbeat, e.Name)
		}
		n.Engines = append(n.Engines, console.ClusterEngine{Worker: worker, Model: e.Model, Running: e.Running})
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

// errNoJoinQueue answers an accept or a reject on a plane without a join
// queue.
var errNoJoinQueue = fmt.Errorf("this node's cluster takes no join requests: machines join with a token (hearth up --join TOKEN): %w", errors.ErrUnsupported)

func (s clusterConsole) AcceptJoin(_ context.Context, requestID string) error {
	q, ok := s.node.(joinQueue)
	if !ok {
		return errNoJoinQueue
	}
	return q.AcceptJoin(requestID)
}

func (s clusterConsole) RejectJoin(_ context.Context, requestID string) error {
	q, ok := s.node.(joinQueue)
	if !ok {
		return errNoJoinQueue
	}
	return q.RejectJoin(requestID)
}

// joinRequestsOf lists the machines waiting for the owner, from the
// plane's JoinRequests method when it has one: a slice of structs with
// fields ID, Name, Address, Code (strings) and Received (a time.Time).
// The method is found by reflection because its element type
// (cluster.JoinRequest) is declared by the plane that queues requests; a
// plane without the method, or of another shape, lists none. Once package
// cluster declares that type, joinQueue can name the method and this goes.
func joinRequestsOf(node any) []console.JoinRequest {
	m := reflect.ValueOf(node).MethodByName("JoinRequests")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 || m.Type().Out(0).Kind() != reflect.Slice {
		return nil
	}
	list := m.Call(nil)[0]
	out := make([]console.JoinRequest, 0, list.Len())
	for i := range list.Len() {
		r := reflect.Indirect(list.Index(i))
		if r.Kind() != reflect.Struct {
			return nil
		}
		str := func(name string) string {
			if f := r.FieldByName(name); f.IsValid() && f.Kind() == reflect.String {
				return f.String()
			}
			return ""
		}
		jr := console.JoinRequest{ID: str("ID"), Name: str("Name"), Address: str("Address"), Code: str("Code")}
		if f := r.FieldByName("Received"); f.IsValid() && f.CanInterface() {
			jr.Received, _ = f.Interface().(time.Time)
		}
		if jr.ID == "" {
			continue // nothing to answer it by
		}
		out = append(out, jr)
	}
	return out
}
