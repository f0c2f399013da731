package sim

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	hruntime "github.com/hearth-llm/hearth/runtime"
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

// SGLang's buckets (its TokenizerMetricsCollector).
var (
	sglangTTFTBuckets = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	sglangITLBuckets  = []float64{0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
		0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000}
	sglangE2EBuckets = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 800}
)

// engineMetrics is the /metrics registry of one simulated engine. Gauges and
// counters are read from the engine's Stats at scrape time; latency
// histograms are fed by the HTTP layer as requests finish. Latencies are in
// modelled time (wall time times the speed-up), so the histograms show the
// modelled GPU's figures whatever the speed-up.
//
// The SGLang flavour exports SGLang's names instead: its scheduler's gauges
// (labels model_name, engine_type, tp_rank, pp_rank) read from Stats, and
// its tokenizer manager's token counters and histograms (label model_name),
// which SGLang counts per finished request, as the HTTP layer does here.
type engineMetrics struct {
	registry *prometheus.Registry
	ttft     prometheus.Observer
	itl      prometheus.Observer
	e2e      prometheus.Observer
	queue    prometheus.Observer // nil for SGLang, which exports no queue histogram by default

	// SGLang's per-request counters; nil for vLLM, whose counters come
	// from Stats.
	promptTokens, generationTokens, requests prometheus.Counter
	cachedTokens                             *prometheus.CounterVec // by cache_source
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

func newEngineMetrics(kind hruntime.Kind, modelName string, cache cacheInfo, stats func() Stats) *engineMetrics {
	if kind == hruntime.KindSGLang {
		return newSGLangMetrics(modelName, cache, stats)
	}
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
	reg.MustRegister(&statsCollector{stats: stats, metrics: vllmStatMetrics(labels, cache.External)})
	reg.MustRegister(&statsCollector{stats: stats, metrics: tierStatMetrics()})

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

func newSGLangMetrics(modelName string, cache cacheInfo, stats func() Stats) *engineMetrics {
	reg := prometheus.NewRegistry()
	tokenizerLabels := prometheus.Labels{"model_name": modelName}
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: name, Help: help, Buckets: buckets, ConstLabels: tokenizerLabels,
		})
		reg.MustRegister(h)
		return h
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: tokenizerLabels})
		reg.MustRegister(c)
		return c
	}
	m := &engineMetrics{
		registry: reg,
		ttft: histogram("sglang:time_to_first_token_seconds",
			"Histogram of time to first token in seconds.", sglangTTFTBuckets),
		itl: histogram("sglang:inter_token_latency_seconds",
			"Histogram of inter-token latency in seconds.", sglangITLBuckets),
		e2e: histogram("sglang:e2e_request_latency_seconds",
			"Histogram of End-to-end request latency in seconds", sglangE2EBuckets),
		promptTokens:     counter("sglang:prompt_tokens_total", "Number of prefill tokens processed."),
		generationTokens: counter("sglang:generation_tokens_total", "Number of generation tokens processed."),
		requests:         counter("sglang:num_requests_total", "Number of requests processed."),
		cachedTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sglang:cached_tokens_total", Help: "Number of cached prompt tokens by source (device/host/storage).",
			ConstLabels: tokenizerLabels,
		}, []string{"cache_source"}),
	}
	reg.MustRegister(m.cachedTokens)
	schedulerLabels := prometheus.Labels{"model_name": modelName, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0"}
	reg.MustRegister(&statsCollector{stats: stats, metrics: sglangStatMetrics(schedulerLabels, cache.NumGPUBlocks*cache.BlockSize)})
	reg.MustRegister(&statsCollector{stats: stats, metrics: tierStatMetrics()})
	return m
}

// handler serves the registry in the Prometheus text format.
func (m *engineMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// finishedRequest is what the HTTP layer knows of a request when its last
// token arrives. Durations are modelled.
type finishedRequest struct {
	queued, firstToken, total time.Duration
	gaps                      []time.Duration
	// prompt and generated tokens; cached of the prompt found in a cache,
	// hostCached of those loaded from host RAM, storeCached from the node
	// store.
	prompt, generated, cached, hostCached, storeCached int
}

// observeRequest records one finished request: its wait in the engine's
// queue, its first token and its end since arrival, the gaps between its
// tokens, and (SGLang) its token counts.
func (m *engineMetrics) observeRequest(f finishedRequest) {
	if m.queue != nil {
		m.queue.Observe(f.queued.Seconds())
	}
	m.ttft.Observe(f.firstToken.Seconds())
	m.e2e.Observe(f.total.Seconds())
	for _, g := range f.gaps {
		m.itl.Observe(g.Seconds())
	}
	if m.promptTokens == nil {
		return
	}
	m.promptTokens.Add(float64(f.prompt))
	m.generationTokens.Add(float64(f.generated))
	m.requests.Inc()
	// SGLang creates a source's series at its first hit.
	if device := f.cached - f.hostCached - f.storeCached; device > 0 {
		m.cachedTokens.WithLabelValues("device").Add(float64(device))
	}
	if f.hostCached > 0 {
		m.cachedTokens.WithLabelValues("host").Add(float64(f.hostCached))
	}
	if f.storeCached > 0 {
		m.cachedTokens.WithLabelValues(storageFileSource).Add(float64(f.storeCached))
	}
}

// statsCollector turns one Stats snapshot per scrape into gauges and
// counters, so all of them describe the same instant.
type statsCollector struct {
	stats   func() Stats
	metrics []statMetric
}

type statMetric struct {
	desc  *prometheus.Desc
	typ   prometheus.ValueType
	value func(Stats) float64
}

func vllmStatMetrics(labels prometheus.Labels, external bool) []statMetric {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, nil, labels)
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
	if external {
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

// tierStatMetrics are the simulator's own series of the tiers below the
// GPU, in Hearth's namespace (no engine exports them under these names):
// what the host-RAM tier holds, and the blocks moved between the GPU and
// each tier. Hearth's console shows them where an engine tells no more.
func tierStatMetrics() []statMetric {
	tier := func(name, help, t string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, nil, prometheus.Labels{"tier": t})
	}
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	const (
		blocks   = "hearth_sim_kv_tier_blocks"
		capacity = "hearth_sim_kv_tier_capacity_blocks"
		loaded   = "hearth_sim_kv_tier_loaded_blocks_total"
		stored   = "hearth_sim_kv_tier_stored_blocks_total"
	)
	return []statMetric{
		{tier(blocks, "KV blocks the tier holds.", "ram"), gauge, func(s Stats) float64 { return float64(s.CPUCachedBlocks) }},
		{tier(capacity, "KV blocks the tier can hold.", "ram"), gauge, func(s Stats) float64 { return float64(s.NumCPUBlocks) }},
		{tier(loaded, "KV blocks loaded from the tier into the GPU.", "ram"), counter, func(s Stats) float64 { return float64(s.CPULoadedBlocks) }},
		{tier(loaded, "KV blocks loaded from the tier into the GPU.", "ssd"), counter, func(s Stats) float64 { return float64(s.DiskLoadedBlocks) }},
		{tier(stored, "KV blocks written from the GPU to the tier.", "ram"), counter, func(s Stats) float64 { return float64(s.CPUStoredBlocks) }},
		{tier(stored, "KV blocks written from the GPU to the tier.", "ssd"), counter, func(s Stats) float64 { return float64(s.DiskStoredBlocks) }},
	}
}

// sglangStatMetrics are SGLang's scheduler gauges. Its cache_hit_rate is
// the hit share of recent prefill batches; here it is the share since
// start of prompt tokens found in a cache, GPU or host RAM.
func sglangStatMetrics(labels prometheus.Labels, capacityTokens int) []statMetric {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, nil, labels)
	}
	gauge := prometheus.GaugeValue
	return []statMetric{
		{d("sglang:num_running_reqs", "The number of running requests."), gauge,
			func(s Stats) float64 { return float64(s.Running) }},
		{d("sglang:num_queue_reqs", "The number of requests in the waiting queue."), gauge,
			func(s Stats) float64 { return float64(s.Waiting) }},
		{d("sglang:num_used_tokens", "The number of used tokens."), gauge,
			func(s Stats) float64 { return float64(s.UsedBlocks * s.BlockSize) }},
		{d("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."), gauge,
			func(Stats) float64 { return float64(capacityTokens) }},
		{d("sglang:token_usage", "The token usage."), gauge,
			func(s Stats) float64 { return s.KVUsage }},
		{d("sglang:cache_hit_rate", "The prefix cache hit rate."), gauge,
			func(s Stats) float64 {
				if s.PrefixQueries == 0 {
					return 0
				}
				return float64(s.PrefixHits+s.ExternalPrefixHits) / float64(s.PrefixQueries)
			}},
	}
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics {
		ch <- m.desc
	}
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for _, m := range c.metrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.typ, m.value(s))
	}
}

// storageFileSource is SGLang's cache_source of tokens its HiCache storage
// tier (the file backend) supplied.
const storageFileSource = "storage_file"
