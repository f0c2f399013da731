package router

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/tokenizer"
)

// WorkerID identifies one engine instance the router can send requests to.
// A data-parallel rank of an engine is a worker of its own. IDs are small
// integers handed out by the router's registry, so per-worker state can live
// in slices and bitsets instead of maps keyed by strings.
type WorkerID uint32

// WorkerInfo describes a worker when it joins.
type WorkerInfo struct {
	Name string
	// BaseURL is where the worker's engine serves (its OpenAI API root);
	// decisions carry it to the gateway.
	BaseURL string
	// Model is the model the worker serves; a request for another model
	// never goes to it. "" serves any request (a simulation with one
	// model).
	Model string
	// CapacityBlocks is the worker's KV cache size in blocks (vLLM's
	// num_gpu_blocks); 0 if unknown, which turns off capacity terms.
	CapacityBlocks int
	// PrefillTokensPerSec is the worker's measured or configured prefill
	// speed; 0 takes HearthConfig.DefaultPrefillTokensPerSec. Only the
	// hearth policy uses it, so a 3090 next to a 4090 is weighed right.
	PrefillTokensPerSec float64
	// RAMCapacityBlocks is the size of the worker's host-RAM KV tier in
	// blocks (vLLM's --kv-offloading-size over the block size); 0 if it has
	// none or it is unknown.
	RAMCapacityBlocks int
	// BlockBytes is the size of one KV block (all layers' K and V) and
	// LoadBytesPerSec the worker's host-to-device bandwidth: together they
	// price loading blocks from host RAM. Either 0 turns the hearth
	// policy's RAM term off (RAM blocks then cost a recompute, as with no
	// tier).
	BlockBytes      int
	LoadBytesPerSec float64
	// Node names the machine the worker runs on. Workers with the same
	// non-empty Node and the same Model share the node's disk KV tier (one
	// directory per machine): a block one of them writes to disk is
	// loadable by all of them, and a block the node evicts is gone for
	// all of them.
	Node string
	// DiskLoadBytesPerSec is the read bandwidth of the disk tier. A disk
	// block goes SSD → host buffer → GPU, so the hearth policy prices it at
	// BlockBytes/DiskLoadBytesPerSec + BlockBytes/LoadBytesPerSec: the two
	// copies in series, an upper bound on a pipelined load, which a
	// read-ahead overlaps at best to the slower of the two. The SSD term
	// dominates (3–7 GB/s against 25+ GB/s), so the bound overstates a disk
	// load by a fifth at most. Any of BlockBytes, LoadBytesPerSec and
	// DiskLoadBytesPerSec 0: disk blocks cost a recompute.
	DiskLoadBytesPerSec float64
	// Approximate marks a worker that publishes no KV events: the router
	// predicts its cache from its own decisions.
	Approximate bool
}

type workerState struct {
	info         WorkerInfo
	gauges       workerGauges
	pausedBlocks int // blocks of idle sessions whose last worker this is
	// The rate at which the worker's running requests release KV blocks,
	// an exponentially weighted sum of the blocks freed (releaseAcc, as of
	// releaseAt) since the first release (releaseSince); see releaseRate.
	releaseAcc   float64
	releaseAt    time.Time
	releaseSince time.Time
	// decodeLog is an exponentially weighted mean of log(seconds per
	// expected output token) of the requests that ended on the worker with
	// an expected output length (Hints.OSL), decodeSeen how many there
	// were; see noteDecode.
	decodeLog  float64
	decodeSeen int
	// drained keeps the worker out of new requests' candidates while
	// others can take them (SetDrained).
	drained bool
}

// decodeWeight is the weight of the newest request in decodeLog.
const decodeWeight = 0.2

// noteDecode learns the worker's decode seconds per expected output token
// from a request that ended: the time from its first token to its end
// over the output tokens it was expected to produce (the estimate: the
// router never sees the count, and an estimate is what it prices with).
// The mean is of logarithms, so that one answer far longer than its
// estimate (a compaction's summary) moves it little.
func (ws *workerState) noteDecode(ar *activeRequest, now time.Time) {
	if !ar.prefillDone || ar.outputTokens <= 0 {
		return
	}
	d := now.Sub(ar.prefillAt).Seconds()
	if d <= 0 {
		return
	}
	x := math.Log(d / float64(ar.outputTokens))
	if ws.decodeSeen == 0 {
		ws.decodeLog = x
	} else {
		ws.decodeLog += decodeWeight * (x - ws.decodeLog)
	}
	ws.decodeSeen++
}

// secondsPerToken is the worker's learned decode time per expected output
// token; ok is false before any request with an expected length ended.
func (ws *workerState) secondsPerToken() (float64, bool) {
	if ws.decodeSeen == 0 {
		return 0, false
	}
	return math.Exp(ws.decodeLog), true
}

// noteRelease adds blocks freed at now to the worker's release rate, the
// observations weighted by exp(-age/window).
func (ws *workerState) noteRelease(blocks int, now time.Time, window float64) {
	if window <= 0 || blocks <= 0 {
		return
	}
	if ws.releaseSince.IsZero() {
		ws.releaseSince, ws.releaseAt = now, now
	}
	if dt := now.Sub(ws.releaseAt).Seconds(); dt > 0 {
		ws.releaseAcc *= math.Exp(-dt / window)
		ws.releaseAt = now
	}
	ws.releaseAcc += float64(blocks)
}

// releaseRate is the blocks per second the worker's running requests
// released over about the last window seconds: the weighted sum divided
// by the weight of the time observed, so that a worker seen for less than
// a window is not underestimated. ok is false before a release was seen.
func (ws *workerState) releaseRate(now time.Time, window float64) (rate float64, ok bool) {
	if window <= 0 || ws.releaseSince.IsZero() {
		return 0, false
	}
	acc := ws.releaseAcc
	if dt := now.Sub(ws.releaseAt).Seconds(); dt > 0 {
		acc *= math.Exp(-dt / window)
	}
	seen := now.Sub(ws.releaseSince).Seconds()
	weight := window * (1 - math.Exp(-seen/window))
	if weight <= 0 {
		// Only the first release, at this instant: no span to divide by.
		return 0, false
	}
	return acc / weight, true
}

// AddWorker registers a worker and returns its id, the lowest free one.
func (r *Router) AddWorker(info WorkerInfo) (WorkerID, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.order) == MaxWorkers {
		return 0, fmt.Errorf("router: add worker %q: %w (max %d)", info.Name, ErrTooManyWorkers, MaxWorkers)
	}
	var id WorkerID
	for r.workers[id] != nil {
		id++
	}
	r.ix.ClearWorker(id) // events of a previous holder of the id may linger
	r.workers[id] = &workerState{info: info, gauges: r.metrics.forWorker(info.Name)}
	r.order = append(r.order, id)
	slices.Sort(r.order)
	r.ix.joinNode(id, r.nodePeersLocked(id))
	r.publishLocked(id)
	r.dispatchLocked(r.now())
	return id, nil
}

// RemoveWorker forgets a worker, its cached blocks and its running requests.
func (r *Router) RemoveWorker(id WorkerID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id >= MaxWorkers || r.workers[id] == nil {
		return
	}
	r.metrics.dropWorker(r.workers[id].info.Name)
	r.workers[id] = nil
	r.ingesters[id] = nil
	r.order = slices.DeleteFunc(r.order, func(w WorkerID) bool { return w == id })
	now := r.now()
	r.active.clearWorker(id, func(ar *activeRequest) { r.releasedLocked(ar, now) })
	r.dropPeersLocked(id)
	r.approx.clearWorker(id)
	r.ix.leaveNode(id) // the node's disk stays with the other workers
	r.ix.ClearWorker(id)
	for _, s := range r.sessions {
		if s.hasWorker && s.worker == id {
			s.hasWorker = false
		}
	}
	// Requests waiting for a model that no live worker serves any more
	// fail now rather than wait for one that may never come.
	for model, q := range r.queues {
		if r.hasWorkerLocked(model) {
			continue
		}
		for q.Len() > 0 {
			q.pop().resolve(routeResult{err: ErrNoWorker}, r.nextDispatch())
			r.queued--
		}
		delete(r.queues, model)
	}
	r.metrics.setQueueDepth(r.queued)
	r.dispatchLocked(now)
}

// nodePeersLocked returns the other live workers that share id's node disk
// tier: the same non-empty Node and the same Model.
func (r *Router) nodePeersLocked(id WorkerID) uint64 {
	info := &r.workers[id].info
	if info.Node == "" {
		return 0
	}
	var peers uint64
	for _, w := range r.order {
		if o := &r.workers[w].info; w != id && o.Node == info.Node && o.Model == info.Model {
			peers |= 1 << w
		}
	}
	return peers
}

// EngineBlockMap is what RemoveNodeBlocks and NodeBlockPriority need of
// the ingester that follows a worker's KV events (package router/ingest):
// its map from the engine's block hashes to the index's.
type EngineBlockMap interface {
	// DropEngineBlocks removes from tier the blocks the worker's engine
	// names engineHashes and sets known[i] for each hash it mapped in that
	// tier. It is called without the router's lock held and may lock the
	// index.
	DropEngineBlocks(tier kvtier.Tier, engineHashes []uint64, known []bool)
	// SeqHashOf is the sequence hash of the block the worker's engine
	// names engineHash, in any tier; false when it maps none. It is
	// called without the router's lock held and must not lock the index.
	SeqHashOf(engineHash uint64) (tokenizer.SeqHash, bool)
}

// AttachIngester tells the router which ingester follows worker id's KV
// events, so that RemoveNodeBlocks can map engine hashes through its
// table. RemoveWorker detaches it. It reports whether id is live.
func (r *Router) AttachIngester(id WorkerID, in EngineBlockMap) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id >= MaxWorkers || r.workers[id] == nil {
		return false
	}
	r.ingesters[id] = in
	return true
}

// RemoveNodeBlocks records that the disk tier of node, for model, no longer
// holds the blocks named by engineHashes: the node's store evicted them,
// whichever engine wrote them. Engines of one model on one node name a
// block alike, so each hash is mapped through the engine-hash tables of
// the node's workers (those with an attached ingester); the first that
// knows it removes the block for the whole node, and every table drops its
// disk entry. It returns how many of engineHashes some table knew on disk.
func (r *Router) RemoveNodeBlocks(node, model string, engineHashes []uint64) int {
	if node == "" || len(engineHashes) == 0 {
		return 0
	}
	var ings [MaxWorkers]EngineBlockMap
	n := r.nodeIngesters(node, model, &ings)
	// Ingesters lock their tables and then the index, never the router:
	// they are called outside r.mu.
	known := make([]bool, len(engineHashes))
	for _, in := range ings[:n] {
		in.DropEngineBlocks(kvtier.Disk, engineHashes, known)
	}
	removed := 0
	for _, k := range known {
		if k {
			removed++
		}
	}
	return removed
}

// nodeIngesters puts into ings the attached ingesters of node's workers
// of model and returns how many there are.
func (r *Router) nodeIngesters(node, model string, ings *[MaxWorkers]EngineBlockMap) int {
	n := 0
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range r.order {
		info := &r.workers[id].info
		if info.Node == node && info.Model == model && r.ingesters[id] != nil {
			ings[n] = r.ingesters[id]
			n++
		}
	}
	return n
}

// NodeBlockPriority is the highest Hints.Priority of the recent requests
// whose prompts covered the block that node's disk tier, for model, names
// engineHash (its file in the node's store), and false when the router
// does not know: it keeps no record (Config.BlockPriorities is 0), no
// attached ingester of the node maps the hash, or no prompt the record
// still holds covered the block. Engines of one model on one node name a
// block alike, so the first table that maps the hash answers. The node's
// store asks it as it evicts (kvbm.BlockPriorities); it allocates nothing.
func (r *Router) NodeBlockPriority(node, model string, engineHash uint64) (int, bool) {
	if r.prio == nil || node == "" {
		return 0, false
	}
	var ings [MaxWorkers]EngineBlockMap
	n := r.nodeIngesters(node, model, &ings)
	for _, in := range ings[:n] {
		if s, ok := in.SeqHashOf(engineHash); ok {
			return r.prio.of(s)
		}
	}
	return 0, false
}

func (r *Router) saturatedLocked(id WorkerID) bool {
	aw := &r.active.workers[id]
	if r.cfg.SaturationPendingTokens > 0 && aw.pending() >= r.cfg.SaturationPendingTokens {
		return true
	}
	capacity := r.workers[id].info.CapacityBlocks
	return capacity > 0 && float64(aw.blocks()) >= r.cfg.SaturationFraction*float64(capacity)
}

// allSaturatedLocked reports whether every live worker of a model that
// may take a request (routableLocked) is saturated.
func (r *Router) allSaturatedLocked(model string) bool {
	for _, id := range r.order {
		if r.routableLocked(id, model) && !r.saturatedLocked(id) {
			return false
		}
	}
	return true
}

// servesLocked reports whether worker id may take a request for model.
func (r *Router) servesLocked(id WorkerID, model string) bool {
	m := r.workers[id].info.Model
	return model == "" || m == "" || m == model
}

// hasWorkerLocked reports whether some live worker serves model.
func (r *Router) hasWorkerLocked(model string) bool {
	for _, id := range r.order {
		if r.servesLocked(id, model) {
			return true
		}
	}
	return false
}

func (r *Router) publishLocked(id WorkerID) {
	ws := r.workers[id]
	if ws == nil {
		return
	}
	aw := &r.active.workers[id]
	ws.gauges.set(aw.ownBlocks(), aw.pendingTokens)
}

// WorkerLoad is a snapshot of one worker's load, for the console.
type WorkerLoad struct {
	WorkerID             WorkerID
	Info                 WorkerInfo
	ActiveRequests       int
	ActiveBlocks         int
	PendingPrefillTokens int
	CachedBlocks         int // every GPU block the index holds for the worker, not only a prompt's
	RAMBlocks            int // every block the index holds in the worker's host-RAM tier
	PausedSessionBlocks  int
	Saturated            bool
	// Drained is true while the worker takes no new requests (SetDrained).
	Drained bool
	// Peer is the load other router replicas reported on the worker
	// (SetPeerLoad); the fields above are this replica's own.
	Peer PeerLoad
}

// Workers returns the load of every live worker, by id.
func (r *Router) Workers() []WorkerLoad {
	var cached, ram [MaxWorkers]int
	r.ix.BlockCounts(kvtier.GPU, &cached)
	r.ix.BlockCounts(kvtier.RAM, &ram)
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]WorkerLoad, 0, len(r.order))
	for _, id := range r.order {
		aw := &r.active.workers[id]
		ws := r.workers[id]
		out = append(out, WorkerLoad{
			WorkerID:             id,
			Info:                 ws.info,
			ActiveRequests:       aw.requests,
			ActiveBlocks:         aw.ownBlocks(),
			PendingPrefillTokens: aw.pendingTokens,
			Peer:                 PeerLoad{Running: aw.peerRequests, ActiveBlocks: aw.peerBlocks, PendingPrefillTokens: aw.peerPending},
			CachedBlocks:         cached[id],
			RAMBlocks:            ram[id],
			PausedSessionBlocks:  ws.pausedBlocks,
			Saturated:            r.saturatedLocked(id),
			Drained:              ws.drained,
		})
	}
	return out
}

// WorkerByName returns the id of the live worker registered under name.
func (r *Router) WorkerByName(name string) (WorkerID, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range r.order {
		if r.workers[id].info.Name == name {
			return id, true
		}
	}
	return 0, false
}
