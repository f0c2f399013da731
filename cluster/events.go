package cluster

import (
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hearth-llm/hearth/router"
)

// Engine states in EngineInfo.State and EngineEvent.State. Only a ready
// engine is routable; a restarting or stopped one stays in the owner's
// inventory but leaves its peers' routing until it is ready again.
const (
	EngineReady      = "ready"
	EngineRestarting = "restarting"
	EngineStopped    = "stopped"
	// EngineRemoved is an event's state only: the engine left the
	// inventory.
	EngineRemoved = "removed"
)

// routableEngine reports whether an engine in this state may take
// requests ("" is a heartbeat of a node that predates engine states).
func routableEngine(state string) bool { return state == "" || state == EngineReady }

// EngineEvent is published on hearth.<cluster>.engine the moment one of a
// node's engines is registered, changes state or is removed, so that peers
// add or drop its worker in milliseconds instead of at the next heartbeat.
// Gen orders a node's engine changes: a peer applies an event only if it
// is newer than what it knows, and keeps the engine list of a heartbeat
// only if that is not older, so an event and a heartbeat that cross (they
// arrive on different subscriptions) cannot undo each other. The heartbeat,
// which carries the whole list, repairs whatever event was lost.
type EngineEvent struct {
	NodeID string     `json:"node_id"`
	Gen    uint64     `json:"gen"`
	State  string     `json:"state"`
	Engine EngineInfo `json:"engine"`
}

// LoadReport is published on hearth.<cluster>.load: the load this node's
// router has put on every worker of the cluster (its own requests only),
// by engine incarnation. Sent when it changes, at most every LoadEvery,
// and again every LoadRefresh while it is not zero, so that a peer can
// expire the load of a node that went silent (router.Config.PeerLoadTTL).
type LoadReport struct {
	NodeID string       `json:"node_id"`
	Loads  []EngineLoad `json:"loads"`
}

// EngineLoad is one worker's share of a LoadReport.
type EngineLoad struct {
	Incarnation          string `json:"inc"`
	Running              int    `json:"running,omitempty"`
	ActiveBlocks         int    `json:"blocks,omitempty"`
	PendingPrefillTokens int    `json:"pending,omitempty"`
}

// Load sharing timing: a few reports a second, coalesced; a refresh well
// within router.DefaultPeerLoadTTL.
const (
	LoadEvery   = 250 * time.Millisecond
	LoadRefresh = time.Second
)

// LoadSharing is the local router as load sharing sees it: its own load on
// every worker, and where the other nodes' load goes.
type LoadSharing interface {
	Workers() []router.WorkerLoad
	SetPeerLoad(id router.WorkerID, source string, l router.PeerLoad) bool
}

// nextEngineGenLocked numbers an engine change; n.mu held.
func (n *Node) nextEngineGenLocked() uint64 {
	n.engineGen = max(n.engineGen+1, uint64(n.clock.Now().UnixNano()))
	return n.engineGen
}

// publishEngine tells the peers at once of a change of a local engine.
func (n *Node) publishEngine(state string, e EngineInfo, gen uint64) {
	if n.isStopped() {
		return
	}
	b, err := json.Marshal(EngineEvent{NodeID: n.id.NodeID(), Gen: gen, State: state, Engine: e})
	if err != nil {
		return
	}
	if err := n.nc.Publish(n.subjectBase+".engine", b); err != nil {
		n.log.Debug("cluster: engine event", "error", err)
	}
}

func (n *Node) onEngine(m *nats.Msg) {
	var ev EngineEvent
	if err := json.Unmarshal(m.Data, &ev); err != nil || ev.NodeID == "" || ev.NodeID == n.id.NodeID() || ev.Engine.Incarnation == "" {
		return
	}
	if n.revoked.nodeRevoked(ev.NodeID) {
		return
	}
	if n.members.engineEvent(ev) {
		n.reconcile()
	}
}

// publishLoad sends this node's load report if it changed since the last
// one, or if LoadRefresh passed and it is not zero. last is the previous
// report's loads by incarnation.
func (n *Node) publishLoad(last map[string]EngineLoad, lastAt *time.Time) map[string]EngineLoad {
	if n.cfg.Load == nil {
		return last
	}
	now := n.clock.Now()
	n.mu.Lock()
	if n.selfGone {
		n.mu.Unlock()
		return last
	}
	byName := map[string]string{}
	for inc, l := range n.local {
		byName[l.info.Name] = inc
	}
	byWorker := map[router.WorkerID]string{}
	for inc, r := range n.remote {
		byWorker[r.worker] = inc
	}
	n.mu.Unlock()
	cur := map[string]EngineLoad{}
	for _, w := range n.cfg.Load.Workers() {
		inc, ok := byWorker[w.WorkerID]
		if !ok {
			if inc, ok = byName[w.Info.Name]; !ok {
				continue
			}
		}
		if w.ActiveRequests == 0 && w.ActiveBlocks == 0 && w.PendingPrefillTokens == 0 {
			continue
		}
		cur[inc] = EngineLoad{Incarnation: inc, Running: w.ActiveRequests, ActiveBlocks: w.ActiveBlocks, PendingPrefillTokens: w.PendingPrefillTokens}
	}
	changed := len(cur) != len(last)
	for inc, l := range cur {
		if last[inc] != l {
			changed = true
		}
	}
	if !changed && (len(cur) == 0 || now.Sub(*lastAt) < LoadRefresh) {
		return last
	}
	rep := LoadReport{NodeID: n.id.NodeID()}
	for _, l := range cur {
		rep.Loads = append(rep.Loads, l)
	}
	for inc := range last {
		if _, ok := cur[inc]; !ok {
			rep.Loads = append(rep.Loads, EngineLoad{Incarnation: inc}) // back to zero
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return last
	}
	if err := n.nc.Publish(n.subjectBase+".load", b); err != nil {
		n.log.Debug("cluster: load report", "error", err)
		return last
	}
	*lastAt = now
	return cur
}

func (n *Node) onLoad(m *nats.Msg) {
	if n.cfg.Load == nil {
		return
	}
	var rep LoadReport
	if err := json.Unmarshal(m.Data, &rep); err != nil || rep.NodeID == "" || rep.NodeID == n.id.NodeID() {
		return
	}
	if n.revoked.nodeRevoked(rep.NodeID) {
		return
	}
	var byName map[string]router.WorkerID
	for _, l := range rep.Loads {
		n.mu.Lock()
		id, ok := router.WorkerID(0), false
		if r := n.remote[l.Incarnation]; r != nil {
			id, ok = r.worker, true
		}
		local := n.local[l.Incarnation]
		n.mu.Unlock()
		if !ok && local != nil {
			if byName == nil {
				byName = map[string]router.WorkerID{}
				for _, w := range n.cfg.Load.Workers() {
					byName[w.Info.Name] = w.WorkerID
				}
			}
			id, ok = byName[local.info.Name]
		}
		if ok {
			n.cfg.Load.SetPeerLoad(id, rep.NodeID, router.PeerLoad{Running: l.Running, ActiveBlocks: l.ActiveBlocks, PendingPrefillTokens: l.PendingPrefillTokens})
		}
	}
}
