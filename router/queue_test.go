package router

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
)

// saturatingRouter has one worker of 10 blocks that one 6-block request
// saturates (fraction 0.5).
func saturatingRouter(t *testing.T, queueSize int) *Router {
	t.Helper()
	r, _ := newTestRouter(t, Config{Policy: PolicyKV, SaturationFraction: 0.5, QueueSize: queueSize},
		WorkerInfo{Name: "a", CapacityBlocks: 10})
	return r
}

func TestQueueOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := saturatingRouter(t, 16)
		route(t, r, &Request{ID: "first", Hashes: chain("first", 6)})
		done := make(chan string, 8)
		arrivals := []struct {
			id             string
			strict, normal int
		}{
			{"a", 0, 0},
			{"b", 0, 5},
			{"c", 1, 0},
			{"d", 0, 5},
			{"e", -1, 100},
		}
		for _, a := range arrivals {
			go func() {
				d, err := r.Route(context.Background(), &Request{ID: a.id, Hashes: chain(a.id, 6),
					Hints: Hints{StrictPriority: a.strict, Priority: a.normal}})
				if err != nil {
					t.Errorf("Route(%s): %v", a.id, err)
				}
				done <- d.RequestID
			}()
			synctest.Wait() // arrival order is the order of this loop
		}
		if n := r.QueueLen(); n != len(arrivals) {
			t.Fatalf("%d queued, want %d", n, len(arrivals))
		}
		prev := "first"
		var order []string
		for range arrivals {
			r.Free(prev)
			synctest.Wait()
			select {
			case prev = <-done:
				order = append(order, prev)
			default:
				t.Fatalf("Free(%s) dispatched nothing", prev)
			}
		}
		if got, want := fmt.Sprint(order), "[c b d a e]"; got != want {
			t.Errorf("dispatch order %s, want %s", got, want)
		}
		if d := r.Decisions(1)[0]; d.RequestID != "e" {
			t.Errorf("last decision %s", d.RequestID)
		}
	})
}

func TestQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := saturatingRouter(t, 2)
		route(t, r, &Request{ID: "first", Hashes: chain("first", 6)})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for _, id := range []string{"q1", "q2"} {
			go r.Route(ctx, &Request{ID: id, Hashes: chain(id, 6)})
		}
		synctest.Wait()
		if _, err := r.Route(ctx, &Request{ID: "q3", Hashes: chain("q3", 6)}); !errors.Is(err, ErrQueueFull) {
			t.Errorf("third waiter: err = %v, want ErrQueueFull", err)
		}
		cancel()
		synctest.Wait()
	})
}

func TestQueueCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := saturatingRouter(t, 4)
		route(t, r, &Request{ID: "first", Hashes: chain("first", 6)})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := r.Route(ctx, &Request{ID: "w", Hashes: chain("w", 6)})
			errc <- err
		}()
		synctest.Wait()
		if r.QueueLen() != 1 {
			t.Fatalf("queue length %d, want 1", r.QueueLen())
		}
		cancel()
		synctest.Wait()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if r.QueueLen() != 0 {
			t.Errorf("cancelled waiter still queued")
		}
		r.Free("first")
		if r.Free("w") {
			t.Error("cancelled request was routed")
		}
	})
}

func TestQueueFailsWhenLastWorkerLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := saturatingRouter(t, 4)
		route(t, r, &Request{ID: "first", Hashes: chain("first", 6)})
		errc := make(chan error, 1)
		go func() {
			_, err := r.Route(context.Background(), &Request{ID: "w", Hashes: chain("w", 6)})
			errc <- err
		}()
		synctest.Wait()
		r.RemoveWorker(0)
		if err := <-errc; !errors.Is(err, ErrNoWorker) {
			t.Errorf("err = %v, want ErrNoWorker", err)
		}
	})
}

func TestQueuePendingTokensSaturate(t *testing.T) {
	r, _ := newTestRouter(t, Config{Policy: PolicyKV, SaturationPendingTokens: 100, QueueSize: 4},
		WorkerInfo{Name: "a"})
	route(t, r, &Request{ID: "big", Hashes: chain("big", 8)}) // 128 tokens pending
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Route(ctx, &Request{ID: "next", Hashes: chain("n", 1)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v: want the request held in the queue until ctx ended", err)
	}
	r.PrefillDone("big")
	route(t, r, &Request{ID: "next", Hashes: chain("n", 1)})
}
