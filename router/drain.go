package router

// Drained workers. A node whose owner wants its GPU back (a game, by hand
// or because another program took the GPU's memory) is drained: its
// workers take no new requests while any other worker of the model can,
// and the requests running on them finish. A drained worker keeps its
// index and its running requests, so that it serves its cached sessions
// again the moment it is undrained.
//
// When every worker of a model is drained the drained ones are still
// candidates: a turn served on a GPU a game shares is slower, and one
// refused is lost.

// SetDrained drains a worker (drained true) or returns it to routing.
// It reports whether the worker is live. Requests waiting in the queue are
// dispatched again at once: a worker undrained may take them, and one
// drained no longer counts as room.
func (r *Router) SetDrained(id WorkerID, drained bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id >= MaxWorkers || r.workers[id] == nil {
		return false
	}
	if r.workers[id].drained == drained {
		return true
	}
	r.workers[id].drained = drained
	r.log.Info("worker drain changed", "worker", r.workers[id].info.Name, "drained", drained)
	r.dispatchLocked(r.now())
	return true
}

// routableLocked reports whether worker id may take a new request for
// model: it serves the model and is not drained, or every worker of the
// model is drained.
func (r *Router) routableLocked(id WorkerID, model string) bool {
	if !r.servesLocked(id, model) {
		return false
	}
	return !r.workers[id].drained || !r.hasUndrainedLocked(model)
}

// hasUndrainedLocked reports whether some live worker of model is not
// drained.
func (r *Router) hasUndrainedLocked(model string) bool {
	for _, id := range r.order {
		if r.servesLocked(id, model) && !r.workers[id].drained {
			return true
		}
	}
	return false
}
