package router

import (
	"time"

	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/tokenizer"
)

// DefaultApproxTTL is how long approximate mode assumes a routed prompt
// stays cached on a worker that publishes no KV events.
const DefaultApproxTTL = 120 * time.Second

// approxState predicts the cache of workers that publish no KV events: a
// routed request's prompt blocks are stored in the index as if cached on
// the chosen worker and removed ttl after they were last routed there.
// It is not safe for concurrent use; the Router guards it.
type approxState struct {
	ttl  time.Duration
	last [MaxWorkers]map[tokenizer.SeqHash]time.Time
	fifo []approxEntry
	head int
}

type approxEntry struct {
	worker WorkerID
	hashes []tokenizer.SeqHash // not modified after insert
	at     time.Time
}

func newApproxState(ttl time.Duration) *approxState {
	return &approxState{ttl: ttl}
}

// insert records hashes as cached on w at now; hashes must not change later.
func (a *approxState) insert(ix *Index, w WorkerID, hashes []tokenizer.SeqHash, now time.Time) {
	if len(hashes) == 0 {
		return
	}
	if a.last[w] == nil {
		a.last[w] = make(map[tokenizer.SeqHash]time.Time)
	}
	for _, h := range hashes {
		a.last[w][h] = now
	}
	ix.Store(w, kvtier.GPU, hashes)
	a.fifo = append(a.fifo, approxEntry{worker: w, hashes: hashes, at: now})
}

// expire removes from the index the blocks not routed again within ttl.
func (a *approxState) expire(ix *Index, now time.Time) {
	var drop []tokenizer.SeqHash
	for a.head < len(a.fifo) {
		e := a.fifo[a.head]
		if now.Sub(e.at) < a.ttl {
			break
		}
		a.fifo[a.head] = approxEntry{}
		a.head++
		last := a.last[e.worker]
		drop = drop[:0]
		for _, h := range e.hashes {
			t, ok := last[h]
			if !ok || now.Sub(t) < a.ttl {
				continue // gone with its worker, or routed again since
			}
			delete(last, h)
			drop = append(drop, h)
		}
		ix.Remove(e.worker, kvtier.GPU, drop)
	}
	if a.head > 64 && a.head*2 > len(a.fifo) {
		n := copy(a.fifo, a.fifo[a.head:])
		clear(a.fifo[n:])
		a.fifo = a.fifo[:n]
		a.head = 0
	}
}

// clearWorker forgets the predictions for w; the index is cleared by the
// caller. Entries of w left in the FIFO find nothing in last and do nothing.
func (a *approxState) clearWorker(w WorkerID) {
	a.last[w] = nil
}
