package router

import (
	"container/heap"
	"errors"
	"fmt"
	"time"

	"github.com/hearth-llm/hearth/tokenizer"
)

// DefaultQueueSize is how many requests may wait for a free worker.
const DefaultQueueSize = 1024

// Errors of a Ticket.
var (
	// ErrTicketCancelled is the result of a ticket cancelled before the
	// router dispatched it.
	ErrTicketCancelled = errors.New("router: queued request cancelled")
	// ErrTicketPending is the result of a ticket the router has not
	// dispatched yet.
	ErrTicketPending = errors.New("router: request still queued")
)

// routeResult is what a waiting request receives when it is dispatched.
type routeResult struct {
	d   Decision
	err error
}

// waiter is a request held in the router queue while every worker is
// saturated.
type waiter struct {
	req      *Request
	hashes   []tokenizer.SeqHash
	isl      int
	policy   *routerPolicy
	enqueued time.Time
	// key orders waiters of equal strict priority, lower first: its
	// deadline in seconds less its priority's worth of waiting (see
	// queueKeyLocked).
	key   float64
	seq   uint64 // arrival order
	index int    // position in the heap, -1 once removed
	// res is set, and done closed, when the waiter leaves the queue: with a
	// decision, an error, or ErrTicketCancelled. order numbers dispatches.
	res   routeResult
	order uint64
	done  chan struct{}
}

// resolve records w's outcome and wakes whoever waits on it. The caller
// holds the router's mutex and has taken w out of the queue.
func (w *waiter) resolve(res routeResult, order uint64) {
	w.res, w.order = res, order
	close(w.done)
}

// waitQueue orders waiters by strict priority (higher first), then key,
// then arrival; with strict set, by priority (higher first) before key.
// It is not safe for concurrent use.
type waitQueue struct {
	items  []*waiter
	next   uint64
	strict bool // Config.PriorityWait < 0
}

func (q *waitQueue) Len() int { return len(q.items) }

func (q *waitQueue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if a.req.Hints.StrictPriority != b.req.Hints.StrictPriority {
		return a.req.Hints.StrictPriority > b.req.Hints.StrictPriority
	}
	if q.strict && a.req.Hints.Priority != b.req.Hints.Priority {
		return a.req.Hints.Priority > b.req.Hints.Priority
	}
	if a.key != b.key {
		return a.key < b.key
	}
	return a.seq < b.seq
}

func (q *waitQueue) Swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].index = i
	q.items[j].index = j
}

func (q *waitQueue) Push(x any) {
	w := x.(*waiter)
	w.index = len(q.items)
	q.items = append(q.items, w)
}

func (q *waitQueue) Pop() any {
	n := len(q.items) - 1
	w := q.items[n]
	q.items[n] = nil
	q.items = q.items[:n]
	w.index = -1
	return w
}

// push adds a waiter, which must have req and key set, and stamps its
// arrival.
func (q *waitQueue) push(w *waiter) *waiter {
	w.seq = q.next
	w.done = make(chan struct{})
	q.next++
	heap.Push(q, w)
	return w
}

// pop removes and returns the first waiter in order.
func (q *waitQueue) pop() *waiter {
	return heap.Pop(q).(*waiter)
}

// remove takes w out of the queue; it reports false if w already left.
func (q *waitQueue) remove(w *waiter) bool {
	if w.index < 0 {
		return false
	}
	heap.Remove(q, w.index)
	return true
}

// Ticket is a request held in the router queue by Enqueue. The router
// decides for it when it dispatches it, which happens synchronously inside
// the call that freed a worker (PrefillDone, Free, AddWorker,
// RemoveWorker, or any call that expired a request); Done is closed then.
// Its methods are safe for concurrent use.
type Ticket struct {
	r *Router
	w *waiter
}

// Done is closed when the request has left the queue: dispatched to a
// worker, failed, or cancelled.
func (t *Ticket) Done() <-chan struct{} { return t.w.done }

// Ready reports whether Done is closed.
func (t *Ticket) Ready() bool {
	select {
	case <-t.w.done:
		return true
	default:
		return false
	}
}

// Result returns the decision made when the request was dispatched, the
// error that ended its wait (ErrNoWorker when the last worker left,
// ErrDuplicateRequest, ErrTicketCancelled), or ErrTicketPending while it
// waits. A dispatched request runs on its worker until Free, like one that
// Route returned.
func (t *Ticket) Result() (Decision, error) {
	if !t.Ready() {
		return Decision{}, ErrTicketPending
	}
	return t.w.res.d, t.w.res.err
}

// Order numbers the router's dispatches: of two tickets dispatched, the
// one with the lower Order was dispatched first. It is 0 until Done is
// closed.
func (t *Ticket) Order() uint64 {
	if !t.Ready() {
		return 0
	}
	return t.w.order
}

// Request returns the request the ticket holds.
func (t *Ticket) Request() *Request { return t.w.req }

// Cancel takes the request out of the queue and reports true, unless the
// router dispatched it (or it failed) first: then it reports false and
// Result holds the outcome; a dispatched request must then be freed by
// whoever no longer wants it.
func (t *Ticket) Cancel() bool {
	r := t.r
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queues[t.w.req.Model]
	if q == nil || !q.remove(t.w) {
		return false
	}
	r.queued--
	r.metrics.setQueueDepth(r.queued)
	t.w.resolve(routeResult{err: ErrTicketCancelled}, 0)
	return true
}

// queueKeyLocked orders a waiter within its strict priority, lowest first:
// its deadline in seconds since the router's epoch, less Priority ×
// Config.PriorityWait. The deadline is its arrival plus its policy's
// PolicyNeeds.QueueDelay (hearth: QueueStretch × its own cost), or its
// arrival for a policy without one, FIFO as Dynamo's queue is. Ordering by
// the key at any instant is ordering by priority plus waited time over
// PriorityWait, so a request's effective priority rises with its wait; the
// key is fixed at arrival all the same, so the queue stays a heap.
func (r *Router) queueKeyLocked(w *waiter) float64 {
	if r.epoch.IsZero() {
		r.epoch = w.enqueued
	}
	key := w.enqueued.Sub(r.epoch).Seconds()
	if r.cfg.PriorityWait > 0 {
		key -= float64(w.req.Hints.Priority) * r.cfg.PriorityWait.Seconds()
	}
	delay := w.policy.needs.QueueDelay
	if delay == nil {
		return key
	}
	in, cands := r.queueInputLocked(w)
	return key + delay(in, cands)
}

// queueInputLocked is what a waiter's policy knows of it when it starts
// to wait: the input and candidates of a decision made then.
func (r *Router) queueInputLocked(w *waiter) (*RouteInput, []Candidate) {
	in := r.matchLocked(w.req, w.hashes, w.isl, w.policy.needs)
	in.Now, in.sess = time.Time{}, nil
	return in, r.candidatesLocked(w.req.Exclude, w.req.Model)
}

// dispatchLocked routes waiting requests while some worker is not saturated.
func (r *Router) dispatchLocked(now time.Time) {
	if r.queued == 0 {
		return
	}
	for model, q := range r.queues {
		for q.Len() > 0 && r.hasWorkerLocked(model) && !r.allSaturatedLocked(model) {
			w := q.pop()
			r.queued--
			if _, dup := r.active.reqs[w.req.ID]; dup {
				w.resolve(routeResult{err: fmt.Errorf("router: %w: %q", ErrDuplicateRequest, w.req.ID)}, r.nextDispatch())
				continue
			}
			d := r.decideLocked(w.req, w.hashes, w.isl, w.policy, now, now.Sub(w.enqueued))
			w.resolve(routeResult{d: d}, r.nextDispatch())
		}
	}
	r.metrics.setQueueDepth(r.queued)
}

// nextDispatch numbers a ticket's outcome for Ticket.Order.
func (r *Router) nextDispatch() uint64 {
	r.dispatches++
	return r.dispatches
}

// QueueLen returns how many requests wait for a worker.
func (r *Router) QueueLen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queued
}
