package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hearth-llm/hearth/kvevents"
)

// startRunner runs r in the background until the test's bubble ends.
func startRunner(t *testing.T, r *Runner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

func collect(ch <-chan TokenOutput) []TokenOutput {
	var out []TokenOutput
	for o := range ch {
		out = append(out, o)
	}
	return out
}

func TestRunnerDeliversTokens(t *testing.T) {
	tests := []struct {
		name    string
		speedup float64
	}{
		{"real time", 1},
		{"100x", 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				core := newCore(t, Config{}, nil)
				r := NewRunner(core, RunnerOptions{Speedup: tt.speedup})
				stop := startRunner(t, r)
				defer stop()

				// The same requests on a Core in virtual time give the
				// reference timings.
				ref := newDriver(newCore(t, Config{}, nil))
				start := time.Now()
				var wg sync.WaitGroup
				got := make([][]TokenOutput, 3)
				for i := range 3 {
					req := &Request{ID: fmt.Sprint(i), Prompt: tokens(i*1000, 3000), Output: tokens(i*10, 20)}
					mustAdd(t, ref.core, 0, &Request{ID: req.ID, Prompt: req.Prompt, Output: req.Output})
					ch, err := r.Submit(t.Context(), req)
					if err != nil {
						t.Fatal(err)
					}
					wg.Go(func() { got[i] = collect(ch) })
				}
				wg.Wait()
				elapsed := time.Since(start)
				ref.run(t)

				for i, outs := range got {
					if len(outs) != 20 || !outs[19].Finished {
						t.Fatalf("request %d: %d outputs, want 20 ending Finished", i, len(outs))
					}
					var toks []uint32
					for _, o := range outs {
						toks = append(toks, o.Token)
					}
					if !slices.Equal(toks, tokens(i*10, 20)) {
						t.Errorf("request %d tokens %v", i, toks)
					}
				}
				// In the bubble time is exact: wall time is the modelled
				// time divided by the speed-up.
				want := time.Duration(float64(ref.now) / tt.speedup)
				if diff := elapsed - want; diff < -time.Millisecond || diff > time.Millisecond {
					t.Errorf("took %v of wall time, want %v (modelled %v / %v)", elapsed, want, ref.now, tt.speedup)
				}
				if s := r.Stats(); s.GenerationTokens != 60 || s.Running != 0 {
					t.Errorf("stats %+v", s)
				}
			})
		})
	}
}

func TestRunnerCancelAborts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core := newCore(t, Config{}, nil)
		r := NewRunner(core, RunnerOptions{})
		stop := startRunner(t, r)
		defer stop()

		ctx, cancel := context.WithCancel(t.Context())
		ch, err := r.Submit(ctx, &Request{ID: "a", Prompt: tokens(1, 2000), Output: tokens(1, 1000)})
		if err != nil {
			t.Fatal(err)
		}
		// Read a few tokens, then hang up.
		for range 5 {
			if _, ok := <-ch; !ok {
				t.Fatal("channel closed early")
			}
		}
		if s := r.Stats(); s.UsedBlocks == 0 || s.Running != 1 {
			t.Fatalf("while running: %+v", s)
		}
		cancel()
		synctest.Wait()
		rest := collect(ch) // must end: the channel is closed
		for _, o := range rest {
			if o.Finished {
				t.Errorf("aborted request got a Finished output %+v", o)
			}
		}
		if s := r.Stats(); s.UsedBlocks != 0 || s.Running != 0 || s.Waiting != 0 {
			t.Errorf("after cancel: %+v", s)
		}
		// The id can be used again.
		ch, err = r.Submit(t.Context(), &Request{ID: "a", Prompt: tokens(1, 2000), Output: tokens(1, 2)})
		if err != nil {
			t.Fatal(err)
		}
		outs := collect(ch)
		if len(outs) != 2 || outs[0].CachedTokens != 1984 {
			t.Errorf("resubmitted: %+v; want 2 outputs hitting the aborted request's prefix", outs)
		}
	})
}

func TestRunnerCancelWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core := newCore(t, Config{MaxNumSeqs: 1}, nil)
		r := NewRunner(core, RunnerOptions{})
		stop := startRunner(t, r)
		defer stop()
		long, err := r.Submit(t.Context(), &Request{ID: "long", Prompt: tokens(1, 100), Output: tokens(1, 50)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		queued, err := r.Submit(ctx, &Request{ID: "queued", Prompt: tokens(5000, 100), Output: tokens(1, 5)})
		if err != nil {
			t.Fatal(err)
		}
		<-long // first token: "queued" is waiting behind it
		if s := r.Stats(); s.Waiting != 1 {
			t.Fatalf("waiting = %d, want 1", s.Waiting)
		}
		cancel()
		if outs := collect(queued); len(outs) != 0 {
			t.Errorf("cancelled waiting request produced %d outputs", len(outs))
		}
		synctest.Wait()
		if s := r.Stats(); s.Waiting != 0 {
			t.Errorf("waiting = %d after cancel, want 0", s.Waiting)
		}
		if n := len(collect(long)); n != 49 {
			t.Errorf("long request got %d more tokens, want 49", n)
		}
	})
}

func TestRunnerSubmitErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core := newCore(t, Config{MaxModelLen: 1000}, nil)
		r := NewRunner(core, RunnerOptions{})
		stop := startRunner(t, r)
		if _, err := r.Submit(t.Context(), &Request{ID: "a", Prompt: tokens(1, 10), Output: tokens(1, 100)}); err != nil {
			t.Fatal(err)
		}
		cancelled, cancel := context.WithCancel(t.Context())
		cancel()
		tests := []struct {
			name string
			ctx  context.Context
			req  *Request
			want error
		}{
			{"duplicate", t.Context(), &Request{ID: "a", Prompt: tokens(1, 10), Output: tokens(1, 1)}, ErrDuplicateID},
			{"too long", t.Context(), &Request{ID: "b", Prompt: tokens(1, 1000), Output: tokens(1, 1)}, ErrPromptTooLong},
			{"cancelled", cancelled, &Request{ID: "c", Prompt: tokens(1, 10), Output: tokens(1, 1)}, context.Canceled},
		}
		for _, tt := range tests {
			if _, err := r.Submit(tt.ctx, tt.req); !errors.Is(err, tt.want) {
				t.Errorf("%s: Submit = %v, want %v", tt.name, err, tt.want)
			}
		}
		stop()
		if _, err := r.Submit(t.Context(), &Request{ID: "d", Prompt: tokens(1, 10), Output: tokens(1, 1)}); !errors.Is(err, ErrStopped) {
			t.Errorf("Submit after Run returned: %v, want ErrStopped", err)
		}
	})
}

func TestRunnerStopClosesChannels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRunner(newCore(t, Config{}, nil), RunnerOptions{})
		stop := startRunner(t, r)
		ch, err := r.Submit(t.Context(), &Request{ID: "a", Prompt: tokens(1, 10), Output: tokens(1, 10_000)})
		if err != nil {
			t.Fatal(err)
		}
		<-ch
		stop()
		for range ch { // must terminate
		}
	})
}

// recordingSink records event batches and the goroutine-free order they came in.
type recordingSink struct {
	mu      sync.Mutex
	batches [][]kvevents.Kind
	times   []time.Duration
}

func (s *recordingSink) PublishKVEvents(now time.Duration, events []kvevents.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var types []kvevents.Kind
	for _, e := range events {
		types = append(types, e.Kind)
	}
	s.batches = append(s.batches, types)
	s.times = append(s.times, now)
}

func TestRunnerResetAndEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &recordingSink{}
		r := NewRunner(newCore(t, Config{}, sink), RunnerOptions{Speedup: 10})
		stop := startRunner(t, r)
		defer stop()
		ch, err := r.Submit(t.Context(), &Request{ID: "a", Prompt: tokens(1, 64), Output: tokens(1, 3)})
		if err != nil {
			t.Fatal(err)
		}
		collect(ch)
		if s := r.Stats(); s.CachedFreeBlocks != 4 {
			t.Fatalf("cached free blocks %d, want 4", s.CachedFreeBlocks)
		}
		r.Reset()
		synctest.Wait()
		if s := r.Stats(); s.CachedFreeBlocks != 0 {
			t.Errorf("cached free blocks after Reset %d, want 0", s.CachedFreeBlocks)
		}
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if len(sink.batches) != 2 || sink.batches[0][0] != kvevents.BlockStored || sink.batches[1][0] != kvevents.AllBlocksCleared {
			t.Errorf("event batches %v, want [BlockStored] then [AllBlocksCleared]", sink.batches)
		}
		if !slices.IsSorted(sink.times) {
			t.Errorf("event times not in order: %v", sink.times)
		}
	})
}

func TestRunnerWaitsEachStep(t *testing.T) {
	// Each step waits its modelled duration / speed-up. In the bubble time
	// moves only while every goroutine waits, so the gaps between tokens
	// are exactly the runner's waits.
	synctest.Test(t, func(t *testing.T) {
		sink := &recordingSink{}
		core := newCore(t, Config{}, sink)
		ref := newDriver(newCore(t, Config{}, nil))
		req := Request{ID: "a", Prompt: tokens(1, 6000), Output: tokens(1, 4)}
		mustAdd(t, ref.core, 0, &req)
		var want []time.Duration
		for ref.core.HasWork() {
			want = append(want, ref.step(t).Duration/4)
		}

		r := NewRunner(core, RunnerOptions{Speedup: 4})
		stop := startRunner(t, r)
		defer stop()
		ch, err := r.Submit(t.Context(), &Request{ID: "a", Prompt: req.Prompt, Output: req.Output})
		if err != nil {
			t.Fatal(err)
		}
		batches := func() int {
			sink.mu.Lock()
			defer sink.mu.Unlock()
			return len(sink.batches)
		}
		var got []time.Duration
		last := time.Now()
		for i := range want {
			// The step runs; its events wait for its end.
			synctest.Wait()
			if n := batches(); i == 0 && n != 0 {
				t.Errorf("step %d: %d event batches published before the step ended", i, n)
			}
			o := <-ch
			got = append(got, time.Since(last))
			last = time.Now()
			if i == 0 && batches() != 1 {
				t.Errorf("after the prefill step: %d event batches, want 1", batches())
			}
			if o.Index != i {
				t.Fatalf("token %d has index %d", i, o.Index)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("waits %v, want %v", got, want)
		}
		if _, ok := <-ch; ok {
			t.Error("channel open after the Finished output")
		}
	})
}
