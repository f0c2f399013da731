package ingest

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hearth-llm/hearth/router"
)

// Collector exports the KV-event ingest counters of every worker to
// Prometheus. It reads the ingesters' own atomic counters when scraped, so
// ingest never touches a metric on its hot path.
type Collector struct {
	stats func() []Stats
	names func(router.WorkerID) string
}

// NewCollector returns a collector over stats, which lists the
// counters of every ingester (for example the Stats of each Subscriber),
// labelling each with the name names gives its worker.
func NewCollector(stats func() []Stats, names func(router.WorkerID) string) *Collector {
	return &Collector{stats: stats, names: names}
}

var (
	ingestLabels  = []string{"worker"}
	ingestEvents  = ingestDesc("kv_events_total", "KV cache events applied to the index.")
	ingestStored  = ingestDesc("kv_blocks_stored_total", "Blocks the engines reported stored, applied to the index.")
	ingestRemoved = ingestDesc("kv_blocks_removed_total", "Blocks the engines reported removed, applied to the index.")
	ingestDropped = prometheus.NewDesc("hearth_router_kv_events_dropped_total",
		"KV events or batches not applied, by reason: malformed (undecodable message), skipped (unusable event), external (about a pool outside the node, SGLang's EXTERNAL medium), orphan (stored block with an unknown parent), unknown_remove, duplicate (batch seen twice).",
		[]string{"worker", "reason"}, nil)
	ingestGaps        = ingestDesc("kv_event_gaps_total", "Sequence gaps seen on a worker's live event stream.")
	ingestRestarts    = ingestDesc("kv_engine_restarts_total", "Engine restarts detected from the event stream.")
	ingestReplays     = ingestDesc("kv_replays_total", "Replay requests made to recover missed events.")
	ingestReplayFails = ingestDesc("kv_replay_errors_total", "Replay requests that failed.")
	ingestResets      = ingestDesc("kv_view_resets_total", "Times a worker's indexed blocks were dropped because events were lost for good.")
	ingestMapped      = prometheus.NewDesc("hearth_router_kv_mapped_blocks",
		"Engine block hashes the router maps to its own hashes.", ingestLabels, nil)
)

func ingestDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("hearth_router_"+name, help, ingestLabels, nil)
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{ingestEvents, ingestStored, ingestRemoved, ingestDropped,
		ingestGaps, ingestRestarts, ingestReplays, ingestReplayFails, ingestResets, ingestMapped} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.stats() {
		w := c.names(s.WorkerID)
		counter := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), w)
		}
		counter(ingestEvents, s.Events)
		counter(ingestStored, s.BlocksStored)
		counter(ingestRemoved, s.BlocksRemoved)
		counter(ingestGaps, s.Gaps)
		counter(ingestRestarts, s.Restarts)
		counter(ingestReplays, s.Replays)
		counter(ingestReplayFails, s.ReplayErrors)
		counter(ingestResets, s.ViewResets)
		for _, d := range []struct {
			reason string
			n      uint64
		}{
			{"malformed", s.Malformed}, {"skipped", s.Skipped}, {"external", s.External}, {"orphan", s.Orphans},
			{"unknown_remove", s.UnknownRemove}, {"duplicate", s.Duplicates},
		} {
			ch <- prometheus.MustNewConstMetric(ingestDropped, prometheus.CounterValue, float64(d.n), w, d.reason)
		}
		ch <- prometheus.MustNewConstMetric(ingestMapped, prometheus.GaugeValue, float64(s.MappedBlocks), w)
	}
}
