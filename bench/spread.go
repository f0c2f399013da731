package bench

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// Range is a figure over several seeds: the median and the extremes.
type Range struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// rangeOf summarises values; it sorts them in place.
func rangeOf(v []float64) Range {
	if len(v) == 0 {
		return Range{}
	}
	slices.Sort(v)
	return Range{Median: Percentile(v, 50), Min: v[0], Max: v[len(v)-1]}
}

// Quantiles is a Range for each of a latency's percentiles.
type Quantiles struct {
	P50 Range `json:"p50"`
	P90 Range `json:"p90"`
	P99 Range `json:"p99"`
}

// Spread is one policy at one concurrency level over several seeds (the
// runs of --runs N): each latency percentile's median and range across the
// seeds, and the same for its ratio to round_robin's percentile at the same
// level and seed, so that a claim is never one seed's luck. The ratios are
// nil without a round_robin run for every seed of the level.
type Spread struct {
	Policy   string   `json:"policy"`
	Sessions int      `json:"sessions"`
	Seeds    []uint64 `json:"seeds"`
	Errors   Range    `json:"errors"`
	// CompactionsPerSession is RunSummary.CompactionsPerSession across
	// the seeds.
	CompactionsPerSession Range `json:"compactions_per_session"`
	// Finished is the share of the sessions started that finished (see
	// RunSummary.StartedSessions), 0 to 1; nil when no run started one.
	Finished         *Range     `json:"finished_share,omitempty"`
	TTFT             Quantiles  `json:"ttft_ms"`
	SlowestTurnTTFT  Quantiles  `json:"slowest_turn_ttft_ms"`
	Session          Quantiles  `json:"session_ms"`
	TTFTRatio        *Quantiles `json:"ttft_vs_round_robin,omitempty"`
	SlowestTurnRatio *Quantiles `json:"slowest_turn_ttft_vs_round_robin,omitempty"`
	SessionRatio     *Quantiles `json:"session_vs_round_robin,omitempty"`
}

// Spreads groups runs of several seeds by concurrency level and policy
// (in level order, policies in the order given) and summarises each group.
func Spreads(runs []RunSummary) []Spread {
	type key struct {
		sessions int
		policy   string
	}
	groups := make(map[key][]RunSummary)
	var keys []key
	baseline := make(map[int]map[uint64]RunSummary)
	for _, r := range sortedRuns(runs) {
		k := key{r.Sessions, r.Policy}
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
		if r.Policy == RoundRobin {
			if baseline[r.Sessions] == nil {
				baseline[r.Sessions] = make(map[uint64]RunSummary)
			}
			baseline[r.Sessions][r.Seed] = r
		}
	}
	quantiles := func(rs []RunSummary, of func(RunSummary) Latency, base func(RunSummary) (RunSummary, bool)) (Quantiles, bool) {
		var v [3][]float64
		for _, r := range rs {
			l := of(r)
			vals := [3]float64{l.P50, l.P90, l.P99}
			if base != nil {
				b, ok := base(r)
				if !ok {
					return Quantiles{}, false
				}
				bl := of(b)
				for i, d := range [3]float64{bl.P50, bl.P90, bl.P99} {
					if !(d > 0) {
						return Quantiles{}, false
					}
					vals[i] /= d
				}
			}
			for i := range vals {
				v[i] = append(v[i], vals[i])
			}
		}
		return Quantiles{P50: rangeOf(v[0]), P90: rangeOf(v[1]), P99: rangeOf(v[2])}, true
	}
	metrics := []func(RunSummary) Latency{
		func(r RunSummary) Latency { return r.TTFT },
		func(r RunSummary) Latency { return r.SlowestTurnTTFT },
		func(r RunSummary) Latency { return r.Session },
	}
	out := make([]Spread, 0, len(keys))
	for _, k := range keys {
		rs := groups[k]
		s := Spread{Policy: k.policy, Sessions: k.sessions}
		var errs, compactions, finished []float64
		for _, r := range rs {
			s.Seeds = append(s.Seeds, r.Seed)
			errs = append(errs, float64(r.Errors))
			compactions = append(compactions, r.CompactionsPerSession)
			if r.StartedSessions > 0 {
				finished = append(finished, float64(r.FinishedSessions)/float64(r.StartedSessions))
			}
		}
		s.Errors = rangeOf(errs)
		s.CompactionsPerSession = rangeOf(compactions)
		if len(finished) > 0 {
			f := rangeOf(finished)
			s.Finished = &f
		}
		base := func(r RunSummary) (RunSummary, bool) {
			b, ok := baseline[r.Sessions][r.Seed]
			return b, ok
		}
		abs := [3]*Quantiles{&s.TTFT, &s.SlowestTurnTTFT, &s.Session}
		ratios := [3]**Quantiles{&s.TTFTRatio, &s.SlowestTurnRatio, &s.SessionRatio}
		for i, of := range metrics {
			*abs[i], _ = quantiles(rs, of, nil)
			if q, ok := quantiles(rs, of, base); ok {
				*ratios[i] = &q
			}
		}
		out = append(out, s)
	}
	return out
}

// WriteSpreadTable writes spreads as an aligned text table: per level and
// policy, the median across seeds of errors, compactions per session, the
// share of sessions finished, and TTFT and session task time at p50,
// p90 and p99, each followed by the min-max of its ratio to round_robin's
// at the same level and seed ("-" without one).
func WriteSpreadTable(w io.Writer, spreads []Spread) error {
	bw := bufio.NewWriter(w)
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "sessions\tpolicy\tseeds\terrors\tcompact/s\tdone\tttft p50\tvs rr\tttft p90\tvs rr\tttft p99\tvs rr\t"+
		"task p50\tvs rr\ttask p90\tvs rr\ttask p99\tvs rr\t")
	ratio := func(q *Quantiles, pick func(Quantiles) Range) string {
		if q == nil {
			return "-"
		}
		r := pick(*q)
		return fmt.Sprintf("%.2f-%.2fx", r.Min, r.Max)
	}
	picks := []func(Quantiles) Range{
		func(q Quantiles) Range { return q.P50 }, func(q Quantiles) Range { return q.P90 }, func(q Quantiles) Range { return q.P99 },
	}
	for _, s := range spreads {
		done := "-"
		if f := s.Finished; f != nil {
			done = rangeCell(Range{Median: 100 * f.Median, Min: 100 * f.Min, Max: 100 * f.Max}, "%.0f%%")
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t", s.Sessions, s.Policy, len(s.Seeds), rangeCell(s.Errors, "%.0f"),
			rangeCell(s.CompactionsPerSession, "%.2f"), done)
		for _, pick := range picks {
			fmt.Fprintf(tw, "%.1f\t%s\t", pick(s.TTFT).Median, ratio(s.TTFTRatio, pick))
		}
		for _, pick := range picks {
			fmt.Fprintf(tw, "%.1f\t%s\t", pick(s.Session).Median/1000, ratio(s.SessionRatio, pick))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("bench: write table: %w", err)
	}
	fmt.Fprintln(bw, "medians across seeds; ttft in ms, task times in s; vs rr: min-max across seeds of the ratio to round_robin's at the same sessions and seed;")
	fmt.Fprintln(bw, "errors, compact/s (compactions per session started), done (share of the sessions started that finished): median (min-max) across seeds; every seed's figures are in --json")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("bench: write table: %w", err)
	}
	return nil
}

// rangeCell shows a Range as "median" when it does not vary, otherwise
// "median (min-max)".
func rangeCell(r Range, format string) string {
	med := fmt.Sprintf(format, r.Median)
	if r.Min == r.Max {
		return med
	}
	return med + " (" + fmt.Sprintf(format, r.Min) + "-" + fmt.Sprintf(format, r.Max) + ")"
}
