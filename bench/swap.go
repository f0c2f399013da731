package bench

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/models"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// The residency policies a swap benchmark compares (RunSwap).
const (
	// SwapHearth is Hearth's: package models' Manager decides which model
	// is resident (LRU weighed by reload cost, never a model with requests
	// in flight or a session in a tool pause within its grace) and an
	// evicted model sleeps (level 1) and wakes.
	SwapHearth = "hearth"
	// SwapStopStart stops the resident model and cold-starts the other on
	// every switch, once the resident one has no request in flight, and
	// admits requests first come, first served: what Ollama does when two
	// models do not fit together.
	SwapStopStart = "stop_start"
	// SwapPinned gives each model a GPU of its own, both always resident:
	// the reference where they fit.
	SwapPinned = "pinned"
)

// SwapPolicies are the policies RunSwap compares, in report order.
var SwapPolicies = []string{SwapHearth, SwapStopStart, SwapPinned}

// SwapConfig is a swap benchmark: agents on two models that do not fit one
// GPU together.
type SwapConfig struct {
	// GPU is the GPU kind both models share (the pinned policy gets one
	// each).
	GPU string
	// Agent is the model of the sessions' turns (the coder model); Side
	// the model of every side request and, with SecondAgent, of the odd
	// sessions' turns (a second agent on another model).
	Agent, Side string
	SecondAgent bool
	// MemoryFraction is each engine's share of its GPU (vLLM's
	// --gpu-memory-utilization); two above one half do not fit together.
	// Default catalog.DefaultMemoryFraction.
	MemoryFraction float64
	// Workload is the agentic workload; its sessions alternate between the
	// two models.
	Workload AgenticConfig
	// KeepAlive is each model's keep-alive under SwapHearth (default
	// models.DefaultKeepAlive): how long a tool pause protects it.
	KeepAlive time.Duration
	// StoreDir, when set, gives the engines a node SSD store (StoreGiB,
	// DiskGBps as in SimConfig) that keeps each model's blocks across its
	// swaps; each run opens a fresh one under it and removes it.
	StoreDir string
	StoreGiB float64
	DiskGBps float64
	// Seed seeds the engines' block hashes.
	Seed int64
}

// SwapSummary is one policy's run of a swap benchmark.
type SwapSummary struct {
	Policy string `json:"policy"`
	// Run is the usual summary: TurnTTFT, SideTTFT, Session (task time).
	Run RunSummary `json:"run"`
	// FirstAfterSwap is the TTFT of the requests that brought their model
	// in; Swaps counts those loads and LoadSeconds sums how long the GPU
	// spent putting models away and bringing them in.
	FirstAfterSwap Latency `json:"first_after_swap_ttft_ms"`
	Swaps          int     `json:"swaps"`
	LoadSeconds    float64 `json:"load_seconds"`
	// SSDCachedAfterSwap is the prompt tokens the requests that brought
	// their model in loaded from the node store.
	SSDCachedAfterSwap int64 `json:"ssd_cached_after_swap_tokens"`
}

// SwapComparison is RunSwap's answer: one summary per policy.
type SwapComparison struct {
	Config    SwapConfig    `json:"config"`
	Summaries []SwapSummary `json:"summaries"`
}

func (c SwapConfig) withDefaults() SwapConfig {
	if c.GPU == "" {
		c.GPU = "rtx4090"
	}
	if c.MemoryFraction == 0 {
		c.MemoryFraction = catalog.DefaultMemoryFraction
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = models.DefaultKeepAlive
	}
	if c.StoreGiB == 0 {
		c.StoreGiB = DefaultStoreGiB
	}
	if c.DiskGBps == 0 {
		c.DiskGBps = catalog.DefaultDiskGBps
	}
	c.Workload = c.Workload.WithDefaults()
	return c
}

// MarshalJSON writes the effective config, durations as Go writes them.
func (c SwapConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		GPU            string        `json:"gpu"`
		Agent          string        `json:"agent_model"`
		Side           string        `json:"side_model"`
		SecondAgent    bool          `json:"second_agent"`
		MemoryFraction float64       `json:"memory_fraction"`
		KeepAlive      string        `json:"keep_alive"`
		NodeStore      bool          `json:"node_store"`
		StoreGiB       float64       `json:"store_gib,omitempty"`
		DiskGBps       float64       `json:"disk_gbps"`
		Seed           int64         `json:"seed"`
		Workload       AgenticConfig `json:"workload"`
	}{c.GPU, c.Agent, c.Side, c.SecondAgent, c.MemoryFraction, c.KeepAlive.String(), c.StoreDir != "",
		c.StoreGiB, c.DiskGBps, c.Seed, c.Workload})
}

// RunSwap runs the workload of cfg under every policy of policies (nil:
// SwapPolicies) on the same seed, each on a fresh cluster.
func RunSwap(ctx context.Context, cfg SwapConfig, policies []string) (*SwapComparison, error) {
	cfg = cfg.withDefaults()
	if cfg.Agent == "" || cfg.Side == "" || cfg.Agent == cfg.Side {
		return nil, fmt.Errorf("bench: swap: two different models needed, got %q and %q", cfg.Agent, cfg.Side)
	}
	if _, ok := catalog.LookupGPU(cfg.GPU); !ok {
		return nil, fmt.Errorf("bench: swap: unknown GPU %q", cfg.GPU)
	}
	for _, m := range []string{cfg.Agent, cfg.Side} {
		if _, ok := catalog.LookupModel(m); !ok {
			return nil, fmt.Errorf("bench: swap: unknown model %q", m)
		}
	}
	if policies == nil {
		policies = SwapPolicies
	}
	out := &SwapComparison{Config: cfg}
	for _, p := range policies {
		w, err := NewAgentic(cfg.Workload)
		if err != nil {
			return nil, fmt.Errorf("bench: swap: %w", err)
		}
		s, err := newSwapSim(cfg, p, w)
		if err != nil {
			return nil, err
		}
		sum, err := s.run(ctx)
		s.close()
		if err != nil {
			return nil, fmt.Errorf("bench: swap: %s: %w", p, err)
		}
		out.Summaries = append(out.Summaries, sum)
	}
	return out, nil
}

// swapSim is one run of a swap benchmark in virtual time: an engine core
// per model, package router's Router with each engine as its model's
// worker, a gate that decides when a request may reach its model's
// engine (the policy), and the workload's driver. Under SwapHearth the
// gate is a models.Manager on the simulation's clock, whose Mover does not
// move anything itself: it notes what the Manager asked for, and the
// simulation holds the model's engine unavailable for the catalog's time
// of those moves (catalog.SwapTimesOf).
type swapSim struct {
	cfg    SwapConfig
	policy string
	now    time.Duration
	events swapQueue
	driver Driver
	models map[string]*swapModel
	// order is the models in a fixed order, for deterministic loops.
	order []*swapModel

	// router routes each admitted request to its model's engine, the
	// model's one worker (its queue off: the engines queue).
	router *router.Router
	// Under SwapHearth: the manager, the moves its last Acquire asked for,
	// and the cancel of that Acquire's context.
	manager *models.Manager
	moves   []swapMove
	cancel  context.CancelFunc
	// blocked are the requests whose model cannot come in yet, in the
	// order they fell due; retryAt is when they are tried again without a
	// release (as the Manager's own wait re-checks each second).
	blocked []*swapFlight
	retryAt time.Duration
	// Under SwapStopStart: the model on the GPU (nil: none).
	resident *swapModel

	store    *kvbm.Store
	storeDir string

	// flights are the requests on the engines, by request id.
	flights map[string]*swapFlight

	results     []Result
	swaps       int
	loadTime    time.Duration
	afterSwap   []time.Duration
	ssdAfterSwp int64
}

// swapModel is one model and its engine.
type swapModel struct {
	name    string
	core    *sim.Core
	times   catalog.SwapTimes
	busy    bool // a step is running
	outputs []sim.TokenOutput
	// readyAt is when the engine serves after its last load; pending are
	// the admitted requests that wait for it.
	readyAt time.Duration
	pending []*swapFlight
	// broughtIn says its last load has admitted no request yet: the first
	// it admits is the one that brought it in.
	broughtIn bool
	inFlight  int
	worker    router.WorkerID
}

type swapFlight struct {
	req   *Request
	model *swapModel
	// ticket is its place among the requests waiting for their models
	// under SwapHearth, from its arrival until its admission.
	ticket  *models.Ticket
	release func()
	swapped bool   // its admission brought the model in
	routed  string // the router's request id, once routed
	first   time.Duration
	cached  int
	ssd     int
	prompt  int
	outputs int
}

type swapMove struct {
	op     string // "sleep", "stop", "load"
	model  string
	asleep bool
}

// swapMover is the Manager's Mover inside the simulation: it records.
type swapMover struct{ s *swapSim }

func (m swapMover) Load(_ context.Context, name string, asleep bool) error {
	m.s.moves = append(m.s.moves, swapMove{op: "load", model: name, asleep: asleep})
	return nil
}

func (m swapMover) Sleep(_ context.Context, name string) error {
	m.s.moves = append(m.s.moves, swapMove{op: "sleep", model: name})
	return nil
}

func (m swapMover) Stop(_ context.Context, name string) error {
	m.s.moves = append(m.s.moves, swapMove{op: "stop", model: name})
	return nil
}

// swapClock is the Manager's clock: virtual time. The Manager asks for a
// timer only when an Acquire starts waiting for protected models to let
// go; the simulation never blocks, so that Acquire's context ends at once
// and the request waits in the simulation instead, tried again on every
// release and each second, as the Manager itself would.
type swapClock struct{ s *swapSim }

func (c swapClock) Now() time.Time { return simEpoch.Add(c.s.now) }

func (c swapClock) After(time.Duration) <-chan time.Time {
	if c.s.cancel != nil {
		c.s.cancel()
	}
	return make(chan time.Time) // never fires: the context has ended
}

func (c swapClock) NewTicker(time.Duration) (<-chan time.Time, func()) {
	return make(chan time.Time), func() {} // Run is not used
}

func newSwapSim(cfg SwapConfig, policy string, w *Agentic) (*swapSim, error) {
	s := &swapSim{cfg: cfg, policy: policy, driver: w.NewDriver(), models: map[string]*swapModel{},
		flights: map[string]*swapFlight{}}
	switch policy {
	case SwapHearth, SwapStopStart, SwapPinned:
	default:
		return nil, fmt.Errorf("bench: swap: unknown policy %q (want %s)", policy, strings.Join(SwapPolicies, ", "))
	}
	if cfg.StoreDir != "" {
		if err := s.openStore(); err != nil {
			return nil, err
		}
	}
	gpu, _ := catalog.LookupGPU(cfg.GPU)
	var ms []models.Model
	for _, name := range []string{cfg.Agent, cfg.Side} {
		model, _ := catalog.LookupModel(name)
		m := &swapModel{name: name, times: catalog.SwapTimesOf(gpu, model, catalog.Layout{TP: 1})}
		core, err := s.newCore(name)
		if err != nil {
			s.close()
			return nil, err
		}
		m.core = core
		s.models[name] = m
		s.order = append(s.order, m)
		ms = append(ms, models.Model{
			Name: name, Bytes: uint64(float64(gpu.MemoryBytes) * cfg.MemoryFraction),
			Wake: m.times.WakeLevel1, Cold: m.times.ColdFromPageCache, CanSleep: true, KeepAlive: cfg.KeepAlive,
		})
	}
	r, err := router.New(router.Config{Policy: router.PolicyHearth, QueueSize: -1, Seed: cfg.Seed}, router.WithClock(swapClock{s}))
	if err != nil {
		s.close()
		return nil, fmt.Errorf("bench: swap: %w", err)
	}
	s.router = r
	for _, m := range s.order {
		st := m.core.Stats()
		if m.worker, err = r.AddWorker(router.WorkerInfo{Name: m.name, Model: m.name, CapacityBlocks: st.NumGPUBlocks}); err != nil {
			s.close()
			return nil, fmt.Errorf("bench: swap: %w", err)
		}
	}
	if policy == SwapHearth {
		mgr, err := models.New(models.Options{Capacity: gpu.MemoryBytes, Models: ms, Mover: swapMover{s}, Clock: swapClock{s},
			PriorityWait: router.DefaultPriorityWait})
		if err != nil {
			s.close()
			return nil, fmt.Errorf("bench: swap: %w", err)
		}
		s.manager = mgr
	}
	if policy != SwapPinned {
		// Nothing is resident at the start: the first request of each
		// model loads it, under every policy but the pinned one.
		for _, m := range s.order {
			m.readyAt = -1
		}
	}
	return s, nil
}

func (s *swapSim) newCore(model string) (*sim.Core, error) {
	ec := sim.Config{GPU: s.cfg.GPU, Model: model, Seed: s.cfg.Seed, GPUMemoryUtilization: s.cfg.MemoryFraction,
		CPUOffloadGiB: DefaultKVOffloadingGiB, DiskGBps: s.cfg.DiskGBps}
	if s.store != nil {
		ec.Store = sim.ByHash(s.store.Space(kvbm.SpaceName("vllm", model, tokenizer.DefaultBlockSize)))
	}
	core, err := sim.NewCore(ec, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: swap: engine of %s: %w", model, err)
	}
	return core, nil
}

func (s *swapSim) openStore() error {
	if err := os.MkdirAll(s.cfg.StoreDir, 0o755); err != nil {
		return fmt.Errorf("bench: swap: node store: %w", err)
	}
	dir, err := os.MkdirTemp(s.cfg.StoreDir, "swap-")
	if err != nil {
		return fmt.Errorf("bench: swap: node store: %w", err)
	}
	st, err := kvbm.OpenStore(kvbm.StoreConfig{Dir: dir, CapacityBytes: int64(s.cfg.StoreGiB * (1 << 30))})
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("bench: swap: node store: %w", err)
	}
	s.store, s.storeDir = st, dir
	return nil
}

func (s *swapSim) close() {
	if s.store != nil {
		s.store.Close()
		os.RemoveAll(s.storeDir)
		s.store = nil
	}
}

// modelOf is the model a request is for: side requests on Side, with
// SecondAgent the odd sessions' turns too, the other turns on Agent.
func (s *swapSim) modelOf(req *Request) *swapModel {
	if req.Side {
		return s.models[s.cfg.Side]
	}
	n, _ := strconv.Atoi(strings.TrimPrefix(topSession(req.Session), "s"))
	if s.cfg.SecondAgent && n%2 == 1 {
		return s.models[s.cfg.Side]
	}
	return s.models[s.cfg.Agent]
}

type swapEventKind uint8

const (
	swapStepEnd swapEventKind = iota + 1
	swapReady
)

type swapEvent struct {
	at    time.Duration
	seq   uint64
	kind  swapEventKind
	model *swapModel
}

type swapQueue struct {
	items []swapEvent
	next  uint64
}

func (q *swapQueue) push(ev swapEvent) { ev.seq = q.next; q.next++; heap.Push(q, ev) }
func (q *swapQueue) Len() int          { return len(q.items) }
func (q *swapQueue) Less(i, j int) bool {
	a, b := &q.items[i], &q.items[j]
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}
func (q *swapQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *swapQueue) Push(x any)    { q.items = append(q.items, x.(swapEvent)) }
func (q *swapQueue) Pop() any {
	ev := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return ev
}

// run advances the simulation until the workload has finished.
func (s *swapSim) run(ctx context.Context) (SwapSummary, error) {
	for n := 0; ; n++ {
		if n%1024 == 0 && ctx.Err() != nil {
			return SwapSummary{}, ctx.Err()
		}
		for req := s.driver.Next(s.now); req != nil; req = s.driver.Next(s.now) {
			s.arrive(req)
		}
		for _, m := range s.order {
			if !m.busy && m.core.HasWork() {
				res := m.core.Step(s.now)
				m.busy, m.outputs = true, res.Outputs
				s.events.push(swapEvent{at: s.now + res.Duration, kind: swapStepEnd, model: m})
			}
		}
		if s.driver.Finished() {
			return s.summary(), nil
		}
		next, ok := time.Duration(0), false
		if len(s.events.items) > 0 {
			next, ok = s.events.items[0].at, true
		}
		if wake, wok := s.driver.Wake(); wok && (!ok || wake < next) {
			next, ok = wake, true
		}
		if len(s.blocked) > 0 && s.policy == SwapHearth && (!ok || s.retryAt < next) {
			next, ok = s.retryAt, true
		}
		if !ok {
			return SwapSummary{}, fmt.Errorf("%w at %v: %d requests waiting for their model", errStalled, s.now, len(s.blocked))
		}
		s.now = max(s.now, next)
		for len(s.events.items) > 0 && s.events.items[0].at <= s.now {
			ev := heap.Pop(&s.events).(swapEvent)
			switch ev.kind {
			case swapStepEnd:
				s.endStep(ev.model)
			case swapReady:
				s.startPending(ev.model)
			}
		}
		if len(s.blocked) > 0 && s.now >= s.retryAt {
			s.admitBlocked()
		}
	}
}

// arrive admits a request that fell due, or holds it until its model can
// come in.
func (s *swapSim) arrive(req *Request) {
	f := &swapFlight{req: req, model: s.modelOf(req)}
	if len(s.blocked) > 0 && s.policy == SwapStopStart {
		s.blocked = append(s.blocked, f) // first come, first served
		return
	}
	if !s.admit(f) {
		s.blocked = append(s.blocked, f)
		s.retryAt = s.now + time.Second
	}
}

// admitBlocked tries the held requests again, in the order they fell due;
// under SwapStopStart the first that cannot go holds the rest. Under
// SwapHearth it tries again while some go: the Manager orders the
// requests itself, and one admitted may let the next in line go.
func (s *swapSim) admitBlocked() {
	for {
		n := len(s.blocked)
		kept := s.blocked[:0]
		stopped := false
		for _, f := range s.blocked {
			if stopped || !s.admit(f) {
				kept = append(kept, f)
				stopped = s.policy == SwapStopStart
			}
		}
		clear(s.blocked[len(kept):])
		s.blocked = kept
		if s.policy != SwapHearth || len(kept) == 0 || len(kept) == n {
			break
		}
	}
	s.retryAt = s.now + time.Second
}

// admit lets f through to its model's engine when the policy allows,
// bringing the model in first where it must.
func (s *swapSim) admit(f *swapFlight) bool {
	m := f.model
	switch s.policy {
	case SwapHearth:
		if f.ticket == nil {
			// In line from its arrival, with the priority the gateway
			// infers for it (api: a side request after the turns).
			priority := router.PriorityTurn
			if f.req.Side {
				priority = router.PrioritySide
			}
			t, err := s.manager.Enqueue(models.Request{Model: m.name, Session: f.req.Session, Priority: priority})
			if err != nil {
				panic(fmt.Sprintf("bench: swap: %v", err)) // newSwapSim's models are configured and fit alone
			}
			f.ticket = t
		}
		ctx, cancel := context.WithCancel(context.Background())
		s.cancel, s.moves = cancel, s.moves[:0]
		release, err := f.ticket.Acquire(ctx)
		s.cancel = nil
		cancel()
		// A swap this Acquire began happened, whether or not the request
		// goes now: a request that comes before it in line may be the
		// one admitted to the model it brought in.
		if len(s.moves) > 0 {
			var took time.Duration
			var loaded *swapModel
			for _, mv := range s.moves {
				o := s.models[mv.model]
				switch {
				case mv.op == "sleep":
					took += o.times.SleepLevel1
					s.evict(o)
				case mv.op == "stop":
					s.evict(o)
				case mv.asleep:
					took += o.times.WakeLevel1
					loaded = o
				default:
					took += o.times.ColdFromPageCache
					loaded = o
				}
			}
			s.load(loaded, took)
			loaded.broughtIn = true
		}
		if errors.Is(err, models.ErrBusy) {
			return false
		}
		if err != nil {
			// Only a model larger than the GPU gets here; newSwapSim's
			// models fit alone.
			panic(fmt.Sprintf("bench: swap: %v", err))
		}
		f.release = release
		if m.broughtIn {
			f.swapped, m.broughtIn = true, false
		}
	case SwapStopStart:
		if s.resident != m {
			if s.resident != nil && (s.resident.inFlight > 0 || len(s.resident.pending) > 0) {
				return false
			}
			if s.resident != nil {
				s.evict(s.resident)
			}
			s.resident = m
			s.load(m, m.times.ColdFromPageCache)
			f.swapped = true
		}
	}
	m.inFlight++
	if s.now < m.readyAt || m.readyAt < 0 {
		m.pending = append(m.pending, f)
		return true
	}
	s.start(f)
	return true
}

// evict takes a model's engine off the GPU: its GPU and host-RAM caches
// are gone, its blocks in the node store stay.
func (s *swapSim) evict(m *swapModel) {
	core, err := s.newCore(m.name)
	if err != nil {
		panic(fmt.Sprintf("bench: swap: an engine that started before: %v", err))
	}
	m.core, m.readyAt = core, -1
}

// load makes m's engine serve after took, counted as a swap.
func (s *swapSim) load(m *swapModel, took time.Duration) {
	s.swaps++
	s.loadTime += took
	m.readyAt = s.now + took
	s.events.push(swapEvent{at: m.readyAt, kind: swapReady, model: m})
}

func (s *swapSim) startPending(m *swapModel) {
	if m.readyAt < 0 || s.now < m.readyAt {
		return // evicted again, or a later load
	}
	pending := m.pending
	m.pending = nil
	for _, f := range pending {
		s.start(f)
	}
}

func (s *swapSim) start(f *swapFlight) {
	req := f.req
	dec, _, err := s.router.Enqueue(&router.Request{ID: req.ID(), Model: f.model.name, SessionID: req.Session,
		Hashes: tokenizer.BlockHashes(req.Prompt, tokenizer.DefaultBlockSize), PromptTokens: len(req.Prompt)})
	if err != nil {
		s.finish(f, fmt.Errorf("bench: route: %w", err))
		return
	}
	if dec.WorkerID != f.model.worker {
		panic(fmt.Sprintf("bench: swap: the router sent a request for %s to worker %d", f.model.name, dec.WorkerID))
	}
	f.routed = dec.RequestID
	s.flights[dec.RequestID] = f
	if err := f.model.core.Add(s.now, &sim.Request{ID: dec.RequestID, Prompt: req.Prompt, Output: req.Answer}); err != nil {
		s.finish(f, fmt.Errorf("bench: %w %s: %w", errEngine, f.model.name, err))
	}
}

func (s *swapSim) endStep(m *swapModel) {
	m.busy = false
	for _, out := range m.outputs {
		f := s.flights[out.RequestID]
		if f == nil {
			continue
		}
		f.outputs++
		if out.Index == 0 {
			f.first, f.cached, f.prompt, f.ssd = s.now, out.CachedTokens, out.PromptTokens, out.StoreCachedTokens
			s.router.PrefillDone(f.routed)
		}
		if out.Finished {
			s.finish(f, nil)
		}
	}
}

// finish records f's result, releases its model and tells the driver;
// a release may let held requests in.
func (s *swapSim) finish(f *swapFlight, err error) {
	req := f.req
	if f.routed != "" {
		delete(s.flights, f.routed)
		s.router.Free(f.routed)
	}
	f.model.inFlight--
	r := Result{
		Session: req.Session, Turn: req.Turn, Last: req.Last, Compaction: req.Compaction, Side: req.Side,
		Sent: req.Due, FirstToken: f.first, Done: s.now,
		PromptTokens: f.prompt, OutputTokens: f.outputs, CachedTokens: f.cached, SSDCachedTokens: f.ssd,
		PauseContextTokens: pauseContext(req), Err: err,
	}
	s.results = append(s.results, r)
	if f.swapped && err == nil {
		s.afterSwap = append(s.afterSwap, f.first-req.Due)
		s.ssdAfterSwp += int64(f.ssd)
	}
	if f.release != nil {
		// The gateway tells the model's manager of a turn that ended in
		// tool calls before the request ends (api.Residency.ToolPause).
		if err == nil && endsInToolCall(req) {
			s.manager.ToolPause(f.model.name, req.Session)
		}
		f.release()
	}
	s.driver.Complete(req, s.now, err != nil)
	if len(s.blocked) > 0 {
		s.admitBlocked()
	}
}

// summary summarises the finished run.
func (s *swapSim) summary() SwapSummary {
	return SwapSummary{
		Policy:             s.policy,
		Run:                Summarize(s.policy, s.cfg.Workload.WithDefaults().Sessions, s.results),
		FirstAfterSwap:     SummarizeDurations(s.afterSwap),
		Swaps:              s.swaps,
		LoadSeconds:        s.loadTime.Seconds(),
		SSDCachedAfterSwap: s.ssdAfterSwp,
	}
}
