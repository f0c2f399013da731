package bench

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/kvevents"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/router/ingest"
	"github.com/hearth-llm/hearth/router/osl"
	"github.com/hearth-llm/hearth/router/warm"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// simEpoch is the wall-clock instant virtual time zero maps to, for the
// router's clock and the events' timestamps. Fixed, so that runs repeat.
var simEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// errStalled means the simulation has requests left but nothing that could
// ever move them: a bug, reported rather than looped on.
var errStalled = errors.New("bench: simulation stalled")

// des is one discrete-event simulation: a cluster of engine cores, the
// router and a workload's driver, advanced in virtual time. Nothing sleeps:
// the clock jumps from one event to the next.
//
// At each instant the loop applies every event that falls then (engine
// steps ending, KV event batches reaching the router), hands the requests
// that fell due to the router and the engines it picks, and starts a step
// on every idle engine with work. A step's tokens and KV events exist when
// the step ends; the events reach the router EventLatency later.
type des struct {
	now     time.Duration
	latency time.Duration
	events  desQueue
	engines []*desEngine
	byID    [router.MaxWorkers]*desEngine
	router  *router.Router
	driver  Driver
	session bool // pass session ids to the router (agentic workloads)
	// osl estimates each request's output length as the gateway would
	// (nil: none); with SimConfig.InferOSL the estimate is the request's
	// osl hint. client is the workload's client preset.
	osl    *osl.Estimator
	client string
	filler []uint32

	// store is the node's SSD store (nil without one) and storeDir its
	// directory, removed when the run ends.
	store    *kvbm.Store
	storeDir string
	// restartAt is when every engine restarts (0: never); held keeps the
	// requests that fall due while the engines drain for it.
	restartAt  time.Duration
	restarting bool
	restarted  bool
	held       []*Request
	cfg        SimConfig

	// waiting holds the tickets of requests the router queued because
	// every worker was saturated, in arrival order. The router dispatches
	// them inside PrefillDone and Free; collectDispatched starts them on
	// their engines after each such call.
	waiting  []*flight
	ready    []*flight // scratch of collectDispatched
	inflight map[string]*flight

	// prefills are the prefills in the tool pause on the engines, by
	// engine request id; pauses the live one of each session that waits
	// for its tools, by session; deadlines their timeouts in the order
	// they were sent (the timeout is the same for all, so that is time
	// order). InferHints only.
	prefills  map[string]*prefill
	pauses    map[string]*prefill
	deadlines []*prefill
	prefilled PrefillCounts

	results []Result
	// learner learns the sessions' shared prefixes as the gateway does
	// (WarmStart; nil without); warmed counts the prefixes prefilled on
	// the engines, at the start and after a restart.
	learner      *warm.Learner
	warmed       int
	queued       int
	maxQueue     int
	eventBatches int64

	// Progress reporting.
	progress      func(ProgressState)
	label         string
	kind          string
	duration      time.Duration
	totalSessions int
	sessionsDone  int
	rec           Recorder

	// onDeliver, if set (tests), is called before each batch is applied,
	// with the time the engine published it.
	onDeliver func(e *desEngine, published time.Duration)
}

// desEngine is one engine of the cluster.
type desEngine struct {
	d      *des
	gpu    string
	worker router.WorkerID
	core   *sim.Core
	// before sums the counters of the cores a restart replaced.
	before   sim.Stats
	ingester *ingest.Ingester
	busy     bool
	outputs  []sim.TokenOutput // of the step in progress; the core reuses the slice

	nextSeq  uint64 // sequence number of the next event batch
	requests int
	steps    int64
	speed    float64
}

// PublishKVEvents is the engine's event sink: it encodes the batch as the
// wire payload at once (the slice is reused) and schedules its delivery.
func (e *desEngine) PublishKVEvents(now time.Duration, events []kvevents.Event) {
	if len(events) == 0 {
		return
	}
	d := e.d
	payload := kvevents.AppendBatch(nil, &kvevents.Batch{
		TS: kvevents.Timestamp(simEpoch.Add(now)), HasDPRank: true, Events: events,
	}, kvevents.FormatMap)
	d.events.push(desEvent{at: now + d.latency, kind: evDeliver, engine: e, batchSeq: e.nextSeq, payload: payload, published: now})
	e.nextSeq++
}

// flight is a request between falling due and ending.
type flight struct {
	req      *Request
	hashes   []tokenizer.SeqHash
	engine   *desEngine
	decision router.Decision
	ticket   *router.Ticket // while it waits in the router queue
	first    time.Duration
	cached   int
	// ramCached and ssdCached are the parts of cached loaded from the
	// tiers below the GPU.
	ramCached, ssdCached int
	prompt               int
	outputs              int
	// oslCall and oslEst are the output-length estimator's view of the
	// request and its estimate.
	oslCall osl.Call
	oslEst  osl.Estimate
}

// prefill is a prefill in the tool pause, sent by the simulated gateway
// straight to an engine (toolPausePrefill).
type prefill struct {
	id       string
	session  string
	engine   *desEngine
	deadline time.Duration
	done     bool // completed, cancelled or timed out
}

type desEventKind uint8

const (
	evStepEnd desEventKind = iota + 1
	evDeliver
)

type desEvent struct {
	at     time.Duration
	seq    uint64 // insertion order, so that equal times stay in order
	kind   desEventKind
	engine *desEngine
	// A delivery's batch: its sequence number on the engine's stream, its
	// wire payload and when the engine published it.
	batchSeq  uint64
	payload   []byte
	published time.Duration
}

// desQueue is a min-heap of events by time, then insertion order.
type desQueue struct {
	items []desEvent
	next  uint64
}

func (q *desQueue) push(ev desEvent) {
	ev.seq = q.next
	q.next++
	heap.Push(q, ev)
}

func (q *desQueue) Len() int { return len(q.items) }
func (q *desQueue) Less(i, j int) bool {
	a, b := &q.items[i], &q.items[j]
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}
func (q *desQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *desQueue) Push(x any)    { q.items = append(q.items, x.(desEvent)) }
func (q *desQueue) Pop() any {
	ev := q.items[len(q.items)-1]
	q.items[len(q.items)-1] = desEvent{}
	q.items = q.items[:len(q.items)-1]
	return ev
}

// newDES builds a fresh cluster for one run of w under policy.
func (s *Sim) newDES(w Workload, policy string) (*des, error) {
	cfg := s.cfg
	d := &des{
		latency:  cfg.EventLatency,
		driver:   w.NewDriver(),
		session:  w.Kind() == "agentic",
		inflight: make(map[string]*flight),
		prefills: make(map[string]*prefill),
		pauses:   make(map[string]*prefill),
		kind:     w.Kind(),
	}
	switch w := w.(type) {
	case *Agentic:
		c := w.Config()
		d.duration, d.totalSessions = c.Duration, c.TotalSessions
		d.client = c.Client
	case *Trace:
		d.totalSessions = w.Len()
	}
	rc := cfg.Router
	rc.Policy, rc.Seed = policy, cfg.Seed
	r, err := router.New(rc, router.WithClock(virtualClock{d}),
		router.WithLogger(cfg.Logger))
	if err != nil {
		return nil, fmt.Errorf("bench: sim: %w", err)
	}
	d.router = r
	d.cfg, d.restartAt = cfg, cfg.RestartAt
	if cfg.InferOSL {
		d.osl = osl.New(osl.Config{}, virtualClock{d})
	}
	var space *kvbm.Space
	if cfg.StoreDir != "" {
		if err := d.openStore(); err != nil {
			return nil, err
		}
		space = d.store.Space(kvbm.SpaceName("vllm", cfg.Model, tokenizer.DefaultBlockSize))
	}
	for i, gpu := range cfg.engineGPUs() {
		profile := s.profiles[gpu]
		e := &desEngine{d: d, gpu: gpu, speed: profile.PrefillTokensPerSec}
		ec := cfg.engineConfig(gpu)
		info := router.WorkerInfo{
			Name:                fmt.Sprintf("%s-%d", gpu, i),
			CapacityBlocks:      profile.GPUBlocks,
			PrefillTokensPerSec: profile.PrefillTokensPerSec,
			RAMCapacityBlocks:   profile.CPUBlocks,
			BlockBytes:          profile.BlockBytes,
			LoadBytesPerSec:     profile.LoadBytesPerSec,
		}
		if space != nil {
			ec.Store = sim.ByHash(space)
			info.Node, info.DiskLoadBytesPerSec = simNode, cfg.DiskGBps*1e9
		}
		core, err := sim.NewCore(ec, e)
		if err != nil {
			d.close()
			return nil, fmt.Errorf("bench: sim: engine %d: %w", i, err)
		}
		e.core = core
		id, err := r.AddWorker(info)
		if err != nil {
			d.close()
			return nil, fmt.Errorf("bench: sim: %w", err)
		}
		e.worker = id
		e.ingester = ingest.NewIngester(ingest.IngesterConfig{
			WorkerID: id, Logger: cfg.Logger,
		}, r.Index(), nil)
		r.AttachIngester(id, e.ingester)
		d.engines = append(d.engines, e)
		d.byID[id] = e
	}
	if a, ok := w.(*Agentic); ok && cfg.WarmStart {
		d.learner = learnEarlierPrefixes(a, cfg.Model)
		if err := d.warmBeforeStart(d.learner.Hot(cfg.Model)); err != nil {
			d.close()
			return nil, err
		}
	}
	return d, nil
}

// openStore opens a fresh node store for the run; what it evicts leaves
// the router's index as the daemon's store tells it.
func (d *des) openStore() error {
	if err := os.MkdirAll(d.cfg.StoreDir, 0o755); err != nil {
		return fmt.Errorf("bench: sim: node store: %w", err)
	}
	dir, err := os.MkdirTemp(d.cfg.StoreDir, "run-")
	if err != nil {
		return fmt.Errorf("bench: sim: node store: %w", err)
	}
	st, err := kvbm.OpenStore(kvbm.StoreConfig{
		Dir: dir, CapacityBytes: int64(d.cfg.StoreGiB * (1 << 30)), Logger: d.cfg.Logger,
		OnEvict: func(_ string, hashes []uint64) { d.router.RemoveNodeBlocks(simNode, "", hashes) },
	})
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("bench: sim: node store: %w", err)
	}
	d.store, d.storeDir = st, dir
	return nil
}

// close removes the run's node store.
func (d *des) close() {
	if d.store != nil {
		d.store.Close()
		os.RemoveAll(d.storeDir)
		d.store = nil
	}
}

// run advances the simulation until the driver has finished.
func (d *des) run(ctx context.Context) error {
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("bench: sim: %w", err)
			}
		}
		done, err := d.step()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// step handles the current instant, then moves the clock to the next one.
// It reports true when the run is over.
func (d *des) step() (bool, error) {
	if d.restartAt > 0 && !d.restarted && d.now >= d.restartAt && !d.restarting {
		d.restarting = true
		d.cancelPrefills() // the gateway's shutdown cancels them all
	}
	for req := d.driver.Next(d.now); req != nil; req = d.driver.Next(d.now) {
		if d.restarting {
			d.held = append(d.held, req)
			continue
		}
		d.arrive(req)
	}
	if d.restarting && len(d.inflight) == 0 && len(d.events.items) == 0 {
		d.restartEngines()
	}
	for _, e := range d.engines {
		if !e.busy && e.core.HasWork() {
			d.startStep(e)
		}
	}
	if d.driver.Finished() {
		return true, nil
	}
	next, ok := time.Duration(0), false
	if len(d.events.items) > 0 {
		next, ok = d.events.items[0].at, true
	}
	if wake, wok := d.driver.Wake(); wok && (!ok || wake < next) {
		next, ok = wake, true
	}
	if dl, dok := d.nextDeadline(); dok && (!ok || dl < next) {
		next, ok = dl, true
	}
	if !ok {
		return false, fmt.Errorf("%w at %v: %d requests in flight, %d waiting for a worker",
			errStalled, d.now, len(d.inflight), len(d.waiting))
	}
	d.now = max(d.now, next)
	for len(d.events.items) > 0 && d.events.items[0].at <= d.now {
		ev := heap.Pop(&d.events).(desEvent)
		switch ev.kind {
		case evStepEnd:
			d.endStep(ev.engine)
		case evDeliver:
			d.deliver(ev)
		}
	}
	d.expirePrefills()
	return false, nil
}

// startStep runs one scheduler step on e; its outputs count when it ends.
func (d *des) startStep(e *desEngine) {
	res := e.core.Step(d.now)
	e.steps++
	e.busy = true
	e.outputs = res.Outputs
	d.events.push(desEvent{at: d.now + res.Duration, kind: evStepEnd, engine: e})
}

// endStep applies the outputs of e's step, which the core keeps until its
// next Step.
func (d *des) endStep(e *desEngine) {
	e.busy = false
	for _, out := range e.outputs {
		f := d.inflight[out.RequestID]
		if f == nil {
			if p := d.prefills[out.RequestID]; p != nil && out.Finished {
				d.prefilled.Completed++
				d.endPrefill(p)
			}
			continue
		}
		f.outputs++
		if out.Index == 0 {
			f.first, f.cached, f.prompt = d.now, out.CachedTokens, out.PromptTokens
			f.ramCached, f.ssdCached = out.HostCachedTokens, out.StoreCachedTokens
			d.router.PrefillDone(out.RequestID)
			d.collectDispatched()
		}
		if out.Finished {
			d.router.Free(out.RequestID)
			d.finish(f, nil)
			d.collectDispatched()
		}
	}
}

// deliver hands one event batch to the router's ingest, as its ZMQ
// subscriber would.
func (d *des) deliver(ev desEvent) {
	if d.onDeliver != nil {
		d.onDeliver(ev.engine, ev.published)
	}
	// The ingester has no replay source, so it cannot block or fail.
	_ = ev.engine.ingester.HandleLive(context.Background(), ev.batchSeq, ev.payload)
	d.eventBatches++
}

// arrive hands a request that fell due to the router, which either
// decides at once or queues it.
func (d *des) arrive(req *Request) {
	// The gateway cancels the session's prefill before routing its turn:
	// the turn computes what is left.
	if p := d.pauses[req.Session]; p != nil && !req.Side {
		d.cancelPrefill(p)
	}
	d.observeFirstPrompt(req)
	f := &flight{req: req, hashes: tokenizer.BlockHashes(req.Prompt, tokenizer.DefaultBlockSize)}
	d.inflight[req.ID()] = f
	rr := &router.Request{ID: req.ID(), Hashes: f.hashes, PromptTokens: len(req.Prompt)}
	if d.cfg.InferHints && req.Side {
		rr.Hints.Priority = router.PrioritySide
	}
	if d.session {
		rr.SessionID = req.Session
	}
	if d.osl != nil {
		f.oslCall = oslCall(d.client, req)
		f.oslEst = d.osl.Predict(f.oslCall)
		rr.Hints.OSL = f.oslEst.Tokens
	}
	dec, ticket, err := d.router.Enqueue(rr)
	switch {
	case err != nil:
		d.finish(f, fmt.Errorf("bench: route: %w", err))
	case ticket != nil:
		f.ticket = ticket
		d.waiting = append(d.waiting, f)
		d.queued++
		d.maxQueue = max(d.maxQueue, len(d.waiting))
	default:
		d.start(f, dec)
	}
	// Enqueue expires lost requests and start frees refused ones: either
	// can dispatch waiters.
	d.collectDispatched()
}

// collectDispatched starts the queued requests the router dispatched in
// the calls just made, in the router's dispatch order (Ticket.Order), so
// that a run is a function of its seed. Starting one may free it again
// (the engine refuses it), which can dispatch more: it loops until none is
// left.
func (d *des) collectDispatched() {
	for {
		ready := d.ready[:0]
		kept := d.waiting[:0]
		for _, f := range d.waiting {
			if f.ticket.Ready() {
				ready = append(ready, f)
			} else {
				kept = append(kept, f)
			}
		}
		if len(ready) == 0 {
			return
		}
		clear(d.waiting[len(kept):])
		d.waiting = kept
		slices.SortFunc(ready, func(a, b *flight) int { return cmp.Compare(a.ticket.Order(), b.ticket.Order()) })
		for _, f := range ready {
			dec, err := f.ticket.Result()
			f.ticket = nil
			if err != nil {
				d.finish(f, fmt.Errorf("bench: route: %w", err))
				continue
			}
			d.start(f, dec)
		}
		clear(ready)
		d.ready = ready[:0]
	}
}

// start adds a routed request to the engine the router picked.
func (d *des) start(f *flight, dec router.Decision) {
	req := f.req
	e := d.byID[dec.WorkerID]
	f.engine, f.decision = e, dec
	out := req.Answer
	if len(out) != req.OutputTokens {
		out = d.fill(req.OutputTokens)
	}
	// The engine is told a side request's priority only in the router: as
	// the gateway does, it sends an inferred side request at a turn's.
	if err := e.core.Add(d.now, &sim.Request{ID: dec.RequestID, Prompt: req.Prompt, Output: out}); err != nil {
		d.router.Free(dec.RequestID) // may dispatch: the caller collects
		d.finish(f, fmt.Errorf("bench: %w %s: %w", errEngine, e.gpu, err))
		return
	}
	e.requests++
}

// fill returns n output tokens for a request without a canned answer (a
// trace's): the engine only schedules and times them.
func (d *des) fill(n int) []uint32 {
	for len(d.filler) < n {
		d.filler = append(d.filler, vocabulary[len(d.filler)%len(vocabulary)].id)
	}
	return d.filler[:n:n]
}

// finish records the request's result and tells the driver.
func (d *des) finish(f *flight, err error) {
	req := f.req
	delete(d.inflight, req.ID())
	r := Result{
		Session: req.Session, Turn: req.Turn, Last: req.Last, Compaction: req.Compaction, Side: req.Side,
		Sent: req.Due, FirstToken: f.first, Done: d.now,
		PromptTokens: f.prompt, OutputTokens: f.outputs, CachedTokens: f.cached,
		RAMCachedTokens: f.ramCached, SSDCachedTokens: f.ssdCached, PauseContextTokens: pauseContext(req),
		PredictedCachedTokens: (f.decision.CachedBlocks + f.decision.LowerTierBlocks) * tokenizer.DefaultBlockSize,
		PredictedRAMTokens:    f.decision.RAMBlocks * tokenizer.DefaultBlockSize,
		PredictedSSDTokens:    f.decision.DiskBlocks * tokenizer.DefaultBlockSize,
		Err:                   err,
	}
	if d.osl != nil && err == nil {
		d.osl.Observe(f.oslCall, oslKind(req), f.outputs)
		r.PredictedOutputTokens, r.PredictionWarm = f.oslEst.Tokens, f.oslEst.SessionTurns >= osl.WarmTurns
	}
	d.results = append(d.results, r)
	d.rec.Add(r)
	if err == nil && d.cfg.InferHints && d.session && !d.restarting && endsInToolCall(req) {
		d.prefillToolPause(f)
	}
	d.driver.Complete(req, d.now, err != nil)
	if d.endsSession(req, err != nil) {
		d.sessionsDone++
	}
	if d.progress != nil {
		d.progress(d.progressState())
	}
}

// pauseContext is the length of req's prompt before its tool result when
// req is a turn after a tool pause (its prompt ends in one), else 0.
func pauseContext(req *Request) int {
	if n := len(req.Segments); n > 0 && req.Segments[n-1].Role == RoleTool {
		return req.Segments[n-1].Start
	}
	return 0
}

// endsSession reports whether req was the last request of a top-level
// session (agentic) or of its own (trace).
func (d *des) endsSession(req *Request, failed bool) bool {
	return endsSession(req, failed)
}

func (d *des) progressState() ProgressState {
	n, errs := d.rec.Counts()
	return ProgressState{
		Label:         d.label,
		SessionsDone:  d.sessionsDone,
		SessionsTotal: d.totalSessions,
		Elapsed:       d.now,
		Duration:      d.duration,
		Requests:      n,
		Errors:        errs,
		TTFTP50:       d.rec.TTFTP50(),
	}
}

// result summarises the finished run.
func (d *des) result(policy string, sessions int) *SimRun {
	run := &SimRun{
		Results:      d.results,
		Queued:       d.queued,
		MaxQueue:     d.maxQueue,
		EventBatches: d.eventBatches,
	}
	for _, r := range d.results {
		run.Elapsed = max(run.Elapsed, r.Done)
	}
	for _, e := range d.engines {
		st, b := e.core.Stats(), e.before
		run.Engines = append(run.Engines, EngineStats{
			GPU: e.gpu, NumGPUBlocks: st.NumGPUBlocks, PrefillTokensPerSec: e.speed,
			PrefixQueries: b.PrefixQueries + st.PrefixQueries, PrefixHits: b.PrefixHits + st.PrefixHits,
			Preemptions: b.Preemptions + st.Preemptions, NumCPUBlocks: st.NumCPUBlocks,
			ExternalPrefixHits: b.ExternalPrefixHits + st.ExternalPrefixHits,
			DiskLoadedBlocks:   b.DiskLoadedBlocks + st.DiskLoadedBlocks,
			DiskStoredBlocks:   b.DiskStoredBlocks + st.DiskStoredBlocks,
			Requests:           e.requests, Steps: e.steps,
		})
	}
	if d.restarted {
		run.Restart = restartSummary(d.results, d.restartAt)
	}
	run.Summary = Summarize(policy, sessions, d.results)
	if d.prefilled.Sent > 0 {
		counts := d.prefilled
		run.Summary.ToolPausePrefill = &counts
	}
	return run
}

// restartEngines starts every engine afresh once they have drained (no
// request in flight, no step or event batch pending): a new core with
// empty GPU and host-RAM caches (the node store stays). The router's view
// of the old one is cleared before any request is routed, as the daemon
// takes a stopped engine out of routing. The requests held meanwhile go to
// the router in the order they fell due.
func (d *des) restartEngines() {
	for _, e := range d.engines {
		cfg := e.core.Config()
		st := e.core.Stats()
		e.before.PrefixQueries += st.PrefixQueries
		e.before.PrefixHits += st.PrefixHits
		e.before.Preemptions += st.Preemptions
		e.before.ExternalPrefixHits += st.ExternalPrefixHits
		e.before.DiskLoadedBlocks += st.DiskLoadedBlocks
		e.before.DiskStoredBlocks += st.DiskStoredBlocks
		core, err := sim.NewCore(cfg, e)
		if err != nil {
			panic(fmt.Sprintf("bench: sim: restarting an engine that started before: %v", err))
		}
		e.core = core
		payload := kvevents.AppendBatch(nil, &kvevents.Batch{
			TS: kvevents.Timestamp(simEpoch.Add(d.now)), HasDPRank: true,
			Events: []kvevents.Event{{Kind: kvevents.AllBlocksCleared}},
		}, kvevents.FormatMap)
		d.deliver(desEvent{engine: e, batchSeq: e.nextSeq, payload: payload, published: d.now})
		e.nextSeq++
	}
	d.warmAfterRestart()
	d.restarting, d.restarted = false, true
	held := d.held
	d.held = nil
	for _, req := range held {
		d.arrive(req)
	}
}

// virtualClock is the simulation's virtual time, as the router reads it.
type virtualClock struct{ d *des }

func (c virtualClock) Now() time.Time { return simEpoch.Add(c.d.now) }
