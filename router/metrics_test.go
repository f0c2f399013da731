package router

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("registering twice succeeded")
	}
	r, err := New(Config{Policy: PolicyKV}, WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.AddWorker(WorkerInfo{Name: "gpu0"}); err != nil {
		t.Fatal(err)
	}
	route(t, r, &Request{ID: "x", Hashes: chain("x", 4), PromptTokens: 64})

	want := `
# HELP hearth_router_active_blocks KV blocks held by the running requests of a worker, including expected output.
# TYPE hearth_router_active_blocks gauge
hearth_router_active_blocks{worker="gpu0"} 4
# HELP hearth_router_pending_prefill_tokens Prompt tokens routed to a worker whose first token has not arrived.
# TYPE hearth_router_pending_prefill_tokens gauge
hearth_router_pending_prefill_tokens{worker="gpu0"} 64
# HELP hearth_router_queue_depth Requests waiting for a worker that is not saturated.
# TYPE hearth_router_queue_depth gauge
hearth_router_queue_depth 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"hearth_router_active_blocks", "hearth_router_pending_prefill_tokens",
		"hearth_router_queue_depth"); err != nil {
		t.Error(err)
	}
	if n := testutil.ToFloat64(m.perPolicy[PolicyKV]); n != 1 {
		t.Errorf("decisions_total{policy=kv} = %v", n)
	}
	if n := testutil.CollectAndCount(m.predictedHitRate); n != 1 {
		t.Errorf("hit rate histogram has %d series", n)
	}
	r.Free("x")
	if v := testutil.ToFloat64(m.activeBlocks.WithLabelValues("gpu0")); v != 0 {
		t.Errorf("active blocks after free: %v", v)
	}
	r.RemoveWorker(0)
	if n := testutil.CollectAndCount(m.activeBlocks); n != 0 {
		t.Errorf("removed worker still has %d gauge series", n)
	}
	var nilMetrics *Metrics
	nilMetrics.dropWorker("gpu0") // must not panic
}

func TestIngestCollector(t *testing.T) {
	stats := []IngestStats{
		{WorkerID: 0, Events: 7, BlocksStored: 20, Malformed: 1, Gaps: 2, MappedBlocks: 18},
		{WorkerID: 3, Events: 1, Orphans: 4},
	}
	c := NewIngestCollector(func() []IngestStats { return stats }, func(w WorkerID) string {
		return map[WorkerID]string{0: "gpu0", 3: "gpu3"}[w]
	})
	want := `
# HELP hearth_router_kv_events_total KV cache events applied to the index.
# TYPE hearth_router_kv_events_total counter
hearth_router_kv_events_total{worker="gpu0"} 7
hearth_router_kv_events_total{worker="gpu3"} 1
# HELP hearth_router_kv_event_gaps_total Sequence gaps seen on a worker's live event stream.
# TYPE hearth_router_kv_event_gaps_total counter
hearth_router_kv_event_gaps_total{worker="gpu0"} 2
hearth_router_kv_event_gaps_total{worker="gpu3"} 0
# HELP hearth_router_kv_mapped_blocks Engine block hashes the router maps to its own hashes.
# TYPE hearth_router_kv_mapped_blocks gauge
hearth_router_kv_mapped_blocks{worker="gpu0"} 18
hearth_router_kv_mapped_blocks{worker="gpu3"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"hearth_router_kv_events_total", "hearth_router_kv_event_gaps_total", "hearth_router_kv_mapped_blocks"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "hearth_router_kv_events_dropped_total"); n != 2*5 {
		t.Errorf("%d dropped-event series, want one per worker and reason (10)", n)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP hearth_router_kv_events_dropped_total KV events or batches not applied, by reason: malformed (undecodable message), skipped (unusable event), orphan (stored block with an unknown parent), unknown_remove, duplicate (batch seen twice).
# TYPE hearth_router_kv_events_dropped_total counter
hearth_router_kv_events_dropped_total{reason="duplicate",worker="gpu0"} 0
hearth_router_kv_events_dropped_total{reason="duplicate",worker="gpu3"} 0
hearth_router_kv_events_dropped_total{reason="malformed",worker="gpu0"} 1
hearth_router_kv_events_dropped_total{reason="malformed",worker="gpu3"} 0
hearth_router_kv_events_dropped_total{reason="orphan",worker="gpu0"} 0
hearth_router_kv_events_dropped_total{reason="orphan",worker="gpu3"} 4
hearth_router_kv_events_dropped_total{reason="skipped",worker="gpu0"} 0
hearth_router_kv_events_dropped_total{reason="skipped",worker="gpu3"} 0
hearth_router_kv_events_dropped_total{reason="unknown_remove",worker="gpu0"} 0
hearth_router_kv_events_dropped_total{reason="unknown_remove",worker="gpu3"} 0
`), "hearth_router_kv_events_dropped_total"); err != nil {
		t.Error(err)
	}
}
