package models

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// threeModels are three models of which one fits the board at a time,
// with the router's default weight of a priority level.
func threeModels(t *testing.T) (*Manager, *fakeMover, *clock.Fake) {
	t.Helper()
	var ms []Model
	for _, name := range []string{"a", "b", "c"} {
		ms = append(ms, Model{Name: name, Bytes: 20 * gib, Wake: time.Second, Cold: 30 * time.Second, CanSleep: true})
	}
	clk := clock.NewFake(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	f := &fakeMover{}
	m, err := New(Options{Capacity: 24 * gib, Models: ms, Mover: f, Clock: clk, PriorityWait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return m, f, clk
}

// tryAcquire is one attempt of a ticket that does not wait: nil release
// when it must wait.
func tryAcquire(t *testing.T, tk *Ticket) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	release, err := tk.Acquire(ctx)
	if errors.Is(err, ErrBusy) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return release
}

// TestWaitingModelsComeInByClaim: with model a busy, requests for b and c
// wait; when a's request ends, the model whose waiting request has waited
// longest comes in first, a priority level counting as PriorityWait of
// waiting, whichever request asks first.
func TestWaitingModelsComeInByClaim(t *testing.T) {
	t.Parallel()
	type arrival struct {
		model    string
		priority int
		after    time.Duration // after the one before
	}
	for _, tc := range []struct {
		name  string
		in    []arrival
		first string
	}{
		{"the longest wait", []arrival{{"b", 0, 0}, {"c", 0, time.Second}}, "b"},
		{"the longest wait, asked last", []arrival{{"c", 0, 0}, {"b", 0, time.Second}}, "c"},
		{"a turn 1 s after a side request", []arrival{{"b", -1, 0}, {"c", 0, time.Second}}, "c"},
		{"a turn 3 s after a side request", []arrival{{"b", -1, 0}, {"c", 0, 3 * time.Second}}, "b"},
		{"the stronger of each model's", []arrival{{"b", -1, 0}, {"c", -1, time.Second}, {"b", 0, time.Second}}, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, f, clk := threeModels(t)
			releaseA, err := m.Acquire(t.Context(), "a")
			if err != nil {
				t.Fatal(err)
			}
			var tickets []*Ticket
			for _, a := range tc.in {
				clk.Advance(a.after)
				tk, err := m.Enqueue(Request{Model: a.model, Priority: a.priority})
				if err != nil {
					t.Fatal(err)
				}
				tickets = append(tickets, tk)
			}
			releaseA()
			// The requests try in reverse order of arrival: the last to
			// arrive asks first.
			var got []string
			for range 3 {
				for i := len(tickets) - 1; i >= 0; i-- {
					if tickets[i] == nil {
						continue
					}
					if release := tryAcquire(t, tickets[i]); release != nil {
						got = append(got, tc.in[i].model)
						tickets[i] = nil
						release()
					}
				}
			}
			moves, _ := f.got()
			if len(moves) < 3 || moves[2] != "start "+tc.first {
				t.Errorf("moves %q (admitted %q): want %s brought in first", moves, got, tc.first)
			}
		})
	}
}

// TestRequestsForOneModelByPriorityThenArrival: the requests waiting for
// a model that comes in are admitted higher priority first, then in the
// order they arrived, whichever asks first.
func TestRequestsForOneModelByPriorityThenArrival(t *testing.T) {
	t.Parallel()
	m, _, clk := threeModels(t)
	releaseA, err := m.Acquire(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	in := []struct {
		name     string
		priority int
	}{{"side", -1}, {"turn 1", 0}, {"background", -2}, {"turn 2", 0}, {"side 2", -1}}
	var tickets []*Ticket
	for _, r := range in {
		tk, err := m.Enqueue(Request{Model: "b", Session: r.name, Priority: r.priority})
		if err != nil {
			t.Fatal(err)
		}
		tickets = append(tickets, tk)
		clk.Advance(time.Second)
	}
	releaseA()
	var got []string
	for round := 0; round < len(in) && len(got) < len(in); round++ {
		for i, tk := range tickets { // each round, every waiting one asks, in arrival order
			if tk == nil {
				continue
			}
			if release := tryAcquire(t, tk); release != nil {
				got = append(got, in[i].name)
				tickets[i] = nil
				defer release()
			}
		}
	}
	if want := []string{"turn 1", "turn 2", "side", "side 2", "background"}; !slices.Equal(got, want) {
		t.Errorf("admitted %q, want %q", got, want)
	}
}

// TestResidentModelYieldsAfterTheGrace: an agent's loop on a resident
// model keeps it while a request for another model has waited less than
// the model's tool-pause grace; after that its next turn waits, the model
// goes when its last request ends, and the other model's request is
// served before it.
func TestResidentModelYieldsAfterTheGrace(t *testing.T) {
	t.Parallel()
	m, f, clk := twoOn4090(t, nil)
	m.priorityWait = 2 * time.Second
	turn := func() func() {
		t.Helper()
		tk, err := m.Enqueue(Request{Model: "coder", Session: "agent"})
		if err != nil {
			t.Fatal(err)
		}
		return tryAcquire(t, tk)
	}
	release := turn()
	if release == nil {
		t.Fatal("the first turn waited")
	}
	release()
	m.ToolPause("coder", "agent")
	side, err := m.Enqueue(Request{Model: "other", Session: "agent.title", Priority: -1})
	if err != nil {
		t.Fatal(err)
	}
	if tryAcquire(t, side) != nil {
		t.Fatal("the side request evicted the coder in its session's tool pause")
	}
	// The loop goes on: each turn comes back within the pause's grace and
	// the side request has waited less than the grace.
	for range 5 {
		clk.Advance(5 * time.Second)
		release := turn()
		if release == nil {
			t.Fatalf("a turn of the loop waited with the side request waiting %v", clk.Now().Sub(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)))
		}
		if tryAcquire(t, side) != nil {
			t.Fatal("the side request was served while the turn was in flight")
		}
		release()
		m.ToolPause("coder", "agent")
	}
	// 35 s: the side request has waited its priority's 2 s past the 30-s
	// grace; the next turn waits, and the side request goes first.
	clk.Advance(7 * time.Second)
	next, err := m.Enqueue(Request{Model: "coder", Session: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	if release := tryAcquire(t, next); release != nil {
		t.Fatal("the loop kept the coder past the grace of the side request's wait")
	}
	release = tryAcquire(t, side)
	if release == nil {
		t.Fatal("the side request still waits")
	}
	release()
	if release := tryAcquire(t, next); release == nil {
		t.Fatal("the turn did not come back after the side request")
	} else {
		release()
	}
	moves, _ := f.got()
	if want := []string{"start coder", "sleep coder", "start other", "sleep other", "wake coder"}; !slices.Equal(moves, want) {
		t.Errorf("moves %q, want %q", moves, want)
	}
}

// TestToolPauseIsPerSession: another session's request to the model does
// not end a session's tool pause, and within the pause's grace a request
// for another model does not evict it; past the grace it does.
func TestToolPauseIsPerSession(t *testing.T) {
	t.Parallel()
	m, f, clk := twoOn4090(t, nil)
	acquire := func(model, session string) {
		t.Helper()
		release, err := m.AcquireRequest(t.Context(), Request{Model: model, Session: session})
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	acquire("coder", "one")
	m.ToolPause("coder", "one")
	clk.Advance(2 * time.Second)
	acquire("coder", "two") // another agent's turn on the same model
	clk.Advance(2 * time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.AcquireRequest(ctx, Request{Model: "other", Session: "three"}); !errors.Is(err, ErrBusy) {
		t.Fatalf("a request for the other model while session one is in its tool pause: %v, want ErrBusy", err)
	}
	if moves, _ := f.got(); !slices.Equal(moves, []string{"start coder"}) {
		t.Errorf("moves %q: session one's pause was ended by session two's request", moves)
	}
	clk.Advance(DefaultToolPauseGrace) // past session one's grace
	acquire("other", "three")
	if moves, _ := f.got(); !slices.Equal(moves, []string{"start coder", "sleep coder", "start other"}) {
		t.Errorf("moves %q", moves)
	}
}

// TestAnotherAgentsTurnWaitsNoLongerThanTheSwap: a turn for another model
// waits out a tool pause that began before it arrived, but once it has
// waited as long as bringing the resident model back would take (its
// 1-s wake), the resident model's next turn waits behind it, and a pause
// that began after it arrived no longer keeps the model.
func TestAnotherAgentsTurnWaitsNoLongerThanTheSwap(t *testing.T) {
	t.Parallel()
	enqueue := func(t *testing.T, m *Manager, model, session string) *Ticket {
		t.Helper()
		tk, err := m.Enqueue(Request{Model: model, Session: session})
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	want := []string{"start coder", "sleep coder", "start other"}
	t.Run("a pause after it arrived", func(t *testing.T) {
		t.Parallel()
		m, f, clk := twoOn4090(t, nil)
		release := tryAcquire(t, enqueue(t, m, "coder", "one"))
		other := enqueue(t, m, "other", "two")
		if tryAcquire(t, other) != nil {
			t.Fatal("the coder was evicted with a request in flight")
		}
		clk.Advance(3 * time.Second)
		release()
		m.ToolPause("coder", "one")
		if release := tryAcquire(t, other); release == nil {
			t.Fatal("the other agent's turn waits out a tool pause that began after it")
		} else {
			release()
		}
		if moves, _ := f.got(); !slices.Equal(moves, want) {
			t.Errorf("moves %q, want %q", moves, want)
		}
	})
	t.Run("a pause before it arrived", func(t *testing.T) {
		t.Parallel()
		m, f, clk := twoOn4090(t, nil)
		tryAcquire(t, enqueue(t, m, "coder", "one"))()
		m.ToolPause("coder", "one")
		other := enqueue(t, m, "other", "two")
		clk.Advance(5 * time.Second)
		if tryAcquire(t, other) != nil {
			t.Fatal("the other agent's turn evicted the coder in a tool pause that began before it")
		}
		next := enqueue(t, m, "coder", "one") // the loop's next turn, 5 s on
		if tryAcquire(t, next) != nil {
			t.Fatal("the loop's next turn went before the other agent's, waiting 5 s")
		}
		release := tryAcquire(t, other)
		if release == nil {
			t.Fatal("the other agent's turn still waits")
		}
		release()
		if moves, _ := f.got(); !slices.Equal(moves, want) {
			t.Errorf("moves %q, want %q", moves, want)
		}
	})
}
