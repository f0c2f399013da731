package router

import "time"

// session is what the router remembers of an agent session.
type session struct {
	worker    WorkerID
	hasWorker bool
	blocks    int // blocks of its last request: what it has cached on worker
	active    int // running requests
	lastSeen  time.Time
	ttl       time.Duration
}

// ApplySessionControl applies a request's nvext.session_control to the
// session sessionID: open starts (or refreshes) it with its timeout, close
// forgets it. An empty sessionID is ignored.
func (r *Router) ApplySessionControl(sessionID string, ctl SessionControl) {
	if sessionID == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sessions[sessionID]
	switch ctl.Action {
	case SessionClose:
		if s != nil {
			r.dropSessionLocked(sessionID, s)
		}
		return
	}
	if s == nil {
		s = &session{ttl: r.cfg.SessionTTL}
		r.sessions[sessionID] = s
	}
	if ctl.Timeout > 0 {
		s.ttl = ctl.Timeout
	}
	s.lastSeen = r.now()
}

func (r *Router) dropSessionLocked(id string, s *session) {
	if s.active == 0 && s.hasWorker && r.workers[s.worker] != nil {
		r.workers[s.worker].pausedBlocks -= s.blocks
	}
	delete(r.sessions, id)
}

// sessionRoutedLocked moves a session to the worker its request went to.
func (r *Router) sessionRoutedLocked(id string, s *session, w WorkerID, blocks int, now time.Time) {
	if s == nil {
		s = &session{ttl: r.cfg.SessionTTL}
		r.sessions[id] = s
	}
	if s.active == 0 && s.hasWorker && r.workers[s.worker] != nil {
		r.workers[s.worker].pausedBlocks -= s.blocks
	}
	s.worker, s.hasWorker = w, true
	s.blocks = blocks
	s.active++
	s.lastSeen = now
}
