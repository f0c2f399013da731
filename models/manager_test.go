package models

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

const gib = 1 << 30

// fakeMover records the moves, and what the manager said about the model
// being put away at that moment.
type fakeMover struct {
	m     *Manager
	mu    sync.Mutex
	moves []string
	busy  []string // models put away while requests were in flight on them
}

func (f *fakeMover) record(op, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moves = append(f.moves, op+" "+name)
}

func (f *fakeMover) Load(_ context.Context, name string, asleep bool) error {
	op := "start"
	if asleep {
		op = "wake"
	}
	f.record(op, name)
	return nil
}

func (f *fakeMover) putAway(op, name string) error {
	for _, st := range f.m.Statuses() {
		if st.Name == name && st.InFlight > 0 {
			f.mu.Lock()
			f.busy = append(f.busy, name)
			f.mu.Unlock()
		}
	}
	f.record(op, name)
	return nil
}

func (f *fakeMover) Sleep(_ context.Context, name string) error { return f.putAway("sleep", name) }
func (f *fakeMover) Stop(_ context.Context, name string) error  { return f.putAway("stop", name) }

func (f *fakeMover) got() ([]string, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.moves), slices.Clone(f.busy)
}

// twoOn4090 is a coder model and a second one that do not fit together on
// one 24 GB board.
func twoOn4090(t *testing.T, mutate func([]Model)) (*Manager, *fakeMover, *clock.Fake) {
	t.Helper()
	models := []Model{
		{Name: "coder", Bytes: 20 * gib, Wake: time.Second, Cold: 35 * time.Second, CanSleep: true},
		{Name: "other", Bytes: 20 * gib, Wake: time.Second, Cold: 35 * time.Second, CanSleep: true},
	}
	if mutate != nil {
		mutate(models)
	}
	clk := clock.NewFake(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	f := &fakeMover{}
	m, err := New(Options{Capacity: 24 * gib, Models: models, Mover: f, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return m, f, clk
}

func stateOf(m *Manager, name string) State {
	for _, st := range m.Statuses() {
		if st.Name == name {
			return st.State
		}
	}
	return ""
}

func TestSwapWaitsForInFlightRequests(t *testing.T) {
	t.Parallel()
	m, f, _ := twoOn4090(t, nil)
	ctx := t.Context()
	releaseCoder, err := m.Acquire(ctx, "coder")
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{}, 1)
	m.mu.Lock()
	m.waitingForRoom = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	m.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		release, err := m.Acquire(ctx, "other")
		if err == nil {
			release()
		}
		done <- err
	}()
	select {
	case <-waiting: // the request for the other model waits for room
	case err := <-done:
		moves, busy := f.got()
		t.Fatalf("the other model was served (%v) while the coder's request was in flight: moves %q, put away busy %q", err, moves, busy)
	}
	releaseCoder() // the coder's request ends; only now may it sleep
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	moves, busy := f.got()
	if want := []string{"start coder", "sleep coder", "start other"}; !slices.Equal(moves, want) {
		t.Errorf("moves %q, want %q", moves, want)
	}
	if len(busy) > 0 {
		t.Errorf("put away with requests in flight: %q", busy)
	}
	if s := stateOf(m, "coder"); s != Sleeping {
		t.Errorf("coder %s, want sleeping", s)
	}
	// Back to the coder: it wakes rather than starting cold.
	release, err := m.Acquire(ctx, "coder")
	if err != nil {
		t.Fatal(err)
	}
	release()
	if moves, _ := f.got(); moves[len(moves)-1] != "wake coder" {
		t.Errorf("last move %q, want wake coder", moves[len(moves)-1])
	}
}

func TestToolPauseIsNotEvictedBySideRequest(t *testing.T) {
	t.Parallel()
	m, f, clk := twoOn4090(t, func(ms []Model) { ms[0].KeepAlive = 10 * time.Minute })
	release, err := m.Acquire(t.Context(), "coder")
	if err != nil {
		t.Fatal(err)
	}
	release()
	m.ToolPause("coder", "") // the agent runs a tool; its next turn comes back to the coder
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.Acquire(ctx, "other"); !errors.Is(err, ErrBusy) {
		t.Fatalf("side request during the tool pause: %v, want ErrBusy", err)
	}
	if moves, _ := f.got(); !slices.Equal(moves, []string{"start coder"}) {
		t.Errorf("moves %q: the coder was disturbed in its tool pause", moves)
	}
	// Past the keep-alive the pause no longer protects it.
	clk.Advance(10 * time.Minute)
	release, err = m.Acquire(t.Context(), "other")
	if err != nil {
		t.Fatal(err)
	}
	release()
	if s := stateOf(m, "other"); s != Resident {
		t.Errorf("other %s, want resident", s)
	}
}

func TestPinnedIsNeverEvicted(t *testing.T) {
	t.Parallel()
	m, f, clk := twoOn4090(t, func(ms []Model) { ms[0].Pinned = true })
	release, err := m.Acquire(t.Context(), "coder")
	if err != nil {
		t.Fatal(err)
	}
	release()
	clk.Advance(24 * time.Hour)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.Acquire(ctx, "other"); !errors.Is(err, ErrBusy) {
		t.Fatalf("acquire other: %v, want ErrBusy", err)
	}
	m.expire(t.Context())
	if moves, _ := f.got(); !slices.Equal(moves, []string{"start coder"}) {
		t.Errorf("moves %q, want the pinned coder left alone", moves)
	}
}

func TestEvictionWeighsReloadCost(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	f := &fakeMover{}
	m, err := New(Options{Capacity: 24 * gib, Mover: f, Clock: clk, Models: []Model{
		// idle longer, but slow to bring back (no sleep mode)
		{Name: "slow", Bytes: 10 * gib, Cold: 40 * time.Second},
		{Name: "quick", Bytes: 10 * gib, Wake: time.Second, CanSleep: true},
		{Name: "new", Bytes: 10 * gib, Wake: time.Second, CanSleep: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	for _, name := range []string{"slow", "quick"} {
		release, err := m.Acquire(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		release()
		clk.Advance(time.Minute)
	}
	release, err := m.Acquire(t.Context(), "new")
	if err != nil {
		t.Fatal(err)
	}
	release()
	moves, _ := f.got()
	if want := []string{"start slow", "start quick", "sleep quick", "start new"}; !slices.Equal(moves, want) {
		t.Errorf("moves %q, want %q (the quick one goes though used later)", moves, want)
	}
}

// TestToolPauseGraceEndsBeforeKeepAlive: at the default keep-alive a tool
// pause protects its model for DefaultToolPauseGrace until pauses are seen,
// then for the p90 of the pauses seen, within the bounds; past the grace a
// request for the other model evicts it, though its keep-alive runs on.
func TestToolPauseGraceEndsBeforeKeepAlive(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		seen  []time.Duration // the pauses before the one under test
		grace time.Duration
	}{
		{"nothing seen yet", nil, DefaultToolPauseGrace},
		{"too few seen", slices.Repeat([]time.Duration{10 * time.Second}, toolPauseSamples-1), DefaultToolPauseGrace},
		{"learned p90", append(slices.Repeat([]time.Duration{3 * time.Second}, 7), 12*time.Second, 12*time.Second, 40*time.Second), 12 * time.Second},
		{"short tools, lower bound", slices.Repeat([]time.Duration{time.Second}, toolPauseSamples), MinToolPauseGrace},
		{"long tools, upper bound", slices.Repeat([]time.Duration{10 * time.Minute}, toolPauseSamples), MaxToolPauseGrace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, f, clk := twoOn4090(t, nil)
			turn := func() {
				t.Helper()
				release, err := m.Acquire(t.Context(), "coder")
				if err != nil {
					t.Fatal(err)
				}
				release()
			}
			turn()
			for _, p := range tc.seen {
				m.ToolPause("coder", "")
				clk.Advance(p)
				turn()
			}
			m.ToolPause("coder", "")
			clk.Advance(tc.grace - time.Millisecond)
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			if _, err := m.Acquire(ctx, "other"); !errors.Is(err, ErrBusy) {
				t.Fatalf("request for the other model within the grace: %v, want ErrBusy", err)
			}
			clk.Advance(time.Millisecond)
			// A bound on the wait, so that a coder still protected fails
			// the test instead of hanging it.
			ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			release, err := m.Acquire(ctx, "other")
			if err != nil {
				t.Fatalf("request for the other model past the grace: %v", err)
			}
			release()
			if moves, _ := f.got(); !slices.Equal(moves, []string{"start coder", "sleep coder", "start other"}) {
				t.Errorf("moves %q", moves)
			}
		})
	}
}

func TestKeepAliveExpiresIntoSleep(t *testing.T) {
	t.Parallel()
	m, f, clk := twoOn4090(t, func(ms []Model) { ms[0].KeepAlive = time.Minute })
	release, err := m.Acquire(t.Context(), "coder")
	if err != nil {
		t.Fatal(err)
	}
	release()
	m.expire(t.Context())
	if s := stateOf(m, "coder"); s != Resident {
		t.Fatalf("coder %s before its keep-alive, want resident", s)
	}
	clk.Advance(time.Minute)
	m.expire(t.Context())
	if s := stateOf(m, "coder"); s != Sleeping {
		t.Errorf("coder %s after its keep-alive, want sleeping", s)
	}
	if moves, _ := f.got(); !slices.Equal(moves, []string{"start coder", "sleep coder"}) {
		t.Errorf("moves %q", moves)
	}
}

func TestAcquireRefusesWhatCannotFit(t *testing.T) {
	t.Parallel()
	m, _, _ := twoOn4090(t, func(ms []Model) { ms[1].Bytes = 30 * gib })
	if _, err := m.Acquire(t.Context(), "other"); !errors.Is(err, ErrTooBig) {
		t.Errorf("30 GB on 24: %v, want ErrTooBig", err)
	}
	if _, err := m.Acquire(t.Context(), "nope"); err == nil {
		t.Error("an unconfigured model was acquired")
	}
	if _, err := New(Options{Mover: &fakeMover{}, Models: []Model{{Name: "a"}, {Name: "a"}}}); err == nil {
		t.Error("a model configured twice was accepted")
	}
}

func TestUnloadAndPin(t *testing.T) {
	t.Parallel()
	m, f, _ := twoOn4090(t, nil)
	if err := m.Load(t.Context(), "coder"); err != nil {
		t.Fatal(err)
	}
	if err := m.Pin("coder", true); err != nil {
		t.Fatal(err)
	}
	if err := m.Unload(t.Context(), "coder"); !errors.Is(err, ErrBusy) {
		t.Errorf("unloading a pinned model: %v, want ErrBusy", err)
	}
	release, err := m.Acquire(t.Context(), "coder")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Pin("coder", false); err != nil {
		t.Fatal(err)
	}
	if err := m.Unload(t.Context(), "coder"); !errors.Is(err, ErrBusy) {
		t.Errorf("unloading a model serving a request: %v, want ErrBusy", err)
	}
	release()
	m.ToolPause("coder", "") // an explicit unload overrides the pause
	if err := m.Unload(t.Context(), "coder"); err != nil {
		t.Fatal(err)
	}
	if s := stateOf(m, "coder"); s != Sleeping {
		t.Errorf("coder %s after unload, want sleeping", s)
	}
	if err := m.Pin("nope", true); err == nil {
		t.Error("pinned a model not configured")
	}
	if moves, _ := f.got(); !slices.Equal(moves, []string{"start coder", "sleep coder"}) {
		t.Errorf("moves %q", moves)
	}
}
