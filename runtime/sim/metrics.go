package sim

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Histogram buckets of vLLM V1's Prometheus logger, so dashboards built for
// vLLM read the simulated engine unchanged.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	requestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0,
		20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// engineMetrics is the /metrics registry of one simulated engine. Gauges and
// counters are read from the engine's Stats at scrape time; latency
// histograms are fed by the HTTP layer as requests finish. Latencies are in
// modelled time (wall time times the speed-up), so the histograms show the
// modelled GPU's figures whatever the speed-up.
type engineMetrics struct {
	registry *prometheus.Registry
	ttft     prometheus.Observer
	itl      prometheus.Observer
	e2e      prometheus.Observer
	queue    prometheus.Observer
}

// cacheInfo is what vllm:cache_config_info reports.
type cacheInfo struct {
	NumGPUBlocks         int
	BlockSize            int
	GPUMemoryUtilization float64
	// External: the engine has a KV connector (the host-RAM tier), so it
	// exports vLLM's external prefix-cache counters.
	External bool
}

func newEngineMetrics(modelName string, cache cacheInfo, stats func() Stats) *engineMetrics {
	labels := prometheus.Labels{"model_name": modelName, "engine": "0"}
	reg := prometheus.NewRegistry()
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: name, Help: help, Buckets: buckets, ConstLabels: labels,
		})
		reg.MustRegister(h)
		return h
	}
	m := &engineMetrics{
		registry: reg,
		ttft: histogram("vllm:time_to_first_token_seconds",
			"Histogram of time to first token in seconds.", ttftBuckets),
		itl: histogram("vllm:inter_token_latency_seconds",
			"Histogram of inter-token latency in seconds.", itlBuckets),
		e2e: histogram("vllm:e2e_request_latency_seconds",
			"Histogram of e2e request latency in seconds.", requestLatencyBuckets),
		queue: histogram("vllm:request_queue_time_seconds",
			"Histogram of time spent in WAITING phase for request.", requestLatencyBuckets),
	}
	reg.MustRegister(&statsCollector{labels: labels, stats: stats, external: cache.External})

	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vllm:cache_config_info",
		Help: "Information of the LLMEngine CacheConfig",
		ConstLabels: prometheus.Labels{
			"engine":                 "0",
			"block_size":             strconv.Itoa(cache.BlockSize),
			"num_gpu_blocks":         strconv.Itoa(cache.NumGPUBlocks),
			"gpu_memory_utilization": strconv.FormatFloat(cache.GPUMemoryUtilization, 'g', -1, 64),
			"enable_prefix_caching":  "True",
			"cache_dtype":            "auto",
		},
	})
	info.Set(1)
	reg.MustRegister(info)
	return m
}

// handler serves the registry in the Prometheus text format.
func (m *engineMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// observeRequest records one finished request's latencies, all modelled
// durations: its wait in the engine's queue, its first token and its end
// since arrival, and the gaps between its tokens.
func (m *engineMetrics) observeRequest(queued, firstToken, total time.Duration, gaps []time.Duration) {
	m.queue.Observe(queued.Seconds())
	m.ttft.Observe(firstToken.Seconds())
	m.e2e.Observe(total.Seconds())
	for _, g := range gaps {
		m.itl.Observe(g.Seconds())
	}
}

// statsCollector turns one Stats snapshot per scrape into vLLM's gauges and
// counters, so all of them describe the same instant.
type statsCollector struct {
	labels   prometheus.Labels
	stats    func() Stats
	external bool
}

type statMetric struct {
	desc  *prometheus.Desc
	typ   prometheus.ValueType
	value func(Stats) float64
}

func (c *statsCollector) metrics() []statMetric {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, nil, c.labels)
	}
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	out := []statMetric{
		{d("vllm:num_requests_running", "Number of requests in model execution batches."), gauge,
			func(s Stats) float64 { return float64(s.Running) }},
		{d("vllm:num_requests_waiting", "Number of requests waiting to be processed."), gauge,
			func(s Stats) float64 { return float64(s.Waiting) }},
		{d("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."), gauge,
			func(s Stats) float64 { return s.KVUsage }},
		{d("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens."), counter,
			func(s Stats) float64 { return float64(s.PrefixQueries) }},
		{d("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens."), counter,
			func(s Stats) float64 { return float64(s.PrefixHits) }},
		{d("vllm:num_preemptions_total", "Cumulative number of preemption from the engine."), counter,
			func(s Stats) float64 { return float64(s.Preemptions) }},
		{d("vllm:prompt_tokens_total", "Number of prefill tokens processed."), counter,
			func(s Stats) float64 { return float64(s.PromptTokens) }},
		{d("vllm:generation_tokens_total", "Number of generation tokens processed."), counter,
			func(s Stats) float64 { return float64(s.GenerationTokens) }},
	}
	if c.external {
		out = append(out,
			statMetric{d("vllm:external_prefix_cache_queries_total",
				"External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens."), counter,
				func(s Stats) float64 { return float64(s.ExternalPrefixQueries) }},
			statMetric{d("vllm:external_prefix_cache_hits_total",
				"External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens."), counter,
				func(s Stats) float64 { return float64(s.ExternalPrefixHits) }})
	}
	return out
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics() {
		ch <- m.desc
	}
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for _, m := range c.metrics() {
		ch <- prometheus.MustNewConstMetric(m.desc, m.typ, m.value(s))
	}
}
