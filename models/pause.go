package models

import (
	"slices"
	"time"
)

// Tool pauses are kept per session: a session whose turn ended in tool
// calls protects its model until that session's next request, or until
// the model's tool-pause grace passes. Another session's request to the
// same model neither ends the pause nor counts as one of its samples.

// maxToolPauses bounds the sessions in a tool pause kept per model; past
// it the oldest pause is dropped (a session that left without a next
// turn).
const maxToolPauses = 256

// ToolPause records that session's turn on model name ended in a tool
// call: until the session's next request (Enqueue), or the model's
// tool-pause grace passes, the model is not evicted. Session "" stands
// for every request that names no session.
func (m *Manager) ToolPause(name, session string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.models[name]
	if !ok {
		return
	}
	now := m.clock.Now()
	if e.toolPauses == nil {
		e.toolPauses = map[string]time.Time{}
	}
	// Pauses past the keep-alive are sessions that left: each is a sample
	// of a long pause, and goes.
	for s, at := range e.toolPauses {
		if now.Sub(at) >= e.KeepAlive {
			e.samplePause(now.Sub(at))
			delete(e.toolPauses, s)
		}
	}
	if _, ok := e.toolPauses[session]; !ok && len(e.toolPauses) >= maxToolPauses {
		oldest, at := "", now
		for s, t := range e.toolPauses {
			if !t.After(at) {
				oldest, at = s, t
			}
		}
		delete(e.toolPauses, oldest)
	}
	e.toolPauses[session] = now
}

// endToolPause is told that session's next request for e arrived: its
// pause ends, one sample of how long the tools of e's sessions run.
func (e *entry) endToolPause(session string, now time.Time) {
	at, ok := e.toolPauses[session]
	if !ok {
		return
	}
	delete(e.toolPauses, session)
	e.samplePause(now.Sub(at))
}

func (e *entry) samplePause(d time.Duration) {
	e.pauses = append(e.pauses, d)
	if len(e.pauses) > 2*toolPauseSamples {
		e.pauses = slices.Delete(e.pauses, 0, len(e.pauses)-2*toolPauseSamples)
	}
}

// inToolPause says whether a session of e is in a tool pause younger than
// e's grace.
func (e *entry) inToolPause(now time.Time) bool {
	if len(e.toolPauses) == 0 {
		return false
	}
	grace := e.toolPauseGrace()
	for _, at := range e.toolPauses {
		if now.Sub(at) < grace {
			return true
		}
	}
	return false
}
