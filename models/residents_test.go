package models

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// TestModelsThatFitTogetherStayResident: a small model that fits beside the
// large one loads without evicting it, and a third model that fits only
// beside the small one evicts the large one alone.
func TestModelsThatFitTogetherStayResident(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	f := &fakeMover{}
	m, err := New(Options{Capacity: 22 * gib, Mover: f, Clock: clk, Models: []Model{
		{Name: "coder", Bytes: 15 * gib, Wake: time.Second, Cold: 35 * time.Second, CanSleep: true},
		{Name: "small", Bytes: 6 * gib, Wake: time.Second, Cold: 20 * time.Second, CanSleep: true},
		{Name: "reasoner", Bytes: 15 * gib, Wake: time.Second, Cold: 35 * time.Second, CanSleep: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	for _, name := range []string{"coder", "small"} {
		if err := m.Load(t.Context(), name); err != nil {
			t.Fatal(err)
		}
	}
	if moves, _ := f.got(); !slices.Equal(moves, []string{"start coder", "start small"}) {
		t.Errorf("moves %q, want both started and nothing put away", moves)
	}
	if st := stateOf(m, "coder"); st != Resident {
		t.Errorf("coder is %s beside the small model, want resident", st)
	}
	clk.Advance(time.Minute)
	if err := m.Load(t.Context(), "reasoner"); err != nil {
		t.Fatal(err)
	}
	if moves, _ := f.got(); !slices.Equal(moves[2:], []string{"sleep coder", "start reasoner"}) {
		t.Errorf("moves %q, want the coder alone put to sleep for the reasoner", moves[2:])
	}
	if st := stateOf(m, "small"); st != Resident {
		t.Errorf("small is %s, want still resident", st)
	}
}

// clockedMover takes, on the fake clock, the time each move would.
type clockedMover struct {
	clk                *clock.Fake
	load, wake, asleep time.Duration
}

func (c *clockedMover) Load(_ context.Context, _ string, asleep bool) error {
	if asleep {
		c.clk.Advance(c.wake)
	} else {
		c.clk.Advance(c.load)
	}
	return nil
}
func (c *clockedMover) Sleep(context.Context, string) error { c.clk.Advance(c.asleep); return nil }
func (c *clockedMover) Stop(context.Context, string) error  { return nil }

// TestTransitionsAreRecordedWithTheirDurations: every load, sleep and wake
// is kept with when it began and how long it took on the Manager's clock,
// and the record keeps only the latest MaxTransitions.
func TestTransitionsAreRecordedWithTheirDurations(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	mv := &clockedMover{clk: clk, load: 30 * time.Second, wake: 2 * time.Second, asleep: time.Second}
	m, err := New(Options{Capacity: 24 * gib, Mover: mv, Clock: clk, Models: []Model{
		{Name: "coder", Bytes: 20 * gib, CanSleep: true},
		{Name: "other", Bytes: 20 * gib, CanSleep: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"coder", "other", "coder"} {
		if err := m.Load(t.Context(), name); err != nil {
			t.Fatal(err)
		}
	}
	want := []Transition{
		{Model: "coder", Kind: Load, At: start, Took: 30 * time.Second},
		{Model: "coder", Kind: Sleep, At: start.Add(30 * time.Second), Took: time.Second},
		{Model: "other", Kind: Load, At: start.Add(31 * time.Second), Took: 30 * time.Second},
		{Model: "other", Kind: Sleep, At: start.Add(61 * time.Second), Took: time.Second},
		{Model: "coder", Kind: Wake, At: start.Add(62 * time.Second), Took: 2 * time.Second},
	}
	if got := m.Transitions(); !slices.Equal(got, want) {
		t.Errorf("transitions\n%v\nwant\n%v", got, want)
	}
	for range MaxTransitions {
		if err := m.Load(t.Context(), "other"); err != nil {
			t.Fatal(err)
		}
		if err := m.Load(t.Context(), "coder"); err != nil {
			t.Fatal(err)
		}
	}
	got := m.Transitions()
	if len(got) != MaxTransitions {
		t.Fatalf("%d transitions kept, want the latest %d", len(got), MaxTransitions)
	}
	if last := got[len(got)-1]; last.Model != "coder" || last.Kind != Wake || !last.At.After(want[4].At) {
		t.Errorf("the newest kept is %+v, want the last wake of coder", last)
	}
}

// gatedMover is a clockedMover whose wakes wait for the test: a model
// stays Loading while the test looks at its progress.
type gatedMover struct {
	clockedMover
	waking chan struct{} // receives when a wake begins
	done   chan struct{} // the wake ends when this receives
}

func (g *gatedMover) Load(ctx context.Context, name string, asleep bool) error {
	if asleep {
		g.waking <- struct{}{}
		<-g.done
		return nil
	}
	return g.clockedMover.Load(ctx, name, asleep)
}

// TestLoadingReportsProgress: while a model loads, its status says how long
// the swap has run and how long it should take: the model's own estimate
// for a step it has not taken before, then what the step took last time,
// with putting the resident model away counted in.
func TestLoadingReportsProgress(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	g := &gatedMover{
		clockedMover: clockedMover{clk: clk, load: 30 * time.Second, asleep: 3 * time.Second},
		waking:       make(chan struct{}), done: make(chan struct{}),
	}
	m, err := New(Options{Capacity: 24 * gib, Mover: g, Clock: clk, Models: []Model{
		{Name: "coder", Bytes: 20 * gib, Wake: 7 * time.Second, Cold: time.Minute, CanSleep: true},
		{Name: "other", Bytes: 20 * gib, Wake: 7 * time.Second, Cold: time.Minute, CanSleep: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"coder", "other"} { // the coder sleeps for the other
		if err := m.Load(t.Context(), name); err != nil {
			t.Fatal(err)
		}
	}
	// wake loads name with its wake held 2 s on the fake clock, and
	// returns its status while it wakes.
	wake := func(name string) Status {
		loaded := make(chan error, 1)
		go func() { loaded <- m.Load(t.Context(), name) }()
		<-g.waking // the resident one was put away (3 s); the wake runs
		clk.Advance(2 * time.Second)
		var st Status
		for _, s := range m.Statuses() {
			if s.Name == name {
				st = s
			}
		}
		g.done <- struct{}{}
		if err := <-loaded; err != nil {
			t.Fatal(err)
		}
		return st
	}
	for i, want := range []struct {
		model    string
		expected time.Duration
	}{
		// The other has never been put away, and the coder never woken:
		// its estimate, 7 s.
		{"coder", 7 * time.Second},
		// The coder's sleep took 3 s before; the other's wake is its
		// estimate.
		{"other", 10 * time.Second},
		// The other's sleep took 3 s and the coder's wake 2 s.
		{"coder", 5 * time.Second},
	} {
		st := wake(want.model)
		if st.State != Loading || st.LoadElapsed != 5*time.Second || st.LoadExpected != want.expected {
			t.Errorf("wake %d of %s: %+v, want loading, 5 s of an expected %v", i+1, want.model, st, want.expected)
		}
	}
	for _, s := range m.Statuses() {
		if s.LoadElapsed != 0 || s.LoadExpected != 0 {
			t.Errorf("%s is %s with load progress %v of %v, want none once loaded", s.Name, s.State, s.LoadElapsed, s.LoadExpected)
		}
	}
}
