package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"sync"
	"time"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/tokenizer"
)

// Sentinel errors callers branch on.
var (
	ErrNoWorker         = errors.New("no worker available")
	ErrQueueFull        = errors.New("router queue full")
	ErrUnknownPolicy    = errors.New("unknown routing policy")
	ErrDuplicateRequest = errors.New("request id already active")
	ErrTooManyWorkers   = errors.New("too many workers")
)

// Request is one request to route.
type Request struct {
	// ID identifies the request in PrefillDone and Free; it must be unique
	// among running requests.
	ID string
	// Hashes are the prompt's block hashes; if nil they are computed from
	// Tokens (which allocates). The router keeps the slice until the request
	// is freed or expires (and, for an approximate worker, for ApproxTTL),
	// so it must not be modified afterwards; appending is fine.
	Hashes []tokenizer.SeqHash
	Tokens []uint32
	// PromptTokens is the prompt length (ISL); 0 means len(Tokens), or
	// len(Hashes) × block size.
	PromptTokens int
	// Policy overrides the daemon's policy for this request.
	Policy string
	// Model is the served model the request is for: only workers of that
	// model are candidates, and with none live it fails at once with
	// ErrNoWorker. "" may go to any worker.
	Model string
	// SessionID names the agent session the request belongs to, if any.
	SessionID string
	Hints     Hints
	// Exclude names workers that already failed this request: a retry goes
	// to the best of the others (or, when none is left, to any).
	Exclude []WorkerID
}

// Router routes requests to workers. Its methods are safe for concurrent
// use; the Index it owns is written by the event ingest concurrently.
type Router struct {
	cfg     Config
	clock   Clock // expiry of sessions and peers' load
	log     *slog.Logger
	metrics *Metrics
	ix      *Index

	mu           sync.Mutex
	workers      [MaxWorkers]*workerState
	order        []WorkerID // live workers, ascending
	active       *activeSet
	approx       *approxState
	sessions     map[string]*session
	nextSweep    time.Time
	queues       map[string]*waitQueue // requests waiting for a worker, by model
	queued       int                   // their total
	epoch        time.Time             // first enqueue: origin of the queue keys
	dispatches   uint64                // tickets resolved, for Ticket.Order
	rng          *rand.Rand
	policies     map[string]*routerPolicy // by name, made in New; read without mu
	in           RouteInput               // scratch, guarded by mu
	decisions    *decisionLog
	ingesters    [MaxWorkers]EngineBlockMap // by worker, for RemoveNodeBlocks and NodeBlockPriority
	overlap      [MaxWorkers]int            // scratch, guarded by mu
	ramOverlap   [MaxWorkers]int            // blocks in host RAM after the GPU overlap
	diskOverlap  [MaxWorkers]int            // blocks on disk after GPU and RAM
	reach        [MaxWorkers]int            // overlap + ramOverlap
	activeDepth  [MaxWorkers]int
	cachedBlocks [MaxWorkers]int
	// Other replicas' load (SetPeerLoad), by worker and replica.
	peers         map[peerKey]peerEntry
	nextPeerSweep time.Time
	// prio is the priority of recent prompts' blocks
	// (Config.BlockPriorities); nil when none is kept. It has its own
	// lock: Enqueue notes a prompt before taking mu.
	prio *blockPriorities
}

// New returns a Router with no workers.
func New(cfg Config, opts ...Option) (*Router, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	r := &Router{
		cfg:       cfg,
		clock:     clock.Real{},
		log:       slog.New(slog.DiscardHandler),
		ix:        NewIndex(cfg.MaxIndexEntries),
		active:    newActiveSet(cfg.ActiveTTL),
		approx:    newApproxState(cfg.ApproxTTL),
		sessions:  make(map[string]*session),
		queues:    make(map[string]*waitQueue),
		rng:       rand.New(rand.NewSource(cfg.Seed)),
		decisions: newDecisionLog(cfg.DecisionLogSize),
		policies:  newPolicies(cfg),
		prio:      newBlockPriorities(cfg.BlockPriorities),
	}
	r.in.r = r
	for _, o := range opts {
		o(r)
	}
	r.log = r.log.With("component", "router")
	return r, nil
}

// Config returns the effective configuration, defaults filled in.
func (r *Router) Config() Config { return r.cfg }

// Index returns the block index, for the event ingest to update.
func (r *Router) Index() *Index { return r.ix }

// Route picks a worker for req and starts tracking it as running there.
// When every worker is saturated it waits in the queue (see Enqueue) until
// the router dispatches it or ctx ends.
func (r *Router) Route(ctx context.Context, req *Request) (Decision, error) {
	d, t, err := r.Enqueue(req)
	if err != nil || t == nil {
		return d, err
	}
	select {
	case <-t.Done():
		return t.Result()
	case <-ctx.Done():
	}
	if !t.Cancel() {
		// Dispatched while ctx ended: undo the route nobody will use.
		if d, err := t.Result(); err == nil {
			r.Free(d.RequestID)
		}
	}
	return Decision{}, fmt.Errorf("router: waiting for a worker: %w", ctx.Err())
}

// Enqueue is Route without the wait. If some worker is not saturated (and
// nothing waits before it) it decides at once and returns the decision with
// a nil Ticket. Otherwise it queues the request and returns a Ticket whose
// Done closes when the router dispatches it, which happens inside the call
// that frees a worker, so a caller that drives the router from one
// goroutine (a simulation in virtual time) sees every dispatch as soon as
// that call returns. ErrQueueFull when the queue is full.
//
// The queue is ordered by strict priority, then priority, then, for the
// hearth policy, by a deadline of arrival plus a multiple of the request's
// own cost, for the others by arrival (see HearthConfig.QueueStretch).
func (r *Router) Enqueue(req *Request) (Decision, *Ticket, error) {
	if req == nil || req.ID == "" {
		return Decision{}, nil, errors.New("router: request without id")
	}
	name := req.Policy
	if name == "" {
		name = r.cfg.Policy
	}
	policy := r.policies[name]
	if policy == nil {
		return Decision{}, nil, fmt.Errorf("router: %w: %q", ErrUnknownPolicy, name)
	}
	hashes := req.Hashes
	if hashes == nil && len(req.Tokens) > 0 {
		hashes = tokenizer.BlockHashes(req.Tokens, tokenizer.DefaultBlockSize)
	}
	isl := req.PromptTokens
	if isl <= 0 {
		isl = len(req.Tokens)
	}
	if isl <= 0 {
		isl = len(hashes) * tokenizer.DefaultBlockSize
	}
	if r.prio != nil {
		r.prio.note(hashes, req.Hints.Priority)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	r.expireLocked(now)
	if !r.hasWorkerLocked(req.Model) {
		if req.Model != "" && len(r.order) > 0 {
			return Decision{}, nil, fmt.Errorf("%w for model %q", ErrNoWorker, req.Model)
		}
		return Decision{}, nil, ErrNoWorker
	}
	if _, dup := r.active.reqs[req.ID]; dup {
		return Decision{}, nil, fmt.Errorf("router: %w: %q", ErrDuplicateRequest, req.ID)
	}
	q := r.queues[req.Model]
	if r.cfg.QueueSize > 0 && (q != nil && q.Len() > 0 || r.allSaturatedLocked(req.Model)) {
		if r.queued >= r.cfg.QueueSize {
			return Decision{}, nil, ErrQueueFull
		}
		if q == nil {
			q = &waitQueue{strict: r.cfg.PriorityWait < 0}
			r.queues[req.Model] = q
		}
		w := &waiter{req: req, hashes: hashes, isl: isl, policy: policy, enqueued: now}
		w.key = r.queueKeyLocked(w)
		q.push(w)
		r.queued++
		r.metrics.setQueueDepth(r.queued)
		return Decision{}, &Ticket{r: r, w: w}, nil
	}
	return r.decideLocked(req, hashes, isl, policy, now, 0), nil, nil
}

// PrefillDone records that the request's first token arrived. It reports
// whether the request was running.
func (r *Router) PrefillDone(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ar, ok := r.active.prefillDone(id, r.now())
	if ok {
		r.publishLocked(ar.worker)
		r.dispatchLocked(r.now())
	}
	return ok
}

// Free records that the request ended or its client went away. It reports
// whether the request was running.
func (r *Router) Free(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	ar, ok := r.active.free(id)
	if ok {
		// Only a request that ended says how long its answer took, not
		// one that expired or whose worker went away.
		if ws := r.workers[ar.worker]; ws != nil {
			ws.noteDecode(ar, now)
		}
		r.releasedLocked(ar, now)
	}
	r.expireLocked(now)
	return ok
}

// releasedLocked updates sessions and gauges after a request stopped.
func (r *Router) releasedLocked(ar *activeRequest, now time.Time) {
	if ws := r.workers[ar.worker]; ws != nil {
		ws.noteRelease(ar.freedBlocks, now, r.cfg.Hearth.RoomWaitWindow)
	}
	if s := r.sessions[ar.session]; ar.session != "" && s != nil {
		s.active--
		s.lastSeen = now
		if s.active == 0 && s.hasWorker && r.workers[s.worker] != nil {
			r.workers[s.worker].pausedBlocks += s.blocks
		}
	}
	r.publishLocked(ar.worker)
}

// expireLocked drops expired requests, predictions and sessions, then
// dispatches waiters if that freed a worker.
func (r *Router) expireLocked(now time.Time) {
	r.expirePeersLocked(now)
	r.active.expire(now, func(ar *activeRequest) {
		r.releasedLocked(ar, now)
		if r.log.Enabled(context.Background(), slog.LevelDebug) {
			r.log.Debug("request expired without an end", "request", ar.id, "worker", ar.worker)
		}
	})
	r.approx.expire(r.ix, now)
	if !now.Before(r.nextSweep) {
		r.nextSweep = now.Add(10 * time.Second)
		for id, s := range r.sessions {
			if s.active == 0 && now.Sub(s.lastSeen) >= s.ttl {
				r.dropSessionLocked(id, s)
			}
		}
	}
	r.dispatchLocked(now)
}

// Decisions returns up to n of the most recent decisions, newest first
// (n ≤ 0: all that are kept).
func (r *Router) Decisions(n int) []Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.decisions.last(n)
}
