package router

import "time"

// DefaultPeerLoadTTL is how long a replica's reported load on a worker
// counts when it is not reported again (a replica that went silent: its
// node died or was cut off).
const DefaultPeerLoadTTL = 3 * time.Second

// PeerLoad is the load another router replica has put on a worker: its
// running requests there, the blocks they hold (prompt and expected
// output) and their prompt tokens still waiting for prefill. Replicas on
// different nodes of a cluster route to the same GPUs; each adds the
// others' load to its own when it scores a worker, so that they do not all
// pick the GPU that looks idle to each of them.
type PeerLoad struct {
	Running              int
	ActiveBlocks         int
	PendingPrefillTokens int
}

type peerKey struct {
	worker WorkerID
	source string
}

type peerEntry struct {
	load PeerLoad
	at   time.Time
}

// SetPeerLoad records the load that replica source (a node id) has on
// worker id, replacing what it reported before; the zero load removes it.
// An entry not reported again within Config.PeerLoadTTL expires, checked
// lazily as request expiry is. A worker whose load dropped may take queued
// requests at once. It reports whether the worker is live.
func (r *Router) SetPeerLoad(id WorkerID, source string, l PeerLoad) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if id >= MaxWorkers || r.workers[id] == nil {
		return false
	}
	k := peerKey{id, source}
	old, had := r.peers[k]
	if had {
		r.active.workers[id].addPeer(old.load, -1)
		delete(r.peers, k)
	}
	if l != (PeerLoad{}) {
		if r.peers == nil {
			r.peers = make(map[peerKey]peerEntry)
		}
		r.peers[k] = peerEntry{load: l, at: now}
		r.active.workers[id].addPeer(l, 1)
	}
	r.expireLocked(now)
	return true
}

// expirePeersLocked drops the peer loads not reported for PeerLoadTTL, at
// most every quarter of it.
func (r *Router) expirePeersLocked(now time.Time) {
	if len(r.peers) == 0 || now.Before(r.nextPeerSweep) {
		return
	}
	r.nextPeerSweep = now.Add(r.cfg.PeerLoadTTL / 4)
	for k, e := range r.peers {
		if now.Sub(e.at) >= r.cfg.PeerLoadTTL {
			r.active.workers[k.worker].addPeer(e.load, -1)
			delete(r.peers, k)
		}
	}
}

// dropPeersLocked forgets every replica's load on a worker that left.
func (r *Router) dropPeersLocked(id WorkerID) {
	for k := range r.peers {
		if k.worker == id {
			delete(r.peers, k)
		}
	}
	aw := &r.active.workers[id]
	aw.peerRequests, aw.peerBlocks, aw.peerPending = 0, 0, 0
}

func (aw *activeWorker) addPeer(l PeerLoad, sign int) {
	aw.peerRequests += sign * l.Running
	aw.peerBlocks += sign * l.ActiveBlocks
	aw.peerPending += sign * l.PendingPrefillTokens
}
