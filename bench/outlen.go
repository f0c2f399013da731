package bench

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/hearth-llm/hearth/router/osl"
)

// OutputLengthError is how far the output-length estimates of a run were
// from the answers: the relative error |predicted − actual| / actual of
// every request that had an estimate, and of those made after their
// session's first osl.WarmTurns turns ("warm").
type OutputLengthError struct {
	N       int     `json:"n"`
	P50     float64 `json:"p50"`
	P90     float64 `json:"p90"`
	WarmN   int     `json:"warm_n"`
	WarmP50 float64 `json:"warm_p50"`
	WarmP90 float64 `json:"warm_p90"`
}

// summarizeOutputLength measures the estimates of results; nil when none
// had one.
func summarizeOutputLength(results []Result) *OutputLengthError {
	var all, warm []float64
	for i := range results {
		r := &results[i]
		if r.Err != nil || r.PredictedOutputTokens <= 0 || r.OutputTokens <= 0 {
			continue
		}
		rel := float64(r.PredictedOutputTokens-r.OutputTokens) / float64(r.OutputTokens)
		rel = max(rel, -rel)
		all = append(all, rel)
		if r.PredictionWarm {
			warm = append(warm, rel)
		}
	}
	if len(all) == 0 {
		return nil
	}
	e := &OutputLengthError{N: len(all), WarmN: len(warm)}
	slices.Sort(all)
	slices.Sort(warm)
	e.P50, e.P90 = Percentile(all, 50), Percentile(all, 90)
	e.WarmP50, e.WarmP90 = Percentile(warm, 50), Percentile(warm, 90)
	return e
}

// writeOutputLengthErrors writes a line per run that had output-length
// estimates, after a table.
func writeOutputLengthErrors(w io.Writer, runs []RunSummary) {
	for _, r := range sortedRuns(runs) {
		e := r.OutputLength
		if e == nil {
			continue
		}
		fmt.Fprintf(w, "output length estimate, %s at %d sessions: error p50 %.0f%% p90 %.0f%% (%d requests)", r.Policy, r.Sessions, 100*e.P50, 100*e.P90, e.N)
		if e.WarmN > 0 {
			fmt.Fprintf(w, "; after each session's first %d turns p50 %.0f%% p90 %.0f%% (%d)", osl.WarmTurns, 100*e.WarmP50, 100*e.WarmP90, e.WarmN)
		}
		fmt.Fprintln(w)
	}
}

// OSLHeader is the reply header in which a Hearth gateway says the output
// length it routed a request with: "183; source=session; kind=tool_call;
// turns=4", or "300; source=client" for the client's own hint.
const OSLHeader = "x-hearth-osl"

// parseOSLHeader reads an OSLHeader value: the expected tokens and the
// session's turns the estimate learned from (0 when it does not say). ok
// is false for an empty or malformed value.
func parseOSLHeader(v string) (tokens, turns int, ok bool) {
	head, rest, _ := strings.Cut(v, ";")
	tokens, err := strconv.Atoi(strings.TrimSpace(head))
	if err != nil || tokens <= 0 {
		return 0, 0, false
	}
	for rest != "" {
		var field string
		field, rest, _ = strings.Cut(rest, ";")
		if k, val, found := strings.Cut(strings.TrimSpace(field), "="); found && k == "turns" {
			if n, err := strconv.Atoi(val); err == nil && n >= 0 {
				turns = n
			}
		}
	}
	return tokens, turns, true
}

// oslCall is what the gateway sees of req before its answer: a side
// request apart (the parent's session, as a client sends it), a Codex
// compaction as the side request Codex names it, a turn after a tool
// result or after the user's message.
func oslCall(client string, req *Request) osl.Call {
	c := osl.Call{Client: client, Session: req.Session}
	if req.Side || req.Compaction && client == "codex" {
		c.Side = true
		if i := strings.LastIndexByte(req.Session, '.'); i > 0 && req.Side {
			c.Session = req.Session[:i]
		}
		return c
	}
	if n := len(req.Segments); n > 0 {
		c.AfterTool = req.Segments[n-1].Role == RoleTool
	}
	return c
}

// oslKind is the kind req's answer is: a session's last turn and a
// summary are final answers, the other turns call tools.
func oslKind(req *Request) osl.Kind {
	switch {
	case req.Side:
		return osl.Side
	case req.Last || req.Compaction:
		return osl.Final
	}
	return osl.ToolCall
}

// writeOutputLengthSpread writes, per policy and concurrency level of runs
// over several seeds, the range across seeds of the estimates' error.
func writeOutputLengthSpread(w io.Writer, runs []RunSummary) {
	type cell struct {
		policy   string
		sessions int
	}
	var order []cell
	byCell := map[cell][]*OutputLengthError{}
	for _, r := range sortedRuns(runs) {
		if r.OutputLength == nil {
			continue
		}
		k := cell{r.Policy, r.Sessions}
		if byCell[k] == nil {
			order = append(order, k)
		}
		byCell[k] = append(byCell[k], r.OutputLength)
	}
	for _, k := range order {
		es := byCell[k]
		lo, hi := *es[0], *es[0]
		for _, e := range es[1:] {
			lo.P50, hi.P50 = min(lo.P50, e.P50), max(hi.P50, e.P50)
			lo.P90, hi.P90 = min(lo.P90, e.P90), max(hi.P90, e.P90)
			lo.WarmP50, hi.WarmP50 = min(lo.WarmP50, e.WarmP50), max(hi.WarmP50, e.WarmP50)
			lo.WarmP90, hi.WarmP90 = min(lo.WarmP90, e.WarmP90), max(hi.WarmP90, e.WarmP90)
		}
		fmt.Fprintf(w, "output length estimate, %s at %d sessions, %d seeds: error p50 %.0f-%.0f%% p90 %.0f-%.0f%%; after each session's first %d turns p50 %.0f-%.0f%% p90 %.0f-%.0f%%\n",
			k.policy, k.sessions, len(es), 100*lo.P50, 100*hi.P50, 100*lo.P90, 100*hi.P90,
			osl.WarmTurns, 100*lo.WarmP50, 100*hi.WarmP50, 100*lo.WarmP90, 100*hi.WarmP90)
	}
}
