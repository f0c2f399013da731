package models

import (
	"context"
	"fmt"
	"time"
)

// The order of the requests waiting for their models.
//
// Within one model, requests are admitted in priority order (higher
// first), then in the order they arrived. Between models, the claim of a
// waiting request is how long it has waited plus its priority times
// Options.PriorityWait, as the router's queue weighs them: the model whose
// waiting request has the strongest claim comes in first. A resident model
// keeps admitting its own requests while requests for another model wait,
// so that an agent's loop is not swapped out by a single side request,
// but for a bounded time only: once a request for another model that
// needs its room and came before has waited the resident model's
// tool-pause grace, the resident model admits nothing more until that
// request's model has been in; its requests in flight finish, its
// sessions' tool pauses end or pass their grace, and it goes.

// Request is one request for a model, as the Manager orders it among the
// requests that wait.
type Request struct {
	Model string
	// Session is the agent session it belongs to ("" none): its arrival
	// ends that session's tool pause on Model.
	Session string
	// Priority is the request's priority, higher first
	// (router.Hints.Priority: 0 a turn, -1 a side request).
	Priority int
}

// Ticket is an enqueued request's place among those waiting for their
// models, until Acquire admits it or Cancel takes it out.
type Ticket struct {
	m *Manager
	w *waiter
}

type waiter struct {
	req      Request
	e        *entry
	since    time.Time
	seq      uint64
	admitted bool
}

// Enqueue ends the tool pause of req's session on its model and puts req
// in line for its model from now; Ticket.Acquire waits for its turn.
func (m *Manager) Enqueue(req Request) (*Ticket, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.models[req.Model]
	if !ok {
		return nil, fmt.Errorf("models: %q is not configured", req.Model)
	}
	if e.Bytes > m.capacity {
		return nil, fmt.Errorf("%w: %s needs %d bytes of %d", ErrTooBig, req.Model, e.Bytes, m.capacity)
	}
	now := m.clock.Now()
	// The pause ends with this request, resident or not: it is one
	// sample of how long the tools of the model's sessions run.
	e.endToolPause(req.Session, now)
	m.seq++
	w := &waiter{req: req, e: e, since: now, seq: m.seq}
	m.waiting = append(m.waiting, w)
	return &Ticket{m: m, w: w}, nil
}

// Cancel takes the ticket out of the line; after Acquire it does nothing.
func (t *Ticket) Cancel() {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if !t.w.admitted {
		t.m.admitLocked(t.w) // out of the line all the same
		t.w.admitted = true
	}
}

// admitLocked takes w out of the line and wakes the others: the next in
// line may go.
func (m *Manager) admitLocked(w *waiter) {
	for i, x := range m.waiting {
		if x == w {
			m.waiting = append(m.waiting[:i], m.waiting[i+1:]...)
			break
		}
	}
	w.admitted = true
	m.notifyLocked()
}

// waitLocked unlocks and waits for a change, or a second (keep-alives,
// tool pauses and claims move with time), or the end of ctx: ErrBusy.
func (m *Manager) waitLocked(ctx context.Context) error {
	changed, hook := m.changed, m.waitingForRoom
	m.mu.Unlock()
	if hook != nil {
		hook()
	}
	select {
	case <-changed:
	case <-m.clock.After(time.Second):
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrBusy, ctx.Err())
	}
	return nil
}

// sameModelFirst says whether a, waiting for the same model as b, is
// admitted before it: higher priority, then earlier.
func sameModelFirst(a, b *waiter) bool {
	if a.req.Priority != b.req.Priority {
		return a.req.Priority > b.req.Priority
	}
	if !a.since.Equal(b.since) {
		return a.since.Before(b.since)
	}
	return a.seq < b.seq
}

// claimFirst says whether a's claim on the GPUs is stronger than b's: a
// waited longer, its priority weighed as Options.PriorityWait says.
func (m *Manager) claimFirst(a, b *waiter) bool {
	if m.priorityWait <= 0 {
		return sameModelFirst(a, b)
	}
	ka := a.since.Add(-time.Duration(a.req.Priority) * m.priorityWait)
	kb := b.since.Add(-time.Duration(b.req.Priority) * m.priorityWait)
	if !ka.Equal(kb) {
		return ka.Before(kb)
	}
	return a.seq < b.seq
}

// claimed is how long w has waited, its priority weighed.
func (m *Manager) claimed(w *waiter, now time.Time) time.Duration {
	return now.Sub(w.since) + time.Duration(w.req.Priority)*max(m.priorityWait, 0)
}

// mayAdmitLocked says whether w, whose model is resident, goes now: no
// request for the same model goes before it, and its model does not owe
// the GPUs to a request for another model that came first and has waited
// the model's tool-pause grace.
func (m *Manager) mayAdmitLocked(w *waiter, now time.Time) bool {
	for _, x := range m.waiting {
		if x != w && x.e == w.e && sameModelFirst(x, w) {
			return false
		}
	}
	if w.e.Pinned {
		return true // it would not make room anyway
	}
	for _, x := range m.waiting {
		if x.e != w.e && m.claimFirst(x, w) && m.owesLocked(w.e, x, now) {
			return false
		}
	}
	return true
}

// owesLocked says whether resident model e owes its room to x, a request
// for another model: x cannot come in without an eviction, could with
// the unpinned models gone, and its claim has reached owedAfter.
func (m *Manager) owesLocked(e *entry, x *waiter, now time.Time) bool {
	return !e.Pinned && m.owedRoomLocked(x.e) && m.claimed(x, now) >= owedAfter(e, x)
}

// owedAfter is the claim x must reach for resident model e to owe it its
// room. For a request at a turn's priority or above (another agent's
// turn), the time that bringing e back would cost e's own loop (its
// reload): waiting longer than the swap it spares is the worse bargain
// (the ski-rental rule). For one below (a side request, background
// work), e's tool-pause grace: a single title does not make a loop pay a
// swap. Never past the grace.
func owedAfter(e *entry, x *waiter) time.Duration {
	grace := e.toolPauseGrace()
	if x.req.Priority < 0 {
		return grace
	}
	return min(e.reload(), grace)
}

// protectedFromLocked says whether e may not be evicted now for w (nil:
// for no request in particular): pinned, with requests in flight, or with
// a session in a tool pause within its grace, but for a pause that began
// after w arrived when e owes w its room.
func (m *Manager) protectedFromLocked(e *entry, now time.Time, w *waiter) bool {
	if w == nil || !m.owesLocked(e, w, now) {
		return m.protectedLocked(e, now)
	}
	if e.Pinned || e.inFlight > 0 {
		return true
	}
	grace := e.toolPauseGrace()
	for _, at := range e.toolPauses {
		if !at.After(w.since) && now.Sub(at) < grace {
			return true
		}
	}
	return false
}

// owedRoomLocked says whether e, waited for, cannot come in without an
// eviction, and could with the unpinned models gone.
func (m *Manager) owedRoomLocked(e *entry) bool {
	if e.state == Resident || e.state == Loading {
		return false
	}
	var held, pinned uint64
	for _, o := range m.models {
		if o.state == Resident || o.state == Loading || o.state == Unloading {
			held += o.Bytes
			if o.Pinned {
				pinned += o.Bytes
			}
		}
	}
	return held+e.Bytes > m.capacity && pinned+e.Bytes <= m.capacity
}

// firstInLineLocked says whether w's model may evict others to come in:
// no request for another model that is not resident has a stronger claim
// than the strongest of w's model's.
func (m *Manager) firstInLineLocked(w *waiter) bool {
	best := w
	for _, x := range m.waiting {
		if x.e == w.e && m.claimFirst(x, best) {
			best = x
		}
	}
	for _, x := range m.waiting {
		if x.e != w.e && x.e.state != Resident && x.e.state != Loading && m.claimFirst(x, best) {
			return false
		}
	}
	return true
}
