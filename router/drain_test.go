package router

import (
	"testing"

	"github.com/hearth-llm/hearth/kvtier"
)

// TestDrainedWorkerTakesNoNewRequests: a session's next turn leaves its
// drained worker for another although its prefix is cached there; the
// request running on the drained worker stays counted until it ends;
// undrained, the worker gets the session back by its cache. With every
// worker drained they all stay candidates.
func TestDrainedWorkerTakesNoNewRequests(t *testing.T) {
	for _, policy := range []string{PolicyKV, PolicyHearth, PolicyRoundRobin, PolicyLeastLoaded} {
		t.Run(policy, func(t *testing.T) {
			r, _ := newTestRouter(t, Config{Policy: policy}, WorkerInfo{Name: "rig", CapacityBlocks: 1000}, WorkerInfo{Name: "other", CapacityBlocks: 1000})
			prompt := chain("s", 40)
			r.Index().Store(0, kvtier.GPU, prompt[:32])
			running := route(t, r, &Request{ID: "inflight", Hashes: chain("x", 4), Exclude: []WorkerID{1}})
			if running.WorkerID != 0 {
				t.Fatalf("setup: the running request went to %d", running.WorkerID)
			}
			if !r.SetDrained(0, true) {
				t.Fatal("SetDrained of a live worker reported it gone")
			}
			if w := load(t, r, 0); !w.Drained || w.ActiveRequests != 1 {
				t.Errorf("drained worker's load %+v: want drained with its running request", w)
			}
			for i := range 4 {
				d := route(t, r, &Request{ID: "turn" + string(rune('a'+i)), Hashes: prompt, SessionID: "s"})
				if d.WorkerID != 1 {
					t.Fatalf("turn %d went to the drained worker", i)
				}
				for _, c := range d.Candidates {
					if c.WorkerID == 0 {
						t.Errorf("the drained worker is a candidate")
					}
				}
				r.Free(d.RequestID)
			}
			if !r.Free("inflight") {
				t.Error("the request running on the drained worker was forgotten")
			}
			r.SetDrained(0, false)
			if w := load(t, r, 0); w.Drained {
				t.Error("undrained worker still reads drained")
			}
			if policy == PolicyKV || policy == PolicyHearth {
				if d := route(t, r, &Request{ID: "back", Hashes: chain("s", 33)}); d.WorkerID != 0 {
					t.Errorf("after the drain, a prompt cached on the worker went to %d", d.WorkerID)
				}
			}
			r.SetDrained(0, true)
			r.SetDrained(1, true)
			d := route(t, r, &Request{ID: "all", Hashes: prompt})
			if len(d.Candidates) != 2 {
				t.Errorf("with every worker drained, %d candidates; want both", len(d.Candidates))
			}
			if r.SetDrained(7, true) {
				t.Error("SetDrained of no worker reported it live")
			}
		})
	}
}

// TestDrainedWorkerIsNoRoomForTheQueue: a request queued while the one
// undrained worker is saturated is not dispatched to the drained worker
// with room, and is dispatched when the undrained worker frees.
func TestDrainedWorkerIsNoRoomForTheQueue(t *testing.T) {
	r, _ := newTestRouter(t, Config{Policy: PolicyRoundRobin, SaturationFraction: 0.5},
		WorkerInfo{Name: "rig", CapacityBlocks: 10}, WorkerInfo{Name: "other", CapacityBlocks: 10})
	r.SetDrained(0, true)
	first := route(t, r, &Request{ID: "big", Hashes: chain("big", 6)})
	if first.WorkerID != 1 {
		t.Fatalf("first request went to the drained worker")
	}
	_, ticket, err := r.Enqueue(&Request{ID: "waits", Hashes: chain("w", 2)})
	if err != nil {
		t.Fatal(err)
	}
	if ticket == nil {
		t.Fatal("the request was routed at once although the only undrained worker is saturated")
	}
	r.Free("big")
	select {
	case <-ticket.Done():
	default:
		t.Fatal("the queued request was not dispatched when the undrained worker freed")
	}
	d, err := ticket.Result()
	if err != nil || d.WorkerID != 1 {
		t.Errorf("the queued request went to %d (%v), want the undrained worker", d.WorkerID, err)
	}
}
