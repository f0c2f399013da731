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
