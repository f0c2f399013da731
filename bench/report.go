package bench

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
)

// RoundRobin is the name of the baseline policy other policies' TTFT is
// compared with.
const RoundRobin = "round_robin"

// Report is the JSON output of a benchmark (--json FILE).
type Report struct {
	// Workload holds every parameter of the workload: an *Agentic,
	// AgenticConfig or *Trace, which marshal themselves with a "kind".
	Workload any          `json:"workload"`
	Runs     []RunSummary `json:"runs"`
	// Spread summarises runs of several seeds (see Spreads); nil for
	// runs of one seed.
	Spread []Spread `json:"spread,omitempty"`
}

// WriteJSON writes r as indented JSON followed by a newline.
func WriteJSON(w io.Writer, r Report) error {
	if r.Runs == nil {
		r.Runs = []RunSummary{} // "runs": [] rather than null
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("bench: write report: %w", err)
	}
	return nil
}

// MarshalJSON writes the effective config (see AgenticConfig.MarshalJSON).
func (a *Agentic) MarshalJSON() ([]byte, error) { return a.cfg.MarshalJSON() }

// sortedRuns returns the runs ordered by concurrency level, keeping the
// given order of policies within a level.
func sortedRuns(runs []RunSummary) []RunSummary {
	out := slices.Clone(runs)
	slices.SortStableFunc(out, func(a, b RunSummary) int { return cmp.Compare(a.Sessions, b.Sessions) })
	return out
}

// WriteTable writes the runs as an aligned text table, one row per
// concurrency level and policy, ordered by level. Latencies are in
// milliseconds, task times in seconds: "slow ttft" is the slowest turn's
// TTFT of each finished session, "task" the session's task time (see
// RunSummary). "errors" is the count with its causes, "compact/s" the
// compactions per session started, "done" the sessions
// finished of those started. "ttft vs rr" is the
// run's TTFT p50 divided by round_robin's at the same level ("-" without a
// round_robin run there or when its p50 is 0).
func WriteTable(w io.Writer, runs []RunSummary) error {
	bw := bufio.NewWriter(w)
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "sessions\tpolicy\trequests\terrors\tcompact/s\tdone\tttft p50\tttft p90\tttft p99\tslow ttft p50\tslow ttft p90\tslow ttft p99\t"+
		"task p50\ttask p90\ttask p99\titl p50\te2e p50\tout tok/s\thit pred\tpred gpu/ram/ssd\thit engine\tttft vs rr\t")
	baseline := make(map[int]float64)
	for _, r := range runs {
		if r.Policy == RoundRobin {
			if _, seen := baseline[r.Sessions]; !seen {
				baseline[r.Sessions] = r.TTFT.P50
			}
		}
	}
	for _, r := range sortedRuns(runs) {
		ratio := "-"
		if base, ok := baseline[r.Sessions]; ok && base > 0 {
			ratio = strconv.FormatFloat(r.TTFT.P50/base, 'f', 2, 64) + "x"
		}
		// Without a finished session there is no session figure to show.
		slow, task := "-\t-\t-", "-\t-\t-"
		if r.FinishedSessions > 0 {
			slow = fmt.Sprintf("%.1f\t%.1f\t%.1f", r.SlowestTurnTTFT.P50, r.SlowestTurnTTFT.P90, r.SlowestTurnTTFT.P99)
			task = fmt.Sprintf("%.1f\t%.1f\t%.1f", r.Session.P50/1000, r.Session.P90/1000, r.Session.P99/1000)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%.2f\t%d/%d\t%.1f\t%.1f\t%.1f\t%s\t%s\t%.2f\t%.1f\t%.1f\t%.1f%%\t%s\t%.1f%%\t%s\t\n",
			r.Sessions, r.Policy, r.Requests, errorsCell(r), r.CompactionsPerSession, r.FinishedSessions, r.StartedSessions,
			r.TTFT.P50, r.TTFT.P90, r.TTFT.P99, slow, task,
			r.ITL.P50, r.E2E.P50, r.OutputTokS,
			100*r.PredictedHitRate, predictedTiersCell(r), 100*r.EngineHitRate, ratio)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("bench: write table: %w", err)
	}
	fmt.Fprintln(bw, "latencies in ms, task times in s; compact/s: compactions per session started; done: sessions finished of those started; slow ttft: each finished session's slowest TTFT; task: a session's first request to its last token;")
	fmt.Fprintln(bw, "errors by cause: ctx (context length), queue (router queue full), engine, timeout, other; ttft vs rr: TTFT p50 over round_robin's at the same sessions;")
	fmt.Fprintln(bw, "hit pred: prompt tokens the router predicted cached on the worker it chose, every tier, split by tier in pred gpu/ram/ssd; hit engine: those the engines did not compute")
	writeOutputLengthErrors(bw, runs)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("bench: write table: %w", err)
	}
	return nil
}

// predictedTiersCell is the table's pred gpu/ram/ssd column: the predicted
// hit rate split into the GPU's, host RAM's and the node SSD's share, in
// points of prompt tokens, e.g. "38.1/14.2/0.6".
func predictedTiersCell(r RunSummary) string {
	gpu := r.PredictedHitRate - r.PredictedRAMHitRate - r.PredictedSSDHitRate
	return fmt.Sprintf("%.1f/%.1f/%.1f", 100*gpu, 100*r.PredictedRAMHitRate, 100*r.PredictedSSDHitRate)
}

// errorsCell is the table's errors column: "0", or "3 (ctx 3)".
func errorsCell(r RunSummary) string {
	if r.Errors == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", r.Errors, r.ErrorsByCause)
}
