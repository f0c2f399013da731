package router

import (
	"math/bits"
	"time"

	"github.com/hearth-llm/hearth/tokenizer"
)

// DefaultActiveTTL is how long a routed request counts as running when its
// end is never reported (a lost connection, a crashed gateway).
const DefaultActiveTTL = 300 * time.Second

// activeRequest is one routed request that has not ended yet.
type activeRequest struct {
	id            string
	worker        WorkerID
	hashes        []tokenizer.SeqHash // full prompt blocks, shared with other requests
	extraBlocks   int                 // partial last block and expected output blocks
	prefillTokens int                 // tokens the worker must compute before the first token
	prefillDone   bool
	prefillAt     time.Time // when the first token came
	outputTokens  int       // expected output tokens (Hints.OSL), 0 if unknown
	freed         bool
	freedBlocks   int // blocks the worker's running load lost when it ended
	session       string
	expires       time.Time
}

// activeWorker is the load of the requests running on one worker.
type activeWorker struct {
	unique        int // distinct prompt blocks of running requests
	extraBlocks   int
	pendingTokens int
	requests      int
	// The load other router replicas reported on the worker (SetPeerLoad),
	// summed: scoring and saturation count it, this replica's own figures
	// (Workers, metrics) do not.
	peerRequests, peerBlocks, peerPending int
}

// uniqueBlocks is Dynamo's active block count: distinct prompt blocks,
// plus the blocks other replicas hold there (theirs cannot be told apart).
func (aw *activeWorker) uniqueBlocks() int { return aw.unique + aw.peerBlocks }

// blocks is the decode load in blocks including expected output, other
// replicas' included.
func (aw *activeWorker) blocks() int { return aw.unique + aw.extraBlocks + aw.peerBlocks }

// ownBlocks is the decode load of this replica's requests alone.
func (aw *activeWorker) ownBlocks() int { return aw.unique + aw.extraBlocks }

// pending is the prompt tokens waiting for prefill, other replicas' included.
func (aw *activeWorker) pending() int { return aw.pendingTokens + aw.peerPending }

// refKey is the key of one (block, worker) pair in the reference counts.
func refKey(h tokenizer.SeqHash, w WorkerID) uint64 {
	k := normKey(h) ^ (uint64(w)+1)*0xff51afd7ed558ccd
	if k == 0 {
		k = 1
	}
	return k
}

// activeSet tracks the requests running on every worker: the blocks they
// hold and the prompt tokens still waiting for prefill. It is not safe for
// concurrent use; the Router guards it with its mutex. Requests that never
// end expire after ttl; since every request gets the same ttl, insertion
// order is expiry order and a FIFO finds them in O(1) each.
type activeSet struct {
	ttl     time.Duration
	workers [MaxWorkers]activeWorker
	reqs    map[string]*activeRequest
	// mask says which workers have a block active, so the blocks of a new
	// request not yet active on each worker are found in one walk. dups
	// counts, per (block, worker), the running requests beyond the first
	// that hold the block: most blocks have one, so most updates touch one
	// table once.
	mask  u64Table
	dups  u64Table
	fifo  []*activeRequest
	fhead int
}

func newActiveSet(ttl time.Duration) *activeSet {
	return &activeSet{
		ttl:  ttl,
		reqs: make(map[string]*activeRequest),
	}
}

// activeDepth writes per worker how many leading blocks of hashes are
// already held by its running requests. Prompt blocks chain, so a held block
// implies its whole prefix is held too: this is the count of request blocks
// already active there.
func (as *activeSet) activeDepth(hashes []tokenizer.SeqHash, out *[MaxWorkers]int) {
	*out = [MaxWorkers]int{}
	alive := ^uint64(0)
	depth := 0
	for ; depth < len(hashes); depth++ {
		m := as.mask.get(normKey(hashes[depth])) & alive
		for lost := alive &^ m; lost != 0; lost &= lost - 1 {
			out[bits.TrailingZeros64(lost)] = depth
		}
		alive = m
		if alive == 0 {
			return
		}
	}
	for ; alive != 0; alive &= alive - 1 {
		out[bits.TrailingZeros64(alive)] = depth
	}
}

// add starts tracking a request routed to w. It keeps hashes, which must
// not be modified while the request runs.
func (as *activeSet) add(id string, w WorkerID, hashes []tokenizer.SeqHash, extraBlocks, prefillTokens int, session string, now time.Time) *activeRequest {
	ar := &activeRequest{
		id:            id,
		worker:        w,
		hashes:        hashes,
		extraBlocks:   extraBlocks,
		prefillTokens: prefillTokens,
		session:       session,
		expires:       now.Add(as.ttl),
	}
	aw := &as.workers[w]
	bit := uint64(1) << w
	for _, h := range hashes {
		m := as.mask.ref(normKey(h))
		if *m&bit == 0 {
			*m |= bit
			aw.unique++
			continue
		}
		*as.dups.ref(refKey(h, w))++
	}
	aw.extraBlocks += extraBlocks
	aw.pendingTokens += prefillTokens
	aw.requests++
	as.reqs[id] = ar
	as.fifo = append(as.fifo, ar)
	return ar
}

// prefillDone marks that the request's first token arrived: its prompt is
// no longer waiting. It reports whether the request was known.
func (as *activeSet) prefillDone(id string, now time.Time) (*activeRequest, bool) {
	ar, ok := as.reqs[id]
	if !ok {
		return nil, false
	}
	if !ar.prefillDone {
		ar.prefillDone, ar.prefillAt = true, now
		as.workers[ar.worker].pendingTokens -= ar.prefillTokens
	}
	return ar, true
}

// free stops tracking the request. It reports whether it was known.
func (as *activeSet) free(id string) (*activeRequest, bool) {
	ar, ok := as.reqs[id]
	if !ok {
		return nil, false
	}
	as.release(ar)
	return ar, true
}

func (as *activeSet) release(ar *activeRequest) {
	delete(as.reqs, ar.id)
	ar.freed = true
	aw := &as.workers[ar.worker]
	before := aw.ownBlocks()
	bit := uint64(1) << ar.worker
	for _, h := range ar.hashes {
		if as.dups.len() > 0 && as.dups.decr(refKey(h, ar.worker)) {
			continue // another request on the worker still holds it
		}
		if as.mask.andNot(normKey(h), bit) {
			aw.unique--
		}
	}
	aw.extraBlocks -= ar.extraBlocks
	ar.freedBlocks = before - aw.ownBlocks()
	if !ar.prefillDone {
		aw.pendingTokens -= ar.prefillTokens
	}
	aw.requests--
}

// expire frees every request whose ttl passed and calls fn for each.
func (as *activeSet) expire(now time.Time, fn func(*activeRequest)) {
	for as.fhead < len(as.fifo) {
		ar := as.fifo[as.fhead]
		if !ar.freed && now.Before(ar.expires) {
			break
		}
		as.fifo[as.fhead] = nil
		as.fhead++
		if !ar.freed {
			as.release(ar)
			if fn != nil {
				fn(ar)
			}
		}
	}
	// Reclaim the consumed front once it is most of the slice.
	if as.fhead > 64 && as.fhead*2 > len(as.fifo) {
		n := copy(as.fifo, as.fifo[as.fhead:])
		clear(as.fifo[n:])
		as.fifo = as.fifo[:n]
		as.fhead = 0
	}
}

// clearWorker forgets every request on w (the worker went away) and calls
// fn for each.
func (as *activeSet) clearWorker(w WorkerID, fn func(*activeRequest)) {
	for _, ar := range as.reqs {
		if ar.worker == w {
			as.release(ar)
			fn(ar)
		}
	}
}
