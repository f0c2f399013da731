package runtime

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestScrapeStatsUpstreamExposition reads /metrics pages written by hand
// from the engines' own metric definitions (names, label names, and
// prometheus_client's text exposition, which names a counter's HELP and
// TYPE lines with its _total sample and puts its _created timestamp in a
// gauge of its own), not from Hearth's simulator:
// vLLM's vllm/v1/metrics/loggers.py, SGLang's
// python/sglang/srt/metrics/collector.py before and after
// cached_tokens_total got its cache_source label. docs/engine-conformance.md
// cites the versions read.
func TestScrapeStatsUpstreamExposition(t *testing.T) {
	tests := []struct {
		name, page string
		want       Stats
	}{
		{"vllm", `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.25
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="Qwen/Qwen3-8B"} 1000.0
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="Qwen/Qwen3-8B"} 640.0
# HELP vllm:prefix_cache_hits_created Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_created gauge
vllm:prefix_cache_hits_created{engine="0",model_name="Qwen/Qwen3-8B"} 1.7646e+09
# HELP vllm:external_prefix_cache_hits_total External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.
# TYPE vllm:external_prefix_cache_hits_total counter
vllm:external_prefix_cache_hits_total{engine="0",model_name="Qwen/Qwen3-8B"} 128.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 77.0
`, Stats{Running: 3, Waiting: 2, KVUsage: 0.25, PrefixQueries: 1000, PrefixHits: 640, GenerationTokens: 77,
			RAMHitTokens: 128, RAMBlocks: -1}},
		{"sglang cached tokens by source", `# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="Qwen/Qwen3-8B"} 4.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="Qwen/Qwen3-8B"} 1.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="Qwen/Qwen3-8B"} 0.5
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="Qwen/Qwen3-8B"} 2000.0
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="Qwen/Qwen3-8B"} 90.0
# HELP sglang:cached_tokens_total Number of cached prompt tokens by source (device/host/storage).
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{cache_source="device",model_name="Qwen/Qwen3-8B"} 800.0
sglang:cached_tokens_total{cache_source="host",model_name="Qwen/Qwen3-8B"} 300.0
sglang:cached_tokens_total{cache_source="storage",model_name="Qwen/Qwen3-8B"} 100.0
# HELP sglang:cached_tokens_created Number of cached prompt tokens by source (device/host/storage).
# TYPE sglang:cached_tokens_created gauge
sglang:cached_tokens_created{cache_source="device",model_name="Qwen/Qwen3-8B"} 1.7646e+09
`, Stats{Running: 4, Waiting: 1, KVUsage: 0.5, PrefixQueries: 2000, PrefixHits: 800, GenerationTokens: 90,
			RAMHitTokens: 300, StoreHitTokens: 100, RAMBlocks: -1}},
		{"sglang cached tokens without source", `# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 0.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 0.0
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="m"} 100.0
# HELP sglang:cached_tokens_total Number of cached prompt tokens.
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{model_name="m"} 64.0
`, Stats{PrefixQueries: 100, PrefixHits: 64, RAMBlocks: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/metrics" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
				w.Write([]byte(tc.page))
			}))
			defer srv.Close()
			got, err := ScrapeStats(context.Background(), srv.Client(), srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("ScrapeStats = %+v, want %+v", got, tc.want)
			}
		})
	}
}
