package models

import (
	"context"
	"slices"
	"time"
)

// TransitionKind is what a transition did to a model's engine.
type TransitionKind string

const (
	// Load starts a model's engine (a cold start); Wake wakes a sleeping
	// one (which may fall back to a cold start, counted in its time).
	Load TransitionKind = "load"
	Wake TransitionKind = "wake"
	// Sleep puts an engine to sleep; Stop stops it.
	Sleep TransitionKind = "sleep"
	Stop  TransitionKind = "stop"
)

// MaxTransitions is how many of the latest transitions a Manager keeps.
const MaxTransitions = 64

// Transition is one move of a model's engine, timed on the Manager's
// clock.
type Transition struct {
	Model string
	Kind  TransitionKind
	At    time.Time     // when it began
	Took  time.Duration // how long it took
	Err   string        // why it failed; "" when it did not
}

// Transitions returns the latest transitions, at most MaxTransitions,
// oldest first.
func (m *Manager) Transitions() []Transition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.transitions)
}

// record appends one transition that began at start, dropping the oldest
// past MaxTransitions.
func (m *Manager) record(name string, kind TransitionKind, start time.Time, err error) {
	t := Transition{Model: name, Kind: kind, At: start, Took: m.clock.Now().Sub(start)}
	if err != nil {
		t.Err = err.Error()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.transitions = append(m.transitions, t)
	if len(m.transitions) > MaxTransitions {
		m.transitions = slices.Delete(m.transitions, 0, len(m.transitions)-MaxTransitions)
	}
}

// putAway puts e's engine to sleep where it can, else stops it, and
// records what it did: the state e is left in (Resident when even the
// stop failed, with its error).
func (m *Manager) putAway(ctx context.Context, e *entry) (State, error) {
	if e.CanSleep {
		start := m.clock.Now()
		err := m.mover.Sleep(ctx, e.Name)
		m.record(e.Name, Sleep, start, err)
		if err == nil {
			return Sleeping, nil
		}
	}
	start := m.clock.Now()
	err := m.mover.Stop(ctx, e.Name)
	m.record(e.Name, Stop, start, err)
	if err != nil {
		return Resident, err
	}
	return OnDisk, nil
}

// bringIn starts e's engine, or wakes it when it sleeps, and records it.
func (m *Manager) bringIn(ctx context.Context, e *entry, asleep bool) error {
	kind := Load
	if asleep {
		kind = Wake
	}
	start := m.clock.Now()
	err := m.mover.Load(ctx, e.Name, asleep)
	m.record(e.Name, kind, start, err)
	return err
}

// expectedSwapLocked is how long bringing e in is expected to take, with
// putting victims away first: each step as long as it took last time on
// this Manager, else the model's own estimate (Model.Wake, Model.Cold; a
// put-away without a record counts nothing). m.mu is held.
func (m *Manager) expectedSwapLocked(e *entry, asleep bool, victims []*entry) time.Duration {
	last := func(name string, kinds ...TransitionKind) (time.Duration, bool) {
		for i := len(m.transitions) - 1; i >= 0; i-- {
			t := m.transitions[i]
			if t.Model == name && t.Err == "" && slices.Contains(kinds, t.Kind) {
				return t.Took, true
			}
		}
		return 0, false
	}
	var d time.Duration
	for _, v := range victims {
		took, _ := last(v.Name, Sleep, Stop)
		d += took
	}
	kind, estimate := Load, e.Cold
	if asleep {
		kind, estimate = Wake, e.Wake
	}
	if took, ok := last(e.Name, kind); ok {
		estimate = took
	}
	return d + estimate
}
