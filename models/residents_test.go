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
