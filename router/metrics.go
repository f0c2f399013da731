package router

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the router's Prometheus metrics. A nil *Metrics is valid and
// records nothing. One Metrics serves one Router; the event ingest is
// exported by an IngestCollector.
type Metrics struct {
	predictedHitRate prometheus.Histogram
	decisionSeconds  prometheus.Histogram
	queueDepth       prometheus.Gauge
	activeBlocks     *prometheus.GaugeVec
	pendingTokens    *prometheus.GaugeVec
	indexEntries     prometheus.Gauge
	indexEvicted     prometheus.Gauge
	decisions        *prometheus.CounterVec
	perPolicy        map[string]prometheus.Counter // resolved once: no label lookup per decision
	routedBlocks     *prometheus.CounterVec
	routedGPU        prometheus.Counter
	routedRAM        prometheus.Counter
	routedSSD        prometheus.Counter
}

// NewMetrics creates the router's metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		predictedHitRate: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "hearth", Subsystem: "router", Name: "predicted_hit_rate",
			Help:    "Share of a request's prompt blocks cached on the chosen worker, as predicted when routing.",
			Buckets: []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1},
		}),
		decisionSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "hearth", Subsystem: "router", Name: "decision_seconds",
			Help:    "Time to decide a route, excluding time waiting in the queue.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 2, 16),
		}),
		queueDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "hearth", Subsystem: "router", Name: "queue_depth",
			Help: "Requests waiting for a worker that is not saturated.",
		}),
		activeBlocks: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "hearth", Subsystem: "router", Name: "active_blocks",
			Help: "KV blocks held by the running requests of a worker, including expected output.",
		}, []string{"worker"}),
		pendingTokens: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "hearth", Subsystem: "router", Name: "pending_prefill_tokens",
			Help: "Prompt tokens routed to a worker whose first token has not arrived.",
		}, []string{"worker"}),
		indexEntries: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "hearth", Subsystem: "router", Name: "index_entries",
			Help: "(block, worker, tier) entries in the block index.",
		}),
		indexEvicted: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "hearth", Subsystem: "router", Name: "index_evicted_blocks",
			Help: "Blocks dropped from the index to stay within its memory budget, since start.",
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hearth", Subsystem: "router", Name: "decisions_total",
			Help: "Routing decisions by policy.",
		}, []string{"policy"}),
		routedBlocks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hearth", Subsystem: "router", Name: "routed_blocks_total",
			Help: "Prompt blocks the chosen worker was predicted to hold, by tier: its GPU prefix (gpu), then host RAM (ram), then disk (ssd).",
		}, []string{"tier"}),
	}
	var errs []error
	for _, c := range []prometheus.Collector{
		m.predictedHitRate, m.decisionSeconds, m.queueDepth, m.activeBlocks, m.pendingTokens,
		m.indexEntries, m.indexEvicted, m.decisions, m.routedBlocks,
	} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("router metrics: %w", err)
	}
	names := PolicyNames()
	m.perPolicy = make(map[string]prometheus.Counter, len(names))
	for _, p := range names {
		m.perPolicy[p] = m.decisions.WithLabelValues(p)
	}
	m.routedGPU = m.routedBlocks.WithLabelValues("gpu")
	m.routedRAM = m.routedBlocks.WithLabelValues("ram")
	m.routedSSD = m.routedBlocks.WithLabelValues("ssd")
	return m, nil
}

// workerGauges are the per-worker gauges, resolved once per worker so that
// routing does not look labels up.
type workerGauges struct {
	active, pending prometheus.Gauge
}

func (m *Metrics) forWorker(name string) workerGauges {
	if m == nil {
		return workerGauges{}
	}
	return workerGauges{
		active:  m.activeBlocks.WithLabelValues(name),
		pending: m.pendingTokens.WithLabelValues(name),
	}
}

func (m *Metrics) dropWorker(name string) {
	if m == nil {
		return
	}
	m.activeBlocks.DeleteLabelValues(name)
	m.pendingTokens.DeleteLabelValues(name)
}

func (g workerGauges) set(activeBlocks, pendingTokens int) {
	if g.active == nil {
		return
	}
	g.active.Set(float64(activeBlocks))
	g.pending.Set(float64(pendingTokens))
}

func (m *Metrics) setQueueDepth(n int) {
	if m == nil {
		return
	}
	m.queueDepth.Set(float64(n))
}

func (m *Metrics) observeDecision(d *Decision, took time.Duration, ix *Index) {
	if m == nil {
		return
	}
	m.predictedHitRate.Observe(d.PredictedHitRate)
	m.decisionSeconds.Observe(took.Seconds())
	if c := m.perPolicy[d.Policy]; c != nil {
		c.Inc()
	}
	m.routedGPU.Add(float64(d.CachedBlocks))
	m.routedRAM.Add(float64(d.RAMBlocks))
	m.routedSSD.Add(float64(d.DiskBlocks))
	st := ix.Stats()
	m.indexEntries.Set(float64(st.Entries))
	m.indexEvicted.Set(float64(st.EvictedBlocks))
}
