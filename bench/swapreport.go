package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

// DefaultSwapSideRequest is the side request hearth bench agentic
// --swap-model gives each session when its workload has none: a title,
// as OpenCode asks for one at a session's start.
var DefaultSwapSideRequest = SideRequest{Name: "title", PrefixTokens: 500, AnswerTokens: IntRange{Min: 10, Max: 30}}

// RunSwapReport runs a swap benchmark as hearth bench agentic
// --swap-model does: its table to out and, with jsonPath, its summaries
// as JSON there.
func RunSwapReport(ctx context.Context, cfg SwapConfig, policies []string, out io.Writer, jsonPath string) error {
	c, err := RunSwap(ctx, cfg, policies)
	if err != nil {
		return err
	}
	cfg = c.Config
	side := "side requests"
	if cfg.SecondAgent {
		side += ", every second session"
	}
	fmt.Fprintf(out, "models on demand: %s (agent) and %s (%s) on one %s, keep-alive %v\n",
		cfg.Agent, cfg.Side, side, cfg.GPU, cfg.KeepAlive)
	if err := WriteSwapTable(out, c); err != nil {
		return err
	}
	if jsonPath == "" {
		return nil
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: swap report: %w", err)
	}
	if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench: swap report: %w", err)
	}
	return nil
}

// WriteSwapTable writes a swap benchmark's runs as an aligned text table,
// one row per policy: TTFT of the sessions' turns, of the requests that
// brought their model in ("after swap") and of the side requests, in
// seconds as p50/p90/p99; the sessions' task time p50/p90 in seconds; the
// loads, the seconds the GPU spent on them, the prompt tokens the requests
// after a swap loaded from the node store, and the errors.
func WriteSwapTable(w io.Writer, c *SwapComparison) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tturn ttft s\tafter swap s\tside ttft s\ttask s\tswaps\tload s\tssd tok after swap\terrors\t")
	for _, s := range c.Summaries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f/%.1f\t%d\t%.1f\t%d\t%d\t\n", s.Policy,
			secondsTriple(s.Run.TurnTTFT), secondsTriple(s.FirstAfterSwap), secondsTriple(s.Run.SideTTFT),
			s.Run.Session.P50/1000, s.Run.Session.P90/1000, s.Swaps, s.LoadSeconds, s.SSDCachedAfterSwap, s.Run.Errors)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("bench: write swap table: %w", err)
	}
	return nil
}

// secondsTriple is a latency's p50/p90/p99 in seconds.
func secondsTriple(l Latency) string {
	return fmt.Sprintf("%.2f/%.2f/%.2f", l.P50/1000, l.P90/1000, l.P99/1000)
}
