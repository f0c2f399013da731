package console

import (
	"context"
	"fmt"
	"math"
	"time"
)

// snapshot is everything the pages show at one instant. It is immutable once
// built: the hub's goroutine builds it, handlers and renders only read it.
type snapshot struct {
	at time.Time

	engines    []Engine
	enginesErr error

	decisions []Decision // newest first, at most Config.DecisionsShown
	queue     int
	routerErr error

	requests   []Request // arrived within Config.StatsWindow
	sessions   []Session
	trafficErr error

	stores    []KVStore
	storesErr error

	residency    Residency
	residencyErr error

	workers    map[string]workerView // by Engine.Worker
	storeViews map[string]storeView  // by KVStore.Node
	cluster    clusterView
}

// workerView is what the history adds to one engine's figures.
type workerView struct {
	chart        []chartPoint // oldest first, Config.ChartPoints long
	tokensPerSec float64      // NaN before two samples
	gpu          gpuSeries    // nil slices when the worker has no GPU history
	tiers        tierView
}

// tierView is where a worker's prompt tokens came from over
// Config.StatsWindow, as shares of the tokens it looked up (NaN when it
// looked up none), and how fast it moves KV between the GPU and the tiers
// below, between the last two samples (NaN before two).
type tierView struct {
	gpuShare, ramShare, diskShare float64
	loadedPerSec, storedPerSec    float64
}

// storeView is what the history adds to one node's SSD store: hit rate,
// evicted and corrupt blocks over Config.StatsWindow (the rate NaN without
// lookups), and disk traffic between the last two samples (NaN before
// two).
type storeView struct {
	hitRate                 float64
	evicted, corrupt        int64
	readPerSec, writePerSec float64
}

// gpuSeries are a worker's GPU readings laid on a grid of one slot per
// Config.Interval, oldest first and ending now, Config.TelemetrySamples
// long; NaN where no reading was taken or it was unknown.
type gpuSeries struct {
	utilPct, tempC, powerW, memUsed []float64
}

// gpuSample is one reading of a GPU; NaN where the source could not tell.
type gpuSample struct {
	at                              time.Time
	utilPct, tempC, powerW, memUsed float64
}

// gpuSampleOf reads the telemetry of e. A lost GPU reports nothing, even
// if the source repeats its last figures.
func gpuSampleOf(now time.Time, e *Engine) gpuSample {
	nan := math.NaN()
	s := gpuSample{at: now, utilPct: nan, tempC: nan, powerW: nan, memUsed: nan}
	if e.GPULost {
		return s
	}
	if e.UtilizationPct >= 0 {
		s.utilPct = float64(e.UtilizationPct)
	}
	if e.TemperatureC >= 0 {
		s.tempC = float64(e.TemperatureC)
	}
	if e.PowerDrawW >= 0 {
		s.powerW = e.PowerDrawW
	}
	if e.MemoryUsed > 0 && !e.MemoryReserved {
		s.memUsed = float64(e.MemoryUsed)
	}
	return s
}

// gpuRing holds a worker's latest GPU samples; its size is fixed, so a
// worker's telemetry costs the same however long it runs.
type gpuRing struct {
	samples []gpuSample
	next    int // where the next sample goes
	held    int
}

func (r *gpuRing) add(s gpuSample) {
	r.samples[r.next] = s
	r.next = (r.next + 1) % len(r.samples)
	r.held = min(r.held+1, len(r.samples))
}

// series lays the samples on the slot grid ending at now. A sample lands in
// the slot nearest its age; a later one in the same slot wins, and samples
// older than the grid or from the future are left out.
func (r *gpuRing) series(now time.Time, interval time.Duration) gpuSeries {
	n := len(r.samples)
	backing := make([]float64, 4*n)
	for i := range backing {
		backing[i] = math.NaN()
	}
	g := gpuSeries{utilPct: backing[:n:n], tempC: backing[n : 2*n : 2*n], powerW: backing[2*n : 3*n : 3*n], memUsed: backing[3*n:]}
	for k := range r.held {
		s := &r.samples[(r.next-r.held+k+n)%n]
		age := now.Sub(s.at)
		slot := n - 1 - int((age+interval/2)/interval)
		if age < 0 || slot < 0 {
			continue
		}
		g.utilPct[slot], g.tempC[slot], g.powerW[slot], g.memUsed[slot] = s.utilPct, s.tempC, s.powerW, s.memUsed
	}
	return g
}

// chartPoint is one bucket of a hit-rate chart. A bucket in which the
// engine was read but asked nothing holds the rate before it (an idle agent
// thinking is no missing data); NaN where the worker was not read at all,
// or before its first figure in the chart.
type chartPoint struct {
	predicted, measured float64
}

// clusterView are the engine-counter figures over Config.StatsWindow.
type clusterView struct {
	hitRate float64 // NaN when no prompt token was looked up
}

// bucket accumulates one chart interval of one worker.
type bucket struct {
	queries, hits         int64 // engine prefix-cache counters (tokens)
	predCached, predTotal int64 // router decisions (blocks)
	generated             int64 // output tokens
	ramHits, diskHits     int64 // prompt tokens loaded from the tiers below the GPU
	// read is set when the engine's counters were read in the bucket, so
	// that a bucket without lookups is idle rather than unknown.
	read bool
}

// bucketRing is a ring of chart buckets, the newest at head.
type bucketRing[B any] struct {
	ring    []B
	head    int   // index of the current bucket in ring
	headIdx int64 // absolute bucket number of ring[head]; -1 before the first
}

func newBucketRing[B any](n int) bucketRing[B] {
	return bucketRing[B]{ring: make([]B, n), headIdx: -1}
}

// workerHistory is one worker's ring of buckets and its last counters.
type workerHistory struct {
	bucketRing[bucket]
	lastSeen time.Time

	primed             bool
	queries, hits, gen int64 // cumulative counters at the last sample
	ram, disk          int64 // tokens loaded from RAM and SSD at the last sample
	loaded, stored     int64 // bytes moved at the last sample
	lastSample         time.Time
	tokPerSec          float64 // output tokens per second between the last two samples
	// Bytes per second moved into and out of the GPU between the last two
	// samples.
	loadedPerSec, storedPerSec float64

	gpu *gpuRing // nil until the worker's engine is sampled, and once it is gone
}

// storeBucket accumulates one chart interval of one node's SSD store.
type storeBucket struct {
	hits, misses, evicted, corrupt int64
}

// storeHistory is one node's SSD store: its buckets and last counters.
type storeHistory struct {
	bucketRing[storeBucket]
	lastSeen time.Time

	primed                                        bool
	hits, misses, evicted, corrupt, read, written int64 // at the last sample
	lastSample                                    time.Time
	readPerSec, writePerSec                       float64
}

// sampler reads the sources and keeps the history the charts need. It is
// used by one goroutine at a time (the hub's, or a handler's read-only
// collect before the hub has run).
type sampler struct {
	cfg      Config
	engines  EngineSource
	router   RouterSource
	traffic  TrafficSource
	kvStores KVStoreSource
	models   ModelSource

	history map[string]*workerHistory
	stores  map[string]*storeHistory // by node

	// Decisions already counted: everything older than lastDecision, and
	// the ids at exactly lastDecision.
	lastDecision   time.Time
	idsAtLast      map[string]struct{}
	decisionsAsked int
}

func newSampler(cfg Config, d Deps) *sampler {
	return &sampler{
		cfg:            cfg,
		engines:        d.Engines,
		router:         d.Router,
		traffic:        d.Traffic,
		kvStores:       d.KVStores,
		models:         d.Models,
		history:        make(map[string]*workerHistory),
		stores:         make(map[string]*storeHistory),
		idsAtLast:      make(map[string]struct{}),
		decisionsAsked: max(cfg.DecisionsShown, cfg.DecisionScan),
	}
}

// bucketLen is the time one chart point covers.
func (s *sampler) bucketLen() time.Duration {
	return s.cfg.ChartWindow / time.Duration(s.cfg.ChartPoints)
}

// collect reads every source. With record set it also advances the history
// (only the hub's ticks record, so that page loads do not skew rates).
func (s *sampler) collect(ctx context.Context, now time.Time, record bool) *snapshot {
	snap := &snapshot{at: now, workers: make(map[string]workerView), storeViews: make(map[string]storeView)}

	if s.engines != nil {
		snap.engines, snap.enginesErr = s.engines.Engines(ctx)
		if snap.enginesErr != nil {
			snap.enginesErr = fmt.Errorf("engines: %w", snap.enginesErr)
		}
	}
	var decisions []Decision
	if s.router != nil {
		var err error
		decisions, err = s.router.Decisions(ctx, s.decisionsAsked)
		if err == nil {
			snap.queue, err = s.router.QueueLen(ctx)
		}
		if err != nil {
			snap.routerErr = fmt.Errorf("router: %w", err)
		}
	}
	snap.decisions = decisions[:min(len(decisions), s.cfg.DecisionsShown)]
	if s.traffic != nil {
		var err error
		snap.requests, err = s.traffic.RequestsSince(ctx, now.Add(-s.cfg.StatsWindow))
		if err == nil {
			snap.sessions, err = s.traffic.Sessions(ctx)
		}
		if err != nil {
			snap.trafficErr = fmt.Errorf("traffic: %w", err)
		}
	}

	if s.kvStores != nil {
		snap.stores, snap.storesErr = s.kvStores.KVStores(ctx)
		if snap.storesErr != nil {
			snap.storesErr = fmt.Errorf("KV stores: %w", snap.storesErr)
		}
	}

	if s.models != nil {
		snap.residency, snap.residencyErr = s.models.Residency(ctx)
		if snap.residencyErr != nil {
			snap.residencyErr = fmt.Errorf("models: %w", snap.residencyErr)
		}
	}

	if record {
		s.record(now, snap.engines, snap.enginesErr == nil, decisions)
		s.recordStores(now, snap.stores)
	}
	s.views(now, snap)
	s.storeViews(now, snap)
	return snap
}

// record folds one sample into the history. enginesRead is false when the
// engine source failed, which says nothing about which workers exist.
func (s *sampler) record(now time.Time, engines []Engine, enginesRead bool, decisions []Decision) {
	live := make(map[string]bool, len(engines))
	for i := range engines {
		e := &engines[i]
		live[e.Worker] = true
		h := s.workerHistory(e.Worker)
		b := h.advance(now, s.bucketLen())
		h.lastSeen = now
		if h.gpu == nil {
			h.gpu = &gpuRing{samples: make([]gpuSample, s.cfg.TelemetrySamples)}
		}
		h.gpu.add(gpuSampleOf(now, e))
		if e.Err != "" {
			// The engine could not be read: its counters say nothing,
			// and the next reading counts from the last good one.
			continue
		}
		b.read = true
		if h.primed {
			b.queries += counterDelta(h.queries, e.PrefixQueries)
			b.hits += counterDelta(h.hits, e.PrefixHits)
			b.ramHits += counterDelta(h.ram, e.RAMHitTokens)
			b.diskHits += counterDelta(h.disk, e.DiskHitTokens)
			gen := counterDelta(h.gen, e.GenerationTokens)
			b.generated += gen
			if dt := now.Sub(h.lastSample).Seconds(); dt > 0 {
				h.tokPerSec = float64(gen) / dt
				h.loadedPerSec = float64(counterDelta(h.loaded, e.LoadedBytes)) / dt
				h.storedPerSec = float64(counterDelta(h.stored, e.StoredBytes)) / dt
			}
		} else {
			h.tokPerSec, h.loadedPerSec, h.storedPerSec = math.NaN(), math.NaN(), math.NaN()
		}
		h.primed = true
		h.queries, h.hits, h.gen = e.PrefixQueries, e.PrefixHits, e.GenerationTokens
		h.ram, h.disk, h.loaded, h.stored = e.RAMHitTokens, e.DiskHitTokens, e.LoadedBytes, e.StoredBytes
		h.lastSample = now
	}

	// Decisions arrive newest first; count each once.
	newest, newestIDs := s.lastDecision, map[string]struct{}(nil)
	for _, d := range decisions {
		if d.At.Before(s.lastDecision) {
			break
		}
		if d.At.Equal(s.lastDecision) {
			if _, seen := s.idsAtLast[d.RequestID]; seen {
				continue
			}
		}
		if d.At.After(newest) {
			newest, newestIDs = d.At, nil
		}
		if d.At.Equal(newest) {
			if newestIDs == nil {
				newestIDs = make(map[string]struct{})
			}
			newestIDs[d.RequestID] = struct{}{}
		}
		if d.PromptBlocks <= 0 {
			continue
		}
		h := s.workerHistory(d.Worker)
		h.lastSeen = now
		b := h.advance(now, s.bucketLen())
		b.predCached += int64(d.CachedBlocks)
		b.predTotal += int64(d.PromptBlocks)
	}
	if newestIDs != nil {
		if newest.Equal(s.lastDecision) {
			for id := range newestIDs {
				s.idsAtLast[id] = struct{}{}
			}
		} else {
			s.lastDecision, s.idsAtLast = newest, newestIDs
		}
	}

	// Forget workers gone for longer than the chart shows, and at once the
	// GPU readings of a worker the engine source no longer lists: a worker
	// that comes back under the same name starts a fresh history.
	for name, h := range s.history {
		if !live[name] && now.Sub(h.lastSeen) > s.cfg.ChartWindow {
			delete(s.history, name)
			continue
		}
		if !live[name] && enginesRead {
			h.gpu = nil
		}
	}
}

func (s *sampler) workerHistory(name string) *workerHistory {
	h := s.history[name]
	if h == nil {
		h = &workerHistory{bucketRing: newBucketRing[bucket](s.cfg.ChartPoints)}
		s.history[name] = h
	}
	return h
}

// advance moves the ring to the bucket of now, clearing skipped buckets,
// and returns that bucket.
func (h *bucketRing[B]) advance(now time.Time, length time.Duration) *B {
	idx := now.UnixNano() / int64(length)
	switch {
	case h.headIdx < 0:
		h.headIdx = idx
	case idx > h.headIdx:
		steps := min(idx-h.headIdx, int64(len(h.ring)))
		for range steps {
			h.head = (h.head + 1) % len(h.ring)
			var zero B
			h.ring[h.head] = zero
		}
		h.headIdx = idx
	}
	// A clock that goes back lands in the current bucket.
	return &h.ring[h.head]
}

// counterDelta is how much a cumulative counter grew; a counter that went
// down was reset (engine restart) and counts from zero.
func counterDelta(prev, cur int64) int64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// views derives per-worker charts and cluster figures for snap.
func (s *sampler) views(now time.Time, snap *snapshot) {
	length := s.bucketLen()
	nowIdx := now.UnixNano() / int64(length)
	windowBuckets := int64(math.Ceil(float64(s.cfg.StatsWindow) / float64(length)))
	var clusterQueries, clusterHits int64
	var queries, hits, ram, disk int64      // the worker's, in the window
	read := make([]bool, s.cfg.ChartPoints) // by chart point: the engine was read
	for name, h := range s.history {
		chart := make([]chartPoint, len(h.ring))
		for i := range chart {
			chart[i] = chartPoint{math.NaN(), math.NaN()}
		}
		clear(read)
		queries, hits, ram, disk = 0, 0, 0, 0
		if h.headIdx >= 0 {
			for back := range int64(len(h.ring)) {
				idx := h.headIdx - back
				age := nowIdx - idx
				if age < 0 || age >= int64(len(h.ring)) {
					continue
				}
				b := h.ring[(h.head-int(back)+len(h.ring))%len(h.ring)]
				p := &chart[len(chart)-1-int(age)]
				if b.queries > 0 {
					// An engine cannot hit more tokens than it looked up;
					// counters read at slightly different moments can.
					p.measured = min(float64(b.hits)/float64(b.queries), 1)
				}
				if b.predTotal > 0 {
					p.predicted = float64(b.predCached) / float64(b.predTotal)
				}
				read[len(chart)-1-int(age)] = b.read
				if age < windowBuckets {
					queries += b.queries
					hits += b.hits
					ram += b.ramHits
					disk += b.diskHits
				}
			}
		}
		clusterQueries += queries
		clusterHits += hits
		holdThroughIdle(chart, read)
		tps := h.tokPerSec
		tiers := tierView{
			gpuShare: math.NaN(), ramShare: math.NaN(), diskShare: math.NaN(),
			loadedPerSec: h.loadedPerSec, storedPerSec: h.storedPerSec,
		}
		if !h.primed || now.Sub(h.lastSample) > 2*s.cfg.Interval+length {
			tps, tiers.loadedPerSec, tiers.storedPerSec = math.NaN(), math.NaN(), math.NaN()
		}
		if queries > 0 {
			tiers.gpuShare, tiers.ramShare, tiers.diskShare = tierShares(queries, hits, ram, disk)
		}
		v := workerView{chart: chart, tokensPerSec: tps, tiers: tiers}
		if h.gpu != nil {
			v.gpu = h.gpu.series(now, s.cfg.Interval)
		}
		snap.workers[name] = v
	}
	snap.cluster.hitRate = math.NaN()
	if clusterQueries > 0 {
		snap.cluster.hitRate = min(float64(clusterHits)/float64(clusterQueries), 1)
	}
}

// holdThroughIdle carries each line's last figure through the points whose
// bucket had the engine read but no lookups or decisions: no request came,
// which is no reason to break the line. Points where the engine was not read
// stay gaps; the line resumes after one at its last figure.
func holdThroughIdle(chart []chartPoint, read []bool) {
	lastMeasured, lastPredicted := math.NaN(), math.NaN()
	for i := range chart {
		p := &chart[i]
		if !math.IsNaN(p.measured) {
			lastMeasured = p.measured
		} else if read[i] {
			p.measured = lastMeasured
		}
		if !math.IsNaN(p.predicted) {
			lastPredicted = p.predicted
		} else if read[i] {
			p.predicted = lastPredicted
		}
	}
}

// tierShares splits the prompt tokens looked up into GPU hits, RAM loads
// and SSD loads. Counters read at slightly different moments can claim
// more than was looked up; each share is cut to what the ones before it
// left, so that they never sum past one.
func tierShares(queries, gpu, ram, disk int64) (gpuShare, ramShare, diskShare float64) {
	q := float64(queries)
	gpuShare = min(float64(max(gpu, 0))/q, 1)
	ramShare = min(float64(max(ram, 0))/q, 1-gpuShare)
	diskShare = min(float64(max(disk, 0))/q, 1-gpuShare-ramShare)
	return gpuShare, ramShare, diskShare
}

// recordStores folds one reading of the SSD stores into their history.
func (s *sampler) recordStores(now time.Time, stores []KVStore) {
	for i := range stores {
		st := &stores[i]
		h := s.stores[st.Node]
		if h == nil {
			h = &storeHistory{bucketRing: newBucketRing[storeBucket](s.cfg.ChartPoints)}
			s.stores[st.Node] = h
		}
		b := h.advance(now, s.bucketLen())
		h.lastSeen = now
		if st.Err != "" {
			continue // as for an engine: the next reading counts from the last good one
		}
		if h.primed {
			b.hits += counterDelta(h.hits, st.Hits)
			b.misses += counterDelta(h.misses, st.Misses)
			b.evicted += counterDelta(h.evicted, st.EvictedBlocks)
			b.corrupt += counterDelta(h.corrupt, st.CorruptDropped)
			if dt := now.Sub(h.lastSample).Seconds(); dt > 0 {
				h.readPerSec = float64(counterDelta(h.read, st.ReadBytes)) / dt
				h.writePerSec = float64(counterDelta(h.written, st.WrittenBytes)) / dt
			}
		} else {
			h.readPerSec, h.writePerSec = math.NaN(), math.NaN()
		}
		h.primed = true
		h.hits, h.misses, h.evicted, h.corrupt = st.Hits, st.Misses, st.EvictedBlocks, st.CorruptDropped
		h.read, h.written = st.ReadBytes, st.WrittenBytes
		h.lastSample = now
	}
	for node, h := range s.stores {
		if now.Sub(h.lastSeen) > s.cfg.ChartWindow {
			delete(s.stores, node)
		}
	}
}

// storeViews derives each store's window figures for snap.
func (s *sampler) storeViews(now time.Time, snap *snapshot) {
	length := s.bucketLen()
	nowIdx := now.UnixNano() / int64(length)
	windowBuckets := int64(math.Ceil(float64(s.cfg.StatsWindow) / float64(length)))
	for node, h := range s.stores {
		var hits, misses int64
		v := storeView{hitRate: math.NaN(), readPerSec: h.readPerSec, writePerSec: h.writePerSec}
		if h.headIdx >= 0 {
			for back := range int64(len(h.ring)) {
				age := nowIdx - (h.headIdx - back)
				if age < 0 || age >= windowBuckets {
					continue
				}
				b := &h.ring[(h.head-int(back)+len(h.ring))%len(h.ring)]
				hits += b.hits
				misses += b.misses
				v.evicted += b.evicted
				v.corrupt += b.corrupt
			}
		}
		if hits+misses > 0 {
			v.hitRate = float64(hits) / float64(hits+misses)
		}
		if !h.primed || now.Sub(h.lastSample) > 2*s.cfg.Interval+length {
			v.readPerSec, v.writePerSec = math.NaN(), math.NaN()
		}
		snap.storeViews[node] = v
	}
}
