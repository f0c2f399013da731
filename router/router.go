package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand"
	"slices"
	"sync"
	"time"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/kvbm"
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

// Defaults of Config fields left zero.
const (
	DefaultPolicy                  = PolicyHearth
	DefaultHostCacheHitWeight      = 0.75
	DefaultDiskCacheHitWeight      = 0.25
	DefaultSaturationFraction      = 0.95
	DefaultSaturationPendingTokens = 131072
	DefaultSessionTTL              = 30 * time.Minute
	DefaultDecisionLogSize         = 256
)

// Config configures a Router. Zero fields take the documented defaults.
type Config struct {
	// Policy is the default routing policy (DefaultPolicy).
	Policy string
	// BlockSize is the number of tokens per KV block (16).
	BlockSize int
	// OverlapScoreWeight weighs prefill blocks against decode blocks in the
	// kv policy; 0 means Dynamo's default 1.0 (use least_loaded to ignore
	// the cache entirely).
	OverlapScoreWeight float64
	// Temperature of the kv policy's softmax sampling; 0 picks the lowest.
	Temperature float64
	// HostCacheHitWeight and DiskCacheHitWeight credit the kv policy with
	// blocks a worker holds in host RAM or on disk beyond its GPU prefix,
	// as fractions of a GPU hit: Dynamo's host_cache_hit_weight and
	// disk_cache_hit_weight, default 0.75 and 0.25 (Dynamo's defaults). A
	// negative value gives no credit.
	HostCacheHitWeight float64
	DiskCacheHitWeight float64
	// MaxIndexEntries bounds the block index, in (block, worker, tier)
	// entries over all workers (DefaultMaxIndexEntries).
	MaxIndexEntries int
	// QueueSize is how many requests may wait while every worker is
	// saturated (DefaultQueueSize); negative disables the queue, so requests
	// are routed even to saturated workers.
	QueueSize int
	// A worker is saturated when its running requests hold at least
	// SaturationFraction of its KV capacity or at least
	// SaturationPendingTokens prompt tokens wait for prefill on it.
	SaturationFraction      float64
	SaturationPendingTokens int
	// ActiveTTL expires requests whose end is never reported (300 s).
	ActiveTTL time.Duration
	// ApproxTTL is how long approximate mode keeps a prediction (120 s).
	ApproxTTL time.Duration
	// SessionTTL forgets an idle agent session (30 min) unless its
	// session_control said otherwise.
	SessionTTL time.Duration
	// PeerLoadTTL expires another replica's load on a worker that it has
	// not reported again (DefaultPeerLoadTTL); see SetPeerLoad.
	PeerLoadTTL time.Duration
	// DecisionLogSize is how many recent decisions Decisions can return.
	DecisionLogSize int
	// Seed makes random choices reproducible.
	Seed int64
	// Hearth tunes the hearth policy.
	Hearth HearthConfig
}

// Validate reports the first invalid field. It accepts zero fields, which
// New replaces with defaults.
func (c Config) Validate() error {
	switch {
	case c.Policy != "" && !validPolicy(c.Policy):
		return fmt.Errorf("router config: policy: %w: %q", ErrUnknownPolicy, c.Policy)
	case c.BlockSize < 0:
		return fmt.Errorf("router config: block size %d is negative", c.BlockSize)
	case c.OverlapScoreWeight < 0:
		return fmt.Errorf("router config: overlap score weight %v is negative", c.OverlapScoreWeight)
	case c.Temperature < 0:
		return fmt.Errorf("router config: temperature %v is negative", c.Temperature)
	case c.MaxIndexEntries < 0:
		return fmt.Errorf("router config: max index entries %d is negative", c.MaxIndexEntries)
	case c.SaturationFraction < 0 || c.SaturationFraction > 1:
		return fmt.Errorf("router config: saturation fraction %v is outside [0, 1]", c.SaturationFraction)
	case c.SaturationPendingTokens < 0:
		return fmt.Errorf("router config: saturation pending tokens %d is negative", c.SaturationPendingTokens)
	case c.ActiveTTL < 0 || c.ApproxTTL < 0 || c.SessionTTL < 0 || c.PeerLoadTTL < 0:
		return errors.New("router config: negative ttl")
	case c.DecisionLogSize < 0:
		return fmt.Errorf("router config: decision log size %d is negative", c.DecisionLogSize)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Policy == "" {
		c.Policy = DefaultPolicy
	}
	if c.BlockSize == 0 {
		c.BlockSize = tokenizer.DefaultBlockSize
	}
	if c.OverlapScoreWeight == 0 {
		c.OverlapScoreWeight = 1
	}
	switch {
	case c.HostCacheHitWeight == 0:
		c.HostCacheHitWeight = DefaultHostCacheHitWeight
	case c.HostCacheHitWeight < 0:
		c.HostCacheHitWeight = 0
	}
	switch {
	case c.DiskCacheHitWeight == 0:
		c.DiskCacheHitWeight = DefaultDiskCacheHitWeight
	case c.DiskCacheHitWeight < 0:
		c.DiskCacheHitWeight = 0
	}
	if c.MaxIndexEntries == 0 {
		c.MaxIndexEntries = DefaultMaxIndexEntries
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.SaturationFraction == 0 {
		c.SaturationFraction = DefaultSaturationFraction
	}
	if c.SaturationPendingTokens == 0 {
		c.SaturationPendingTokens = DefaultSaturationPendingTokens
	}
	if c.ActiveTTL == 0 {
		c.ActiveTTL = DefaultActiveTTL
	}
	if c.ApproxTTL == 0 {
		c.ApproxTTL = DefaultApproxTTL
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.PeerLoadTTL == 0 {
		c.PeerLoadTTL = DefaultPeerLoadTTL
	}
	if c.DecisionLogSize == 0 {
		c.DecisionLogSize = DefaultDecisionLogSize
	}
	c.Hearth = c.Hearth.withDefaults()
	return c
}

// now is the router's time.
func (r *Router) now() time.Time { return r.clock.Now() }

// Option configures New.
type Option func(*Router)

// Clock is the time the router reads: it expires sessions and peers' load
// but sets no timers. A clock.Clock is one; the benchmark's simulation
// passes its virtual time.
type Clock interface{ Now() time.Time }

// WithClock sets the clock used for expiry (default the real one).
func WithClock(c Clock) Option { return func(r *Router) { r.clock = c } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(r *Router) { r.log = l } }

// WithMetrics records into m (default: no metrics).
func WithMetrics(m *Metrics) Option { return func(r *Router) { r.metrics = m } }

// WorkerInfo describes a worker when it joins.
type WorkerInfo struct {
	Name string
	// BaseURL is where the worker's engine serves (its OpenAI API root);
	// decisions carry it to the gateway.
	BaseURL string
	// Model is the model the worker serves; a request for another model
	// never goes to it. "" serves any request (a simulation with one
	// model).
	Model string
	// CapacityBlocks is the worker's KV cache size in blocks (vLLM's
	// num_gpu_blocks); 0 if unknown, which turns off capacity terms.
	CapacityBlocks int
	// PrefillTokensPerSec is the worker's measured or configured prefill
	// speed; 0 takes HearthConfig.DefaultPrefillTokensPerSec. Only the
	// hearth policy uses it, so a 3090 next to a 4090 is weighed right.
	PrefillTokensPerSec float64
	// RAMCapacityBlocks is the size of the worker's host-RAM KV tier in
	// blocks (vLLM's --kv-offloading-size over the block size); 0 if it has
	// none or it is unknown.
	RAMCapacityBlocks int
	// BlockBytes is the size of one KV block (all layers' K and V) and
	// LoadBytesPerSec the worker's host-to-device bandwidth: together they
	// price loading blocks from host RAM. Either 0 turns the hearth
	// policy's RAM term off (RAM blocks then cost a recompute, as with no
	// tier).
	BlockBytes      int
	LoadBytesPerSec float64
	// Node names the machine the worker runs on. Workers with the same
	// non-empty Node and the same Model share the node's disk KV tier (one
	// directory per machine): a block one of them writes to disk is
	// loadable by all of them, and a block the node evicts is gone for
	// all of them.
	Node string
	// DiskLoadBytesPerSec is the read bandwidth of the disk tier. A disk
	// block goes SSD → host buffer → GPU, so the hearth policy prices it at
	// BlockBytes/DiskLoadBytesPerSec + BlockBytes/LoadBytesPerSec: the two
	// copies in series, an upper bound on a pipelined load, which a
	// read-ahead overlaps at best to the slower of the two. The SSD term
	// dominates (3–7 GB/s against 25+ GB/s), so the bound overstates a disk
	// load by a fifth at most. Any of BlockBytes, LoadBytesPerSec and
	// DiskLoadBytesPerSec 0: disk blocks cost a recompute.
	DiskLoadBytesPerSec float64
	// Approximate marks a worker that publishes no KV events: the router
	// predicts its cache from its own decisions.
	Approximate bool
}

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

// session is what the router remembers of an agent session.
type session struct {
	worker    WorkerID
	hasWorker bool
	blocks    int // blocks of its last request: what it has cached on worker
	active    int // running requests
	lastSeen  time.Time
	ttl       time.Duration
}

type workerState struct {
	info         WorkerInfo
	gauges       workerGauges
	pausedBlocks int // blocks of idle sessions whose last worker this is
	// The rate at which the worker's running requests release KV blocks,
	// an exponentially weighted sum of the blocks freed (releaseAcc, as of
	// releaseAt) since the first release (releaseSince); see releaseRate.
	releaseAcc   float64
	releaseAt    time.Time
	releaseSince time.Time
}

// noteRelease adds blocks freed at now to the worker's release rate, the
// observations weighted by exp(-age/window).
func (ws *workerState) noteRelease(blocks int, now time.Time, window float64) {
	if window <= 0 || blocks <= 0 {
		return
	}
	if ws.releaseSince.IsZero() {
		ws.releaseSince, ws.releaseAt = now, now
	}
	if dt := now.Sub(ws.releaseAt).Seconds(); dt > 0 {
		ws.releaseAcc *= math.Exp(-dt / window)
		ws.releaseAt = now
	}
	ws.releaseAcc += float64(blocks)
}

// releaseRate is the blocks per second the worker's running requests
// released over about the last window seconds: the weighted sum divided
// by the weight of the time observed, so that a worker seen for less than
// a window is not underestimated. ok is false before a release was seen.
func (ws *workerState) releaseRate(now time.Time, window float64) (rate float64, ok bool) {
	if window <= 0 || ws.releaseSince.IsZero() {
		return 0, false
	}
	acc := ws.releaseAcc
	if dt := now.Sub(ws.releaseAt).Seconds(); dt > 0 {
		acc *= math.Exp(-dt / window)
	}
	seen := now.Sub(ws.releaseSince).Seconds()
	weight := window * (1 - math.Exp(-seen/window))
	if weight <= 0 {
		// Only the first release, at this instant: no span to divide by.
		return 0, false
	}
	return acc / weight, true
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
	rr           int
	decisions    *decisionLog
	ingesters    [MaxWorkers]*Ingester // by worker, for RemoveNodeBlocks
	overlap      [MaxWorkers]int       // scratch, guarded by mu
	ramOverlap   [MaxWorkers]int       // blocks in host RAM after the GPU overlap
	diskOverlap  [MaxWorkers]int       // blocks on disk after GPU and RAM
	reach        [MaxWorkers]int       // overlap + ramOverlap
	activeDepth  [MaxWorkers]int
	cachedBlocks [MaxWorkers]int
	// Other replicas' load (SetPeerLoad), by worker and replica.
	peers         map[peerKey]peerEntry
	nextPeerSweep time.Time
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
	}
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

// AddWorker registers a worker and returns its id, the lowest free one.
func (r *Router) AddWorker(info WorkerInfo) (WorkerID, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.order) == MaxWorkers {
		return 0, fmt.Errorf("router: add worker %q: %w (max %d)", info.Name, ErrTooManyWorkers, MaxWorkers)
	}
	var id WorkerID
	for r.workers[id] != nil {
		id++
	}
	r.ix.ClearWorker(id) // events of a previous holder of the id may linger
	r.workers[id] = &workerState{info: info, gauges: r.metrics.forWorker(info.Name)}
	r.order = append(r.order, id)
	slices.Sort(r.order)
	r.ix.joinNode(id, r.nodePeersLocked(id))
	r.publishLocked(id)
	r.dispatchLocked(r.now())
	return id, nil
}

// UpdateWorker replaces what the router knows of a worker (capacity or
// speed measured after it started).
func (r *Router) UpdateWorker(id WorkerID, info WorkerInfo) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id >= MaxWorkers || r.workers[id] == nil {
		return false
	}
	ws := r.workers[id]
	if ws.info.Name != info.Name {
		r.metrics.dropWorker(ws.info.Name)
		ws.gauges = r.metrics.forWorker(info.Name)
	}
	moved := ws.info.Node != info.Node || ws.info.Model != info.Model
	ws.info = info
	if moved {
		r.ix.joinNode(id, r.nodePeersLocked(id))
	}
	r.publishLocked(id)
	r.dispatchLocked(r.now())
	return true
}

// RemoveWorker forgets a worker, its cached blocks and its running requests.
func (r *Router) RemoveWorker(id WorkerID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id >= MaxWorkers || r.workers[id] == nil {
		return
	}
	r.metrics.dropWorker(r.workers[id].info.Name)
	r.workers[id] = nil
	r.ingesters[id] = nil
	r.order = slices.DeleteFunc(r.order, func(w WorkerID) bool { return w == id })
	now := r.now()
	r.active.clearWorker(id, func(ar *activeRequest) { r.releasedLocked(ar, now) })
	r.dropPeersLocked(id)
	r.approx.clearWorker(id)
	r.ix.leaveNode(id) // the node's disk stays with the other workers
	r.ix.ClearWorker(id)
	for _, s := range r.sessions {
		if s.hasWorker && s.worker == id {
			s.hasWorker = false
		}
	}
	// Requests waiting for a model that no live worker serves any more
	// fail now rather than wait for one that may never come.
	for model, q := range r.queues {
		if r.hasWorkerLocked(model) {
			continue
		}
		for q.Len() > 0 {
			q.pop().resolve(routeResult{err: ErrNoWorker}, r.nextDispatch())
			r.queued--
		}
		delete(r.queues, model)
	}
	r.metrics.setQueueDepth(r.queued)
	r.dispatchLocked(now)
}

// nodePeersLocked returns the other live workers that share id's node disk
// tier: the same non-empty Node and the same Model.
func (r *Router) nodePeersLocked(id WorkerID) uint64 {
	info := &r.workers[id].info
	if info.Node == "" {
		return 0
	}
	var peers uint64
	for _, w := range r.order {
		if o := &r.workers[w].info; w != id && o.Node == info.Node && o.Model == info.Model {
			peers |= 1 << w
		}
	}
	return peers
}

// AttachIngester tells the router which ingester follows worker id's KV
// events, so that RemoveNodeBlocks can map engine hashes through its
// table. RemoveWorker detaches it. It reports whether id is live.
func (r *Router) AttachIngester(id WorkerID, in *Ingester) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id >= MaxWorkers || r.workers[id] == nil {
		return false
	}
	r.ingesters[id] = in
	return true
}

// RemoveNodeBlocks records that the disk tier of node, for model, no longer
// holds the blocks named by engineHashes: the node's store evicted them,
// whichever engine wrote them. Engines of one model on one node name a
// block alike, so each hash is mapped through the engine-hash tables of
// the node's workers (those with an attached ingester); the first that
// knows it removes the block for the whole node, and every table drops its
// disk entry. It returns how many of engineHashes some table knew on disk.
func (r *Router) RemoveNodeBlocks(node, model string, engineHashes []uint64) int {
	if node == "" || len(engineHashes) == 0 {
		return 0
	}
	var ings [MaxWorkers]*Ingester
	n := 0
	r.mu.Lock()
	for _, id := range r.order {
		info := &r.workers[id].info
		if info.Node == node && info.Model == model && r.ingesters[id] != nil {
			ings[n] = r.ingesters[id]
			n++
		}
	}
	r.mu.Unlock()
	// Ingesters lock their tables and then the index, never the router:
	// they are called outside r.mu.
	known := make([]bool, len(engineHashes))
	for _, in := range ings[:n] {
		in.removeEngineBlocks(kvbm.TierDisk, engineHashes, known)
	}
	removed := 0
	for _, k := range known {
		if k {
			removed++
		}
	}
	return removed
}

// ApplySessionControl applies a request's nvext.session_control to the
// session sessionID: open starts (or refreshes) it with its timeout, close
// forgets it. An empty sessionID is ignored.
func (r *Router) ApplySessionControl(sessionID string, ctl SessionControl) {
	if sessionID == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sessions[sessionID]
	switch ctl.Action {
	case SessionClose:
		if s != nil {
			r.dropSessionLocked(sessionID, s)
		}
		return
	}
	if s == nil {
		s = &session{ttl: r.cfg.SessionTTL}
		r.sessions[sessionID] = s
	}
	if ctl.Timeout > 0 {
		s.ttl = ctl.Timeout
	}
	s.lastSeen = r.now()
}

func (r *Router) dropSessionLocked(id string, s *session) {
	if s.active == 0 && s.hasWorker && r.workers[s.worker] != nil {
		r.workers[s.worker].pausedBlocks -= s.blocks
	}
	delete(r.sessions, id)
}

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
	policy := req.Policy
	if policy == "" {
		policy = r.cfg.Policy
	} else if !validPolicy(policy) {
		return Decision{}, nil, fmt.Errorf("router: %w: %q", ErrUnknownPolicy, policy)
	}
	hashes := req.Hashes
	if hashes == nil && len(req.Tokens) > 0 {
		hashes = tokenizer.BlockHashes(req.Tokens, r.cfg.BlockSize)
	}
	isl := req.PromptTokens
	if isl <= 0 {
		isl = len(req.Tokens)
	}
	if isl <= 0 {
		isl = len(hashes) * r.cfg.BlockSize
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
			q = &waitQueue{}
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

// queueKeyLocked orders a waiter within its priority level, lowest first:
// its deadline in seconds since the router's epoch. A hearth request's
// deadline is its arrival plus QueueStretch × its own cost
// (queueCostLocked), every other policy's its arrival, FIFO as Dynamo's
// queue is. Earliest deadline first means a request B that arrives after
// A goes first only if it arrives less than QueueStretch × (cost A − cost
// B) after A: a request is overtaken only within QueueStretch times its
// own cost of its arrival, a bound that shortest-job-first with a fixed
// aging rate lacks (there a cheap request's cost is no bound on anything).
// The key is fixed at arrival, so the queue stays a heap.
func (r *Router) queueKeyLocked(w *waiter) float64 {
	if r.epoch.IsZero() {
		r.epoch = w.enqueued
	}
	key := w.enqueued.Sub(r.epoch).Seconds()
	if w.policy != PolicyHearth || r.cfg.Hearth.QueueStretch == 0 {
		return key
	}
	return key + r.cfg.Hearth.QueueStretch*r.queueCostLocked(w)
}

// PrefillDone records that the request's first token arrived. It reports
// whether the request was running.
func (r *Router) PrefillDone(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ar, ok := r.active.prefillDone(id)
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

// dispatchLocked routes waiting requests while some worker is not saturated.
func (r *Router) dispatchLocked(now time.Time) {
	if r.queued == 0 {
		return
	}
	for model, q := range r.queues {
		for q.Len() > 0 && r.hasWorkerLocked(model) && !r.allSaturatedLocked(model) {
			w := q.pop()
			r.queued--
			if _, dup := r.active.reqs[w.req.ID]; dup {
				w.resolve(routeResult{err: fmt.Errorf("router: %w: %q", ErrDuplicateRequest, w.req.ID)}, r.nextDispatch())
				continue
			}
			d := r.decideLocked(w.req, w.hashes, w.isl, w.policy, now, now.Sub(w.enqueued))
			w.resolve(routeResult{d: d}, r.nextDispatch())
		}
	}
	r.metrics.setQueueDepth(r.queued)
}

// nextDispatch numbers a ticket's outcome for Ticket.Order.
func (r *Router) nextDispatch() uint64 {
	r.dispatches++
	return r.dispatches
}

func (r *Router) saturatedLocked(id WorkerID) bool {
	aw := &r.active.workers[id]
	if r.cfg.SaturationPendingTokens > 0 && aw.pending() >= r.cfg.SaturationPendingTokens {
		return true
	}
	capacity := r.workers[id].info.CapacityBlocks
	return capacity > 0 && float64(aw.blocks()) >= r.cfg.SaturationFraction*float64(capacity)
}

// allSaturatedLocked reports whether every live worker of a model is
// saturated.
func (r *Router) allSaturatedLocked(model string) bool {
	for _, id := range r.order {
		if r.servesLocked(id, model) && !r.saturatedLocked(id) {
			return false
		}
	}
	return true
}

// servesLocked reports whether worker id may take a request for model.
func (r *Router) servesLocked(id WorkerID, model string) bool {
	m := r.workers[id].info.Model
	return model == "" || m == "" || m == model
}

// hasWorkerLocked reports whether some live worker serves model.
func (r *Router) hasWorkerLocked(model string) bool {
	for _, id := range r.order {
		if r.servesLocked(id, model) {
			return true
		}
	}
	return false
}

func (r *Router) publishLocked(id WorkerID) {
	ws := r.workers[id]
	if ws == nil {
		return
	}
	aw := &r.active.workers[id]
	ws.gauges.set(aw.ownBlocks(), aw.pendingTokens)
}

// candidatesLocked lists the workers a request may go to: all but the
// excluded ones, or all when that would leave none.
func (r *Router) candidatesLocked(exclude []WorkerID, model string) []Candidate {
	cands := make([]Candidate, 0, len(r.order))
	for pass := 0; pass < 2 && len(cands) == 0; pass++ {
		for _, id := range r.order {
			if !r.servesLocked(id, model) || pass == 0 && slices.Contains(exclude, id) {
				continue
			}
			aw := &r.active.workers[id]
			cands = append(cands, Candidate{
				WorkerID:             id,
				Worker:               r.workers[id].info.Name,
				CachedBlocks:         r.overlap[id],
				RAMBlocks:            r.ramOverlap[id],
				DiskBlocks:           r.diskOverlap[id],
				ActiveBlocks:         aw.blocks(),
				PendingPrefillTokens: aw.pending(),
			})
		}
	}
	return cands
}

// matchLocked fills the scratch arrays (overlap per tier, active depth,
// cached blocks) for a request and returns what a policy knows of it.
func (r *Router) matchLocked(req *Request, hashes []tokenizer.SeqHash, isl int, policy string) routeInput {
	bs := r.cfg.BlockSize
	in := routeInput{
		req:          req,
		hashes:       hashes,
		promptTokens: isl,
		promptBlocks: (isl + bs - 1) / bs,
		hashBlocks:   len(hashes),
		oslBlocks:    (req.Hints.OSL + bs - 1) / bs,
	}
	in.promptBlocks = max(in.promptBlocks, in.hashBlocks)
	r.ix.Match(hashes, kvbm.TierGPU, &r.overlap)
	r.ramOverlap, r.diskOverlap = [MaxWorkers]int{}, [MaxWorkers]int{}
	if policy == PolicyKV || policy == PolicyHearth {
		// What lower tiers add after the GPU prefix: an engine loads it
		// instead of recomputing it.
		r.ix.MatchBeyond(hashes, kvbm.TierRAM, &r.overlap, &r.ramOverlap)
		for w := range r.reach {
			r.reach[w] = r.overlap[w] + r.ramOverlap[w]
		}
		r.ix.MatchBeyond(hashes, kvbm.TierDisk, &r.reach, &r.diskOverlap)
	}
	r.active.activeDepth(hashes, &r.activeDepth)
	r.ix.BlockCounts(kvbm.TierGPU, &r.cachedBlocks)
	return in
}

// queueCostLocked is a queued hearth request's own cost in seconds: on
// the worker where it is least, its uncached prompt tokens at that
// worker's prefill speed plus the load time of the blocks its host RAM and
// its node's disk hold (see scoreHearth), plus DecodeWeight × the share of the worker's KV capacity the
// request will hold (prompt and expected output). A turn whose context is
// cached is cheap, one that must recompute it dear. What the worker is
// doing when the request arrives (prompts waiting there, the running
// requests' load) is left out: it is the same for every waiter and
// changes before any of them runs.
func (r *Router) queueCostLocked(w *waiter) float64 {
	in := r.matchLocked(w.req, w.hashes, w.isl, w.policy)
	cands := r.candidatesLocked(w.req.Exclude, w.req.Model)
	h := r.cfg.Hearth
	bs := r.cfg.BlockSize
	best := math.Inf(1)
	for _, c := range cands {
		ws := r.workers[c.WorkerID]
		speed := ws.info.PrefillTokensPerSec
		if speed <= 0 {
			speed = h.DefaultPrefillTokensPerSec
		}
		loaded, loadSeconds := ws.lowerTierLoad(&c, ws.loadSecondsPerBlock())
		uncached := max(in.promptTokens-(c.CachedBlocks+loaded)*bs, 0)
		cost := float64(uncached)/speed + loadSeconds
		if capacity := float64(ws.info.CapacityBlocks); capacity > 0 {
			cost += h.DecodeWeight * float64(in.promptBlocks+in.oslBlocks) / capacity
		}
		best = math.Min(best, cost)
	}
	return best
}

// decideLocked scores the live workers, picks one and records the request
// as running there. The Candidates slice is its only allocation besides the
// active-request record.
func (r *Router) decideLocked(req *Request, hashes []tokenizer.SeqHash, isl int, policy string, now time.Time, queued time.Duration) Decision {
	start := time.Now()
	bs := r.cfg.BlockSize
	in := r.matchLocked(req, hashes, isl, policy)
	cands := r.candidatesLocked(req.Exclude, req.Model)
	var sess *session
	if req.SessionID != "" {
		sess = r.sessions[req.SessionID]
	}

	var pick int
	var reason string
	switch {
	case len(cands) == 1:
		if policy == PolicyKV {
			r.scoreKV(&in, cands)
		} else if policy == PolicyHearth {
			r.scoreHearth(&in, cands, sess, now)
		}
		pick, reason = 0, ReasonOnlyCandidate
	case policy == PolicyRoundRobin:
		pick, reason = r.rr%len(cands), ReasonRoundRobin
		r.rr++
	case policy == PolicyRandom:
		pick, reason = r.rng.Intn(len(cands)), ReasonRandom
	case policy == PolicyLeastLoaded:
		r.scoreLeastLoaded(cands)
		pick, reason = pickMin(cands, &r.cachedBlocks, r.rng)
	case policy == PolicyKV:
		r.scoreKV(&in, cands)
		if r.cfg.Temperature > 0 {
			pick, reason = sampleSoftmax(cands, r.cfg.Temperature, r.rng), ReasonSampled
		} else {
			pick, reason = pickMin(cands, &r.cachedBlocks, r.rng)
		}
	default: // PolicyHearth
		r.scoreHearth(&in, cands, sess, now)
		pick, reason = pickMin(cands, &r.cachedBlocks, r.rng)
	}
	win := cands[pick]

	extra := in.promptBlocks - in.hashBlocks + in.oslBlocks
	// Blocks in lower tiers are loaded, not computed.
	prefill := max(isl-(win.CachedBlocks+win.RAMBlocks+win.DiskBlocks)*bs, 0)
	ar := r.active.add(req.ID, win.WorkerID, hashes, extra, prefill, req.SessionID, now)
	if r.workers[win.WorkerID].info.Approximate {
		r.approx.insert(r.ix, win.WorkerID, ar.hashes, now)
	}
	if req.SessionID != "" {
		r.sessionRoutedLocked(req.SessionID, sess, win.WorkerID, in.promptBlocks+in.oslBlocks, now)
	}
	r.publishLocked(win.WorkerID)

	d := Decision{
		RequestID:          req.ID,
		Policy:             policy,
		WorkerID:           win.WorkerID,
		Worker:             win.Worker,
		BaseURL:            r.workers[win.WorkerID].info.BaseURL,
		Reason:             reason,
		Candidates:         cands,
		CachedBlocks:       win.CachedBlocks,
		RAMBlocks:          win.RAMBlocks,
		DiskBlocks:         win.DiskBlocks,
		LowerTierBlocks:    win.RAMBlocks + win.DiskBlocks,
		PromptBlocks:       in.promptBlocks,
		SpeculativePrefill: req.Hints.SpeculativePrefill,
		Queued:             queued,
		At:                 now,
	}
	if in.promptBlocks > 0 {
		d.PredictedHitRate = float64(win.CachedBlocks+d.LowerTierBlocks) / float64(in.promptBlocks)
	}
	r.decisions.add(d)
	r.metrics.observeDecision(&d, time.Since(start), r.ix)
	if r.log.Enabled(context.Background(), slog.LevelDebug) {
		r.log.LogAttrs(context.Background(), slog.LevelDebug, "routed",
			slog.String("request", req.ID), slog.String("policy", policy),
			slog.String("worker", win.Worker), slog.Int("cached_blocks", win.CachedBlocks),
			slog.Int("prompt_blocks", in.promptBlocks), slog.String("reason", reason))
	}
	return d
}

// sessionRoutedLocked moves a session to the worker its request went to.
func (r *Router) sessionRoutedLocked(id string, s *session, w WorkerID, blocks int, now time.Time) {
	if s == nil {
		s = &session{ttl: r.cfg.SessionTTL}
		r.sessions[id] = s
	}
	if s.active == 0 && s.hasWorker && r.workers[s.worker] != nil {
		r.workers[s.worker].pausedBlocks -= s.blocks
	}
	s.worker, s.hasWorker = w, true
	s.blocks = blocks
	s.active++
	s.lastSeen = now
}

// Decisions returns up to n of the most recent decisions, newest first
// (n ≤ 0: all that are kept).
func (r *Router) Decisions(n int) []Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.decisions.last(n)
}

// WorkerLoad is a snapshot of one worker's load, for the console.
type WorkerLoad struct {
	WorkerID             WorkerID
	Info                 WorkerInfo
	ActiveRequests       int
	ActiveBlocks         int
	PendingPrefillTokens int
	CachedBlocks         int // every GPU block the index holds for the worker, not only a prompt's
	RAMBlocks            int // every block the index holds in the worker's host-RAM tier
	PausedSessionBlocks  int
	Saturated            bool
	// Peer is the load other router replicas reported on the worker
	// (SetPeerLoad); the fields above are this replica's own.
	Peer PeerLoad
}

// Workers returns the load of every live worker, by id.
func (r *Router) Workers() []WorkerLoad {
	var cached, ram [MaxWorkers]int
	r.ix.BlockCounts(kvbm.TierGPU, &cached)
	r.ix.BlockCounts(kvbm.TierRAM, &ram)
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]WorkerLoad, 0, len(r.order))
	for _, id := range r.order {
		aw := &r.active.workers[id]
		ws := r.workers[id]
		out = append(out, WorkerLoad{
			WorkerID:             id,
			Info:                 ws.info,
			ActiveRequests:       aw.requests,
			ActiveBlocks:         aw.ownBlocks(),
			PendingPrefillTokens: aw.pendingTokens,
			Peer:                 PeerLoad{Running: aw.peerRequests, ActiveBlocks: aw.peerBlocks, PendingPrefillTokens: aw.peerPending},
			CachedBlocks:         cached[id],
			RAMBlocks:            ram[id],
			PausedSessionBlocks:  ws.pausedBlocks,
			Saturated:            r.saturatedLocked(id),
		})
	}
	return out
}

// WorkerByName returns the id of the live worker registered under name.
func (r *Router) WorkerByName(name string) (WorkerID, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range r.order {
		if r.workers[id].info.Name == name {
			return id, true
		}
	}
	return 0, false
}

// QueueLen returns how many requests wait for a worker.
func (r *Router) QueueLen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queued
}
