package console

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hearth-llm/hearth/console/components"
)

// The Cluster page: the LAN cluster's topology, live over SSE like the
// other pages, and the owner's controls. The live part is one fragment
// rendered for every browser, so it never holds what only the owner may
// see: the join token is rendered into the page itself, for an owner
// session only, and the buttons in the fragment are hidden for others (the
// handlers refuse them anyway).

// isOwner reports a session made with the owner's password: the only one
// that may see the join token or change the cluster's membership.
func (c *Console) isOwner(fc *fiber.Ctx) bool {
	keyID, ok := c.logins.get(fc.Cookies(cookieName))
	return ok && keyID == ownerLogin
}

// ownerOnly lets through requests of an owner session. An API key login
// opens the console, not the cluster: a key sits in scripts and other
// machines' configurations, and admitting a machine into the cluster
// hands it the cluster's traffic.
func (c *Console) ownerOnly(fc *fiber.Ctx) error {
	if c.isOwner(fc) {
		return fc.Next()
	}
	return c.clusterAnswer(fc, fiber.StatusForbidden, "", "Only the console's owner can change the cluster: log in with the owner's password.")
}

// clusterVM is the live part of the Cluster page as the source reports it
// at now.
func (c *Console) clusterVM(ctx context.Context, now time.Time) components.ClusterVM {
	vm := components.ClusterVM{Base: c.cfg.BasePath, InCluster: c.cluster != nil}
	if c.cluster == nil {
		return vm
	}
	cl, err := c.cluster.Cluster(ctx)
	if err != nil {
		vm.Err = "Cannot read the cluster: " + err.Error()
		return vm
	}
	return clusterBodyVM(c.cfg, cl, now)
}

// clusterBodyVM lays out a cluster: this node first, then its peers by
// name, each with its state, how long ago it was heard from, its GPUs and
// engines; a map linking this node to every peer; and the requests to
// join, oldest first.
func clusterBodyVM(cfg Config, cl Cluster, now time.Time) components.ClusterVM {
	vm := components.ClusterVM{Base: cfg.BasePath, InCluster: true, ID: cl.ID}
	nodes := slices.Clone(cl.Nodes)
	slices.SortStableFunc(nodes, func(a, b ClusterNode) int {
		if a.Self != b.Self {
			if a.Self {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name+"\x00"+a.ID, b.Name+"\x00"+b.ID)
	})
	counts := map[string]int{}
	for _, n := range nodes {
		counts[n.State]++
		vm.Nodes = append(vm.Nodes, clusterNodeVM(cfg, n, now))
	}
	vm.Summary = clusterSummary(len(nodes), counts)
	vm.Map = clusterMapVM(vm.Nodes)
	reqs := slices.Clone(cl.JoinRequests)
	slices.SortStableFunc(reqs, func(a, b JoinRequest) int { return a.Received.Compare(b.Received) })
	for _, r := range reqs {
		vm.Requests = append(vm.Requests, components.JoinRequestVM{
			DOMID: domID("join-", r.ID), ID: r.ID, Name: r.Name, Address: r.Address, Code: r.Code,
			Received:  fmtSeen(now.Sub(r.Received)),
			AcceptURL: cfg.BasePath + "/cluster/joins/" + url.PathEscape(r.ID) + "/accept",
			RejectURL: cfg.BasePath + "/cluster/joins/" + url.PathEscape(r.ID) + "/reject",
		})
	}
	return vm
}

func clusterNodeVM(cfg Config, n ClusterNode, now time.Time) components.ClusterNodeVM {
	name := n.Name
	if name == "" {
		name = n.ID
	}
	v := components.ClusterNodeVM{
		DOMID: domID("node-", n.ID), ID: n.ID, Name: name, Address: n.Address, State: n.State, StateClass: nodeStateClass(n.State),
		Self: n.Self, GPUs: n.GPUs, Drained: n.Drained, Queued: queuedText(n.Queued),
		// A revoked node stays revoked, and a node does not revoke itself
		// here: hearth cluster leave does that, on the node.
		CanRevoke: !n.Self && n.State != NodeRevoked,
		RevokeURL: cfg.BasePath + "/cluster/nodes/" + url.PathEscape(n.ID) + "/revoke",
	}
	switch {
	case n.Self:
		// Its own heartbeat says nothing; the badge says which it is.
	case n.LastSeen.IsZero():
		v.Seen = "never heard from"
	default:
		v.Seen = "last seen " + fmtSeen(now.Sub(n.LastSeen))
	}
	for _, e := range n.Engines {
		v.Engines = append(v.Engines, components.ClusterEngineVM{Worker: e.Worker, Model: e.Model, Running: e.Running, Full: e.Full})
	}
	return v
}

// nodeStateClass colours a node's state badge.
func nodeStateClass(state string) string {
	switch state {
	case NodeUp:
		return "good"
	case NodeSuspect:
		return "warn"
	case NodeDown, NodeRevoked:
		return "bad"
	}
	return ""
}

// clusterSummary says how many nodes are in each state: "3 nodes: 2 up,
// 1 down".
func clusterSummary(total int, counts map[string]int) string {
	noun := " nodes"
	if total == 1 {
		noun = " node"
	}
	var parts []string
	for _, s := range []string{NodeUp, NodeSuspect, NodeDown, NodeRevoked} {
		if counts[s] > 0 {
			parts = append(parts, strconv.Itoa(counts[s])+" "+s)
		}
	}
	if len(parts) == 0 {
		return strconv.Itoa(total) + noun
	}
	return strconv.Itoa(total) + noun + ": " + strings.Join(parts, ", ")
}

// Geometry of the cluster map, in view-box units: this node on the left,
// its peers in a column on the right, a line from it to each.
const (
	mapWidth   = 640
	mapNodeW   = 150
	mapNodeH   = 40
	mapRowH    = 56
	mapPadding = 12
)

// clusterMapVM draws the links from this node (nodes[0] when it is self)
// to each peer, the line styled by the peer's state.
func clusterMapVM(nodes []components.ClusterNodeVM) components.ClusterMap {
	if len(nodes) == 0 {
		return components.ClusterMap{}
	}
	self, peers := nodes[0], nodes[1:]
	if !self.Self {
		// The source did not list this node: draw the peers alone.
		self, peers = components.ClusterNodeVM{}, nodes
	}
	rows := max(len(peers), 1)
	m := components.ClusterMap{Width: mapWidth, Height: rows*mapRowH + 2*mapPadding - (mapRowH - mapNodeH)}
	selfY := (m.Height - mapNodeH) / 2
	if self.Self {
		m.Nodes = append(m.Nodes, mapNode(self, mapPadding, selfY))
	}
	for i, p := range peers {
		y := mapPadding + i*mapRowH
		m.Nodes = append(m.Nodes, mapNode(p, mapWidth-mapPadding-mapNodeW, y))
		if self.Self {
			m.Links = append(m.Links, components.MapLink{
				X1: mapPadding + mapNodeW, Y1: selfY + mapNodeH/2,
				X2: mapWidth - mapPadding - mapNodeW, Y2: y + mapNodeH/2,
				State: p.State, Title: self.Name + " – " + p.Name + ": " + p.State,
			})
		}
	}
	return m
}

func mapNode(n components.ClusterNodeVM, x, y int) components.MapNode {
	label := n.Name
	if r := []rune(label); len(r) > 18 {
		label = string(r[:17]) + "…"
	}
	return components.MapNode{X: x, Y: y, W: mapNodeW, H: mapNodeH, Label: label, State: n.State, Self: n.Self,
		Href: "#" + n.DOMID, GPUs: strconv.Itoa(len(n.GPUs)) + " GPU" + plural(len(n.GPUs))}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// fmtSeen formats how long ago a heartbeat or request arrived: to the
// second for the first minute, which is what tells a live node (about a
// heartbeat a second) from a suspect (3 s) or a down one (5 s).
func fmtSeen(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + " s ago"
	}
	return fmtAgo(d) + " ago"
}

// clusterPageVM is the Cluster page around its live part: the join token
// for the owner, or why there is none.
func (c *Console) clusterPageVM(fc *fiber.Ctx) components.ClusterPageVM {
	ctx := fc.UserContext()
	vm := components.ClusterPageVM{
		Base: c.cfg.BasePath, Owner: c.isOwner(fc), OwnerSet: c.owner.isSet(), OwnerEnabled: c.owner.enabled(),
		Body: c.clusterVM(ctx, c.clock.Now()),
	}
	if c.cluster == nil {
		return vm
	}
	vm.LiveURL = c.cfg.BasePath + "/events/" + string(TopicCluster)
	if vm.Owner {
		// The token is read apart from the live part: it must reach the
		// owner's page and nothing else.
		if cl, err := c.cluster.Cluster(ctx); err == nil {
			vm.JoinToken = cl.JoinToken
			vm.CanInvite = cl.JoinToken != ""
		}
	}
	return vm
}

func (c *Console) handleCluster(fc *fiber.Ctx) error {
	return c.render(fc, fiber.StatusOK, components.ClusterPage(c.layout(fc, "Cluster", "cluster", ""), c.clusterPageVM(fc)))
}

// clusterAnswer answers a cluster action: htmx gets the message alone, for
// the page's result line (the live part shows the change on its next
// push); a plain form post gets the whole page with it.
func (c *Console) clusterAnswer(fc *fiber.Ctx, status int, notice, problem string) error {
	if fc.Get("HX-Request") == "true" {
		return c.render(fc, status, components.ClusterResult(notice, problem))
	}
	vm := c.clusterPageVM(fc)
	vm.Notice, vm.Problem = notice, problem
	return c.render(fc, status, components.ClusterPage(c.layout(fc, "Cluster", "cluster", ""), vm))
}

// clusterFailure turns a source's error into a status and a message.
func (c *Console) clusterFailure(fc *fiber.Ctx, what string, err error) error {
	status := fiber.StatusInternalServerError
	switch {
	case errors.Is(err, ErrNoSuchNode), errors.Is(err, ErrNoSuchJoinRequest):
		status = fiber.StatusNotFound
	case errors.Is(err, errors.ErrUnsupported):
		status = fiber.StatusNotImplemented
	default:
		c.log.Warn(what, "error", err)
	}
	return c.clusterAnswer(fc, status, "", "Could not "+what+": "+err.Error())
}

func (c *Console) handleRevokeNode(fc *fiber.Ctx) error {
	if c.cluster == nil {
		return c.clusterAnswer(fc, fiber.StatusConflict, "", "This node belongs to no cluster.")
	}
	ctx := fc.UserContext()
	id, ok := pathID(fc)
	if !ok {
		return c.clusterAnswer(fc, fiber.StatusNotFound, "", "No such node.")
	}
	cl, err := c.cluster.Cluster(ctx)
	if err != nil {
		return c.clusterFailure(fc, "read the cluster", err)
	}
	name := id
	for _, n := range cl.Nodes {
		if n.ID != id {
			continue
		}
		if n.Self {
			return c.clusterAnswer(fc, fiber.StatusUnprocessableEntity, "",
				"This is the node this console runs on: to take it out of the cluster, run hearth cluster leave on it.")
		}
		if n.Name != "" {
			name = n.Name
		}
	}
	if err := c.cluster.RevokeNode(ctx, id); err != nil {
		return c.clusterFailure(fc, "revoke node "+name, err)
	}
	c.log.Info("cluster node revoked from the console", "node", id, "name", name)
	return c.clusterAnswer(fc, fiber.StatusOK, "Revoked node "+name+": every node now refuses its certificate and its engines left routing.", "")
}

// pathID is the :id of a cluster action, unescaped (the page escapes ids
// into its URLs; fiber leaves path parameters as sent).
func pathID(fc *fiber.Ctx) (string, bool) {
	id, err := url.PathUnescape(fc.Params("id"))
	return strings.Clone(id), err == nil && id != ""
}

// joinRequest finds a pending request, for the messages' sake.
func (c *Console) joinRequest(ctx context.Context, id string) (JoinRequest, bool) {
	cl, err := c.cluster.Cluster(ctx)
	if err != nil {
		return JoinRequest{}, false
	}
	for _, r := range cl.JoinRequests {
		if r.ID == id {
			return r, true
		}
	}
	return JoinRequest{}, false
}

func (c *Console) handleJoin(accept bool) fiber.Handler {
	verb, act := "reject", func(ctx context.Context, id string) error { return c.cluster.RejectJoin(ctx, id) }
	if accept {
		verb, act = "accept", func(ctx context.Context, id string) error { return c.cluster.AcceptJoin(ctx, id) }
	}
	return func(fc *fiber.Ctx) error {
		if c.cluster == nil {
			return c.clusterAnswer(fc, fiber.StatusConflict, "", "This node belongs to no cluster.")
		}
		ctx := fc.UserContext()
		id, ok := pathID(fc)
		if !ok {
			return c.clusterAnswer(fc, fiber.StatusNotFound, "", "No such join request.")
		}
		who := "the node"
		if r, ok := c.joinRequest(ctx, id); ok && r.Name != "" {
			who = r.Name
			if r.Address != "" {
				who += " (" + r.Address + ")"
			}
		}
		if err := act(ctx, id); err != nil {
			return c.clusterFailure(fc, verb+" "+who, err)
		}
		c.log.Info("cluster join request answered from the console", "request", id, "answer", verb)
		if accept {
			return c.clusterAnswer(fc, fiber.StatusOK, "Accepted "+who+": it receives its certificate and joins the cluster.", "")
		}
		return c.clusterAnswer(fc, fiber.StatusOK, "Rejected "+who+": it gets no certificate.", "")
	}
}

// queuedText says how many requests wait in a node's router for KV room;
// "" when none do.
func queuedText(n int) string {
	switch {
	case n <= 0:
		return ""
	case n == 1:
		return "1 request waits for KV room"
	}
	return strconv.Itoa(n) + " requests wait for KV room"
}
