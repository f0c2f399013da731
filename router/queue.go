package router

import (
	"container/heap"
	"time"

	"github.com/hearth-llm/hearth/tokenizer"
)

// DefaultQueueSize is how many requests may wait for a free worker.
const DefaultQueueSize = 1024

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
	policy   string
	enqueued time.Time
	seq      uint64 // arrival order
	index    int    // position in the heap, -1 once removed
	done     chan routeResult
}

// waitQueue orders waiters by strict priority, then priority (both higher
// first), then arrival. It is not safe for concurrent use.
type waitQueue struct {
	items []*waiter
	next  uint64
}

func (q *waitQueue) Len() int { return len(q.items) }

func (q *waitQueue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if a.req.Hints.StrictPriority != b.req.Hints.StrictPriority {
		return a.req.Hints.StrictPriority > b.req.Hints.StrictPriority
	}
	if a.req.Hints.Priority != b.req.Hints.Priority {
		return a.req.Hints.Priority > b.req.Hints.Priority
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

// push adds a waiter, which must have req set, and stamps its arrival.
func (q *waitQueue) push(w *waiter) *waiter {
	w.seq = q.next
	w.done = make(chan routeResult, 1)
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
