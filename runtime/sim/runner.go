package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrStopped is returned by Submit once Run has returned.
var ErrStopped = errors.New("sim: engine stopped")

// RunnerOptions configures a Runner.
type RunnerOptions struct {
	// Speedup scales modelled time to wall time: 1 runs in real time, 100
	// makes every step take a hundredth of its modelled duration. Default 1.
	Speedup float64
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Runner drives a Core in real time: it steps the core whenever there is
// work, waits each step's modelled duration (divided by Speedup) and then
// publishes the step's KV events and delivers its tokens. The core, and the
// KV-event sink it was built with, are used only from the goroutine that
// calls Run, so the sink sees every step's events in step order, stamped
// with the engine time (modelled time since Run started) the step ended.
type Runner struct {
	core    *Core
	speedup float64
	log     *slog.Logger
	wake    chan struct{}

	mu      sync.Mutex
	subs    map[string]*subscription // submitted and not yet finished
	adds    []*subscription
	aborts  []*subscription
	reset   bool
	started bool
	stopped bool
	stats   Stats
	// steps counts steps started; a subscription records it when its
	// request reaches the core, so that a step's outputs never go to a
	// request added (under a reused id) while that step ran.
	steps uint64
}

type subscription struct {
	req    *Request
	ch     chan TokenOutput
	stop   func() bool // unregisters the context's abort callback
	closed bool
	added  uint64 // Runner.steps when the request was added to the core
}

// NewRunner returns a Runner for core. The Runner owns the core from now on:
// call no Core methods other than Config while it runs.
func NewRunner(core *Core, opts RunnerOptions) *Runner {
	if opts.Speedup <= 0 {
		opts.Speedup = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	core.holdEvents = true
	return &Runner{
		core:    core,
		speedup: opts.Speedup,
		log:     opts.Logger,
		wake:    make(chan struct{}, 1),
		subs:    make(map[string]*subscription),
		stats:   core.Stats(),
	}
}

// Config returns the core's effective configuration.
func (r *Runner) Config() Config { return r.core.Config() }

// Stats returns the engine's counters as of the last step. Safe from any
// goroutine.
func (r *Runner) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Reset asks the engine to clear its prefix cache before its next step.
func (r *Runner) Reset() {
	r.mu.Lock()
	r.reset = true
	r.mu.Unlock()
	r.signal()
}

// Submit queues req and returns the channel its tokens arrive on, one
// TokenOutput per token; the channel is closed after the output marked
// Finished. Its buffer holds every token of the request, so a slow reader
// never holds up the engine. When ctx is done before the request finishes,
// the request is aborted (its KV blocks freed) and the channel closed without
// a Finished output. The caller must not modify req afterwards.
func (r *Runner) Submit(ctx context.Context, req *Request) (<-chan TokenOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := r.core.CheckRequest(req); err != nil {
		return nil, err
	}
	sub := &subscription{req: req, ch: make(chan TokenOutput, len(req.Output))}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil, ErrStopped
	}
	if _, dup := r.subs[req.ID]; dup {
		return nil, fmt.Errorf("request %q: %w", req.ID, ErrDuplicateID)
	}
	r.subs[req.ID] = sub
	r.adds = append(r.adds, sub)
	// Registered under the lock, after the add is queued, so that an abort
	// can never be drained before its add.
	sub.stop = context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.aborts = append(r.aborts, sub)
		r.mu.Unlock()
		r.signal()
	})
	r.signal()
	return sub.ch, nil
}

func (r *Runner) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run steps the engine until ctx is done, then closes every open token
// channel. It returns nil on cancellation. Run may be called once.
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return errors.New("sim: runner already started")
	}
	r.started = true
	r.mu.Unlock()
	defer r.shutdown()

	cfg := r.core.Config()
	r.log.Info("simulated engine running", "gpu", cfg.GPU, "model", cfg.Model,
		"num_gpu_blocks", cfg.NumGPUBlocks, "max_model_len", cfg.MaxModelLen, "speedup", r.speedup)

	start := time.Now()
	engineNow := func() time.Duration {
		return time.Duration(float64(time.Since(start)) * r.speedup)
	}
	for {
		r.drain(engineNow())
		if !r.core.HasWork() {
			select {
			case <-ctx.Done():
				return nil
			case <-r.wake:
				continue
			}
		}
		r.mu.Lock()
		r.steps++
		step := r.steps
		r.mu.Unlock()
		stepStart := engineNow()
		res := r.core.Step(stepStart)
		timer := time.After(time.Duration(float64(res.Duration) / r.speedup))
	wait:
		for {
			select {
			case <-ctx.Done():
				r.core.flushEvents(stepStart + res.Duration)
				return nil
			case <-timer:
				break wait
			case <-r.wake:
				// Requests added now join the next step; aborts free
				// their blocks at once, as between vLLM steps.
				r.drain(engineNow())
			}
		}
		// The step is over: its KV events go out, then its tokens.
		r.core.flushEvents(stepStart + res.Duration)
		r.deliver(step, res.Outputs)
	}
}

// drain applies queued submissions, aborts and resets to the core.
func (r *Runner) drain(now time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sub := range r.adds {
		if sub.closed {
			continue // aborted before it was added
		}
		sub.added = r.steps
		if err := r.core.Add(now, sub.req); err != nil {
			r.log.Warn("dropping request", "request_id", sub.req.ID, "error", err)
			r.finishLocked(sub)
		}
	}
	clear(r.adds)
	r.adds = r.adds[:0]
	for _, sub := range r.aborts {
		if sub.closed {
			continue // finished before the abort arrived
		}
		r.core.Abort(now, sub.req.ID)
		r.finishLocked(sub)
	}
	clear(r.aborts)
	r.aborts = r.aborts[:0]
	if r.reset {
		r.reset = false
		r.core.Reset(now)
	}
	r.stats = r.core.Stats()
}

// deliver hands the tokens of step number step to their channels.
func (r *Runner) deliver(step uint64, outputs []TokenOutput) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, out := range outputs {
		sub, ok := r.subs[out.RequestID]
		if !ok || sub.closed || sub.added >= step {
			continue // aborted during the step, or its id reused since
		}
		select {
		case sub.ch <- out:
		default:
			// Cannot happen: the buffer holds every token.
			r.log.Error("token channel full", "request_id", out.RequestID)
		}
		if out.Finished {
			r.finishLocked(sub)
		}
	}
	r.stats = r.core.Stats()
}

// finishLocked closes a subscription's channel and forgets it.
func (r *Runner) finishLocked(sub *subscription) {
	if sub.closed {
		return
	}
	sub.closed = true
	close(sub.ch)
	if r.subs[sub.req.ID] == sub {
		delete(r.subs, sub.req.ID)
	}
	if sub.stop != nil {
		sub.stop()
	}
}

func (r *Runner) shutdown() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	for _, sub := range r.subs {
		r.finishLocked(sub)
	}
	for _, sub := range r.adds {
		r.finishLocked(sub)
	}
	r.adds = nil
	r.aborts = nil
}
