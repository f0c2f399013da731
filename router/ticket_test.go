package router

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/kvtier"
)

func TestEnqueueTicket(t *testing.T) {
	r, clk := newTestRouter(t, Config{Policy: PolicyKV, SaturationFraction: 0.5, QueueSize: 4},
		WorkerInfo{Name: "a", CapacityBlocks: 10})

	d, ticket, err := r.Enqueue(&Request{ID: "first", Hashes: chain("first", 6)})
	if err != nil || ticket != nil {
		t.Fatalf("Enqueue on an idle worker: ticket %v, err %v; want an immediate decision", ticket, err)
	}
	if d.RequestID != "first" || d.Queued != 0 {
		t.Fatalf("immediate decision %+v", d)
	}

	_, waiting, err := r.Enqueue(&Request{ID: "waiting", Hashes: chain("waiting", 6)})
	if err != nil || waiting == nil {
		t.Fatalf("Enqueue on a saturated worker: ticket %v, err %v; want a ticket", waiting, err)
	}
	_, cancelled, err := r.Enqueue(&Request{ID: "cancelled", Hashes: chain("cancelled", 6)})
	if err != nil || cancelled == nil {
		t.Fatalf("second waiter: ticket %v, err %v", cancelled, err)
	}
	if waiting.Ready() {
		t.Fatal("ticket ready before any worker was freed")
	}
	if _, err := waiting.Result(); !errors.Is(err, ErrTicketPending) {
		t.Fatalf("Result while queued: %v, want ErrTicketPending", err)
	}
	if got := waiting.Request().ID; got != "waiting" {
		t.Errorf("Request().ID = %q", got)
	}

	if !cancelled.Cancel() {
		t.Fatal("Cancel of a queued ticket reported false")
	}
	if _, err := cancelled.Result(); !errors.Is(err, ErrTicketCancelled) {
		t.Errorf("cancelled ticket's result: %v, want ErrTicketCancelled", err)
	}
	if n := r.QueueLen(); n != 1 {
		t.Fatalf("queue length %d after cancel, want 1", n)
	}

	clk.Advance(3 * time.Second)
	r.Free("first") // dispatches inside the call
	select {
	case <-waiting.Done():
	default:
		t.Fatal("Free did not dispatch the queued request")
	}
	got, err := waiting.Result()
	if err != nil || got.RequestID != "waiting" || got.Queued != 3*time.Second {
		t.Fatalf("dispatched: %+v, %v; want request waiting, queued 3s", got, err)
	}
	if waiting.Order() == 0 {
		t.Error("a dispatched ticket has no order")
	}
	if waiting.Cancel() {
		t.Error("Cancel after dispatch reported true")
	}
	if !r.Free("waiting") {
		t.Error("the dispatched request is not running")
	}
	if r.Free("cancelled") {
		t.Error("the cancelled request was routed")
	}
}

func TestEnqueueQueueFull(t *testing.T) {
	r, _ := newTestRouter(t, Config{Policy: PolicyKV, SaturationFraction: 0.5, QueueSize: 1},
		WorkerInfo{Name: "a", CapacityBlocks: 10})
	route(t, r, &Request{ID: "first", Hashes: chain("first", 6)})
	if _, tk, err := r.Enqueue(&Request{ID: "q1", Hashes: chain("q1", 6)}); err != nil || tk == nil {
		t.Fatalf("first waiter: %v, %v", tk, err)
	}
	if _, tk, err := r.Enqueue(&Request{ID: "q2", Hashes: chain("q2", 6)}); !errors.Is(err, ErrQueueFull) || tk != nil {
		t.Errorf("second waiter: ticket %v, err %v; want ErrQueueFull", tk, err)
	}
}

// TestQueueOrderByCost checks the order in which queued requests leave:
// for hearth, earliest deadline first, a deadline being the arrival plus
// QueueStretch × the request's own cost; for kv and round_robin, arrival.
// The clock stays within ActiveTTL, so that no running request expires
// and dispatches on its own. One worker, which one running request
// saturates; a freed request dispatches exactly one waiter. "cheap" has
// its whole prompt cached on the worker, "dear" none of it: both hold 64
// of the 100 blocks (0.64 s at DecodeWeight 1), and dear must also
// prefill 1,024 tokens at 1,000 tokens/s, 1.024 s more. At the default
// stretch of 5 cheap overtakes dear only if it arrives within 5.12 s.
func TestQueueOrderByCost(t *testing.T) {
	type arrival struct {
		id       string
		after    time.Duration // since the previous arrival
		priority int
	}
	tests := []struct {
		name     string
		policy   string
		stretch  float64
		arrivals []arrival
		want     string
	}{
		{"hearth: cheaper first", PolicyHearth, 0,
			[]arrival{{"dear", 0, 0}, {"cheap", 0, 0}}, "[cheap dear]"},
		{"hearth: cheaper first although 5s later", PolicyHearth, 0,
			[]arrival{{"dear", 0, 0}, {"cheap", 5 * time.Second, 0}}, "[cheap dear]"},
		{"hearth: overtaking bounded, 6s later is too late", PolicyHearth, 0,
			[]arrival{{"dear", 0, 0}, {"cheap", 6 * time.Second, 0}}, "[dear cheap]"},
		{"hearth: stretch 20 bounds it at 20.48s", PolicyHearth, 20,
			[]arrival{{"dear", 0, 0}, {"cheap", 20 * time.Second, 0}}, "[cheap dear]"},
		{"hearth: stretch 20, 21s later is too late", PolicyHearth, 20,
			[]arrival{{"dear", 0, 0}, {"cheap", 21 * time.Second, 0}}, "[dear cheap]"},
		{"hearth: negative stretch, arrival order", PolicyHearth, -1,
			[]arrival{{"dear", 0, 0}, {"cheap", 0, 0}}, "[dear cheap]"},
		{"hearth: priority before cost", PolicyHearth, 0,
			[]arrival{{"cheap", 0, 0}, {"dear", 0, 3}}, "[dear cheap]"},
		{"hearth: a level of priority is worth 2s, less than dear's cost", PolicyHearth, 0,
			[]arrival{{"cheap", 0, 0}, {"dear", 0, 1}}, "[cheap dear]"},
		{"kv: arrival order", PolicyKV, 0,
			[]arrival{{"dear", 0, 0}, {"cheap", 0, 0}}, "[dear cheap]"},
		{"kv: priority still orders", PolicyKV, 0,
			[]arrival{{"cheap", 0, 0}, {"dear", 0, 1}}, "[dear cheap]"},
		{"round_robin: arrival order", PolicyRoundRobin, 0,
			[]arrival{{"dear", 0, 0}, {"cheap", time.Second, 0}}, "[dear cheap]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, clk := newTestRouter(t, Config{
				Policy: tc.policy, SaturationFraction: 0.5, QueueSize: 8,
				Hearth: HearthConfig{QueueStretch: tc.stretch},
			}, WorkerInfo{Name: "a", CapacityBlocks: 100, PrefillTokensPerSec: 1000})
			r.Index().Store(0, kvtier.GPU, chain("cheap", 64))
			route(t, r, &Request{ID: "first", Hashes: chain("first", 60)})
			tickets := map[string]*Ticket{}
			for _, a := range tc.arrivals {
				clk.Advance(a.after)
				_, tk, err := r.Enqueue(&Request{ID: a.id, Hashes: chain(a.id, 64), Hints: Hints{Priority: a.priority}})
				if err != nil || tk == nil {
					t.Fatalf("Enqueue(%s): ticket %v, err %v", a.id, tk, err)
				}
				tickets[a.id] = tk
			}
			var order []string
			prev := "first"
			for range tc.arrivals {
				clk.Advance(time.Second)
				r.Free(prev)
				var next []string
				for id, tk := range tickets {
					if tk.Ready() {
						if _, err := tk.Result(); err != nil {
							t.Fatalf("%s: %v", id, err)
						}
						next = append(next, id)
						delete(tickets, id)
					}
				}
				if len(next) != 1 {
					t.Fatalf("Free(%s) dispatched %v, want one request", prev, next)
				}
				prev = next[0]
				order = append(order, prev)
			}
			if got := fmt.Sprint(order); got != tc.want {
				t.Errorf("dispatch order %s, want %s", got, tc.want)
			}
		})
	}
}

// TestQueuePriorityBound: a request of lower priority (a side request, a
// background prefill) is served after requests of higher priority that
// arrive up to (difference × PriorityWait) after it, and before later
// ones, so that a steady stream of turns never starves it. The arrivals
// all wait before the first dispatch; the kv policy orders equal
// priorities by arrival.
func TestQueuePriorityBound(t *testing.T) {
	type arrival struct {
		id       string
		after    time.Duration // since the previous arrival
		priority int
	}
	tests := []struct {
		name     string
		wait     time.Duration // Config.PriorityWait
		arrivals []arrival
		want     string
	}{
		{"turn arriving later goes first", 0,
			[]arrival{{"side", 0, -1}, {"turn", time.Second, 0}}, "[turn side]"},
		{"turn arriving at the bound does not", 0,
			[]arrival{{"side", 0, -1}, {"turn", 2 * time.Second, 0}}, "[side turn]"},
		{"turn arriving after the bound does not", 0,
			[]arrival{{"side", 0, -1}, {"turn", 3 * time.Second, 0}}, "[side turn]"},
		{"background waits two levels", 0,
			[]arrival{{"bg", 0, -2}, {"side", 0, -1}, {"turn", 3 * time.Second, 0}, {"turn2", 2 * time.Second, 0}},
			"[side turn bg turn2]"},
		{"a longer wait per level", 10 * time.Second,
			[]arrival{{"side", 0, -1}, {"turn", 9 * time.Second, 0}}, "[turn side]"},
		{"negative wait: priority is strict", -1,
			[]arrival{{"side", 0, -1}, {"turn", time.Hour, 0}}, "[turn side]"},
		{"stream of turns: only those within the bound pass the side request", 0,
			[]arrival{{"side", 0, -1}, {"t1", time.Second, 0}, {"t2", time.Second, 0}, {"t3", time.Second, 0},
				{"t4", time.Second, 0}, {"t5", time.Second, 0}},
			"[t1 side t2 t3 t4 t5]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, clk := newTestRouter(t, Config{
				Policy: PolicyKV, SaturationFraction: 0.5, QueueSize: 8, PriorityWait: tc.wait,
				ActiveTTL: 24 * time.Hour,
			}, WorkerInfo{Name: "a", CapacityBlocks: 100})
			route(t, r, &Request{ID: "first", Hashes: chain("first", 60)})
			tickets := map[string]*Ticket{}
			for _, a := range tc.arrivals {
				clk.Advance(a.after)
				_, tk, err := r.Enqueue(&Request{ID: a.id, Hashes: chain(a.id, 64), Hints: Hints{Priority: a.priority}})
				if err != nil || tk == nil {
					t.Fatalf("Enqueue(%s): ticket %v, err %v", a.id, tk, err)
				}
				tickets[a.id] = tk
			}
			var order []string
			prev := "first"
			for range tc.arrivals {
				r.Free(prev)
				var next []string
				for id, tk := range tickets {
					if tk.Ready() {
						if _, err := tk.Result(); err != nil {
							t.Fatalf("%s: %v", id, err)
						}
						next = append(next, id)
						delete(tickets, id)
					}
				}
				if len(next) != 1 {
					t.Fatalf("Free(%s) dispatched %v, want one request", prev, next)
				}
				prev = next[0]
				order = append(order, prev)
			}
			if got := fmt.Sprint(order); got != tc.want {
				t.Errorf("dispatch order %s, want %s", got, tc.want)
			}
		})
	}
}
