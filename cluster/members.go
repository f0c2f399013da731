package cluster

import (
	"sort"
	"sync"
	"time"
)

// Heartbeat timing: every node publishes a heartbeat each HeartbeatEvery;
// a peer not heard from for SuspectAfter is suspect, for DownAfter down and
// out of routing. Ages are measured from local receive times on the local
// clock, never by comparing clocks of two machines.
const (
	HeartbeatEvery = time.Second
	SuspectAfter   = 3 * time.Second
	DownAfter      = 5 * time.Second
)

// State is a node's standing as this node sees it.
type State string

const (
	StateUp      State = "up"
	StateSuspect State = "suspect"
	StateDown    State = "down"
	StateRevoked State = "revoked"
)

// Routable reports whether a node in this state keeps its engines in
// routing: a suspect node does, it may only have lost a heartbeat or two.
func (s State) Routable() bool { return s == StateUp || s == StateSuspect }

// Member is what this node knows of a peer (or of itself).
type Member struct {
	Heartbeat
	State    State
	LastSeen time.Time // local receive time of the latest heartbeat
}

// membership holds the latest heartbeat of each node and judges its state
// from how long ago, on the local clock, it arrived.
type membership struct {
	mu    sync.Mutex
	nodes map[string]*Member
}

func newMembership() *membership { return &membership{nodes: map[string]*Member{}} }

// seen records a heartbeat received at now and reports whether the node
// is new or its engines changed.
func (m *membership) seen(hb Heartbeat, now time.Time) (changed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.nodes[hb.NodeID]
	if !ok {
		m.nodes[hb.NodeID] = &Member{Heartbeat: hb, State: StateUp, LastSeen: now}
		return true
	}
	if cur.State == StateRevoked {
		return false
	}
	if hb.EngineGen < cur.EngineGen && cur.State != StateDown {
		// An engine event overtook this heartbeat: its list is older.
		hb.Engines, hb.EngineGen = cur.Engines, cur.EngineGen
	}
	changed = cur.State == StateDown || !sameEngines(cur.Engines, hb.Engines) || cur.Drained != hb.Drained
	cur.Heartbeat, cur.LastSeen, cur.State = hb, now, StateUp
	return changed
}

// engineEvent applies one engine change of a known node, if it is newer
// than what this node knows of that node's engines, and reports whether
// its routable engines may have changed. A node not heard from yet is left
// to its heartbeat, which says where to reach it.
func (m *membership) engineEvent(ev EngineEvent) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.nodes[ev.NodeID]
	if !ok || cur.State == StateRevoked || ev.Gen <= cur.EngineGen {
		return false
	}
	cur.EngineGen = ev.Gen
	engines := make([]EngineInfo, 0, len(cur.Engines)+1)
	for _, e := range cur.Engines {
		if e.Incarnation != ev.Engine.Incarnation {
			engines = append(engines, e)
		}
	}
	if ev.State != EngineRemoved {
		e := ev.Engine
		e.State = ev.State
		engines = append(engines, e)
		sortEngines(engines)
	}
	cur.Engines = engines
	return cur.State.Routable()
}

// revoke marks a node revoked for good.
func (m *membership) revoke(nodeID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.nodes[nodeID]
	if !ok {
		cur = &Member{Heartbeat: Heartbeat{NodeID: nodeID}}
		m.nodes[nodeID] = cur
	}
	cur.State = StateRevoked
}

// judge updates every node's state for the time now and returns the ids
// of nodes that left the routable states.
func (m *membership) judge(now time.Time, self string) (lost []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, n := range m.nodes {
		if id == self || n.State == StateRevoked {
			continue
		}
		age := now.Sub(n.LastSeen)
		next := StateUp
		switch {
		case age >= DownAfter:
			next = StateDown
		case age >= SuspectAfter:
			next = StateSuspect
		}
		if n.State.Routable() && !next.Routable() {
			lost = append(lost, id)
		}
		n.State = next
	}
	return lost
}

func (m *membership) get(nodeID string) (Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.nodes[nodeID]
	if !ok {
		return Member{}, false
	}
	return *n, true
}

func (m *membership) list() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Member, 0, len(m.nodes))
	for _, n := range m.nodes {
		out = append(out, *n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name+out[i].NodeID < out[j].Name+out[j].NodeID })
	return out
}

func sameEngines(a, b []EngineInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Incarnation != b[i].Incarnation || routableEngine(a[i].State) != routableEngine(b[i].State) {
			return false
		}
	}
	return true
}
