package ingest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hearth-llm/hearth/router"
)

func TestCollector(t *testing.T) {
	stats := []Stats{
		{WorkerID: 0, Events: 7, BlocksStored: 20, Malformed: 1, Gaps: 2, MappedBlocks: 18},
		{WorkerID: 3, Events: 1, Orphans: 4},
	}
	c := NewCollector(func() []Stats { return stats }, func(w router.WorkerID) string {
		return map[router.WorkerID]string{0: "gpu0", 3: "gpu3"}[w]
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
	if n := testutil.CollectAndCount(c, "hearth_router_kv_events_dropped_total"); n != 2*6 {
		t.Errorf("%d dropped-event series, want one per worker and reason (12)", n)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP hearth_router_kv_events_dropped_total KV events or batches not applied, by reason: malformed (undecodable message), skipped (unusable event), external (about a pool outside the node, SGLang's EXTERNAL medium), orphan (stored block with an unknown parent), unknown_remove, duplicate (batch seen twice).
# TYPE hearth_router_kv_events_dropped_total counter
hearth_router_kv_events_dropped_total{reason="duplicate",worker="gpu0"} 0
hearth_router_kv_events_dropped_total{reason="duplicate",worker="gpu3"} 0
hearth_router_kv_events_dropped_total{reason="external",worker="gpu0"} 0
hearth_router_kv_events_dropped_total{reason="external",worker="gpu3"} 0
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
