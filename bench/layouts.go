package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
	"golang.org/x/sync/errgroup"
)

// LayoutEvaluation is the outcome of EvaluateLayouts: every candidate
// layout run on one client's workload, and the one the planner recommends
// (catalog.RecommendLayout).
type LayoutEvaluation struct {
	Preset   string
	Sessions int
	// TotalSessions is the closed set of sessions every layout ran:
	// Size.Rounds × Sessions on each of the workloads of seeds Seed to
	// Seed+Size.Seeds-1, the same sessions on every layout.
	TotalSessions int
	Seed          uint64
	Size          EvaluationSize
	Layouts       []LayoutResult
	// Best indexes Layouts: the recommended layout. Reason says in one
	// line why.
	Best   int
	Reason string
}

// Recommended is the recommended layout's result.
func (e LayoutEvaluation) Recommended() LayoutResult { return e.Layouts[e.Best] }

// LayoutResult is one candidate layout as the simulation measured it.
type LayoutResult struct {
	Candidate catalog.Candidate
	// MaxModelLen is the engines' context.
	MaxModelLen int
	// PeakContext is the longest context (prompt plus output) a request of
	// the run reached; SessionsFit is how many sessions of that context the
	// engines' KV caches hold at once, summed over the engines.
	PeakContext int
	SessionsFit int
	Summary     RunSummary
}

// EvaluationPolicy is the routing policy the layouts are measured under:
// the one hearth up serves with by default.
const EvaluationPolicy = router.PolicyHearth

// EvaluationRounds is how many sessions each of the concurrent sessions
// of a layout evaluation runs one after another: every candidate serves
// the same closed set of EvaluationRounds × sessions sessions (the
// workload's first ones, the same loop turns on every layout, only the
// compactions as each layout's context asks for them) to their end,
// instead of what a fixed span lets it finish. A span would compare
// layouts on different sessions and favour a slow layout, whose task time
// would be over the few short sessions it finished in time.
const EvaluationRounds = 5

// EvaluationSeeds is how many workloads (seeds seed, seed+1, …) each
// layout serves; its figures are over all of them together. The best
// layouts are often within a few percent of each other, less than one
// workload's task time p50 moves from seed to seed, so a recommendation
// from one workload would be another workload's second best by up to 17%
// (docs/perf-history.md); three make it a few percent at most.
const EvaluationSeeds = 3

// EvaluationSize is how much of a client's workload EvaluateLayouts runs
// on each layout: Seeds workloads, each of Rounds × sessions sessions.
type EvaluationSize struct {
	Seeds, Rounds int
}

// FullEvaluation is the size hearth plan --agent and hearth up --agent
// recommend from (the reasons are at EvaluationRounds and
// EvaluationSeeds). A smaller one is for tests of the wiring around an
// evaluation: its recommendation is less sure, and it is cheaper.
var FullEvaluation = EvaluationSize{Seeds: EvaluationSeeds, Rounds: EvaluationRounds}

// EvaluateLayouts runs preset's workload at sessions concurrent sessions
// on each candidate, on the GPU kinds gpus (one per GPU of the node, as
// runtime/sim names them), with size.Seeds seeds from seed, each until
// its closed set of size.Rounds × sessions sessions has ended, and
// recommends a layout by catalog.RecommendLayout (the lowest task time p50
// over all those sessions, fewer unfinished sessions first). The runs are
// independent and go on at
// once, as many as GOMAXPROCS; the simulation is deterministic, so the same
// arguments give the same evaluation.
func EvaluateLayouts(ctx context.Context, candidates []catalog.Candidate, gpus []string, preset Preset, sessions int, seed uint64, size EvaluationSize) (LayoutEvaluation, error) {
	total := size.Rounds * sessions
	ev := LayoutEvaluation{Preset: preset.Name, Sessions: sessions, TotalSessions: size.Seeds * total, Seed: seed, Size: size, Best: -1}
	if len(candidates) == 0 {
		return ev, fmt.Errorf("bench: evaluate layouts: no candidate layout fits the GPUs")
	}
	if size.Seeds < 1 || size.Rounds < 1 {
		return ev, fmt.Errorf("bench: evaluate layouts: %d seeds of %d rounds: want at least one of each", size.Seeds, size.Rounds)
	}
	// The closed set replaces the preset's span: every session runs to its
	// last turn.
	preset.Agentic.TotalSessions, preset.Agentic.Duration = total, 0
	runs := make([][]*SimRun, len(candidates))
	maxLens := make([]int, len(candidates))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, c := range candidates {
		runs[i] = make([]*SimRun, size.Seeds)
		for k := range size.Seeds {
			g.Go(func() error {
				run, maxLen, err := runLayout(gctx, c, gpus, preset, sessions, seed+uint64(k))
				runs[i][k] = run
				if k == 0 { // every seed's engines have the same context
					maxLens[i] = maxLen
				}
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		return ev, err
	}
	for i, c := range candidates {
		ev.Layouts = append(ev.Layouts, layoutResult(c, maxLens[i], sessions, seed, runs[i]))
	}
	ev.Best, ev.Reason = catalog.RecommendLayout(ev.Measures())
	return ev, nil
}

// Measures are the evaluation's layouts as the planner weighs them
// (catalog.RecommendLayout).
func (e LayoutEvaluation) Measures() []catalog.LayoutMeasure {
	ms := make([]catalog.LayoutMeasure, len(e.Layouts))
	for i, r := range e.Layouts {
		ms[i] = catalog.LayoutMeasure{
			Layout: r.Candidate.Layout, Sessions: e.TotalSessions, FinishedSessions: r.Summary.FinishedSessions,
			TaskP50: r.Summary.Session.P50, CompactionsPerSession: r.Summary.CompactionsPerSession,
		}
	}
	return ms
}

// LayoutEvaluator evaluates layouts for the planner: each candidate runs
// a client preset's workload in the simulation, as EvaluateLayouts runs
// it, an evaluation of Size (zero: FullEvaluation).
type LayoutEvaluator struct {
	Size EvaluationSize
}

var _ catalog.LayoutEvaluator = LayoutEvaluator{}

// Evaluate evaluates the layouts of req.Model that fit req.GPUs
// (catalog.AgentCandidates) on the workload of req.Client's preset: what
// hearth plan --agent prints.
func (e LayoutEvaluator) Evaluate(ctx context.Context, req catalog.AgentLayoutRequest) (LayoutEvaluation, error) {
	return e.evaluate(ctx, req, catalog.AgentCandidates(req.GPUs, req.Model))
}

// MeasureLayouts is the catalog.LayoutEvaluator that hearth up --agent
// asks.
func (e LayoutEvaluator) MeasureLayouts(ctx context.Context, req catalog.AgentLayoutRequest, candidates []catalog.Candidate) ([]catalog.LayoutMeasure, error) {
	ev, err := e.evaluate(ctx, req, candidates)
	if err != nil {
		return nil, err
	}
	return ev.Measures(), nil
}

func (e LayoutEvaluator) evaluate(ctx context.Context, req catalog.AgentLayoutRequest, candidates []catalog.Candidate) (LayoutEvaluation, error) {
	preset, err := PresetByName(req.Client)
	if err != nil {
		return LayoutEvaluation{}, err
	}
	kinds := make([]string, len(req.GPUs))
	for i, u := range req.GPUs {
		kinds[i] = u.GPU.Kind
	}
	size := e.Size
	if size == (EvaluationSize{}) {
		size = FullEvaluation
	}
	return EvaluateLayouts(ctx, candidates, kinds, preset, req.Sessions, req.Seed, size)
}

// runLayout runs one candidate on one seed's workload; it returns the run
// and the engines' context.
func runLayout(ctx context.Context, c catalog.Candidate, gpus []string, preset Preset, sessions int, seed uint64) (*SimRun, int, error) {
	engine := sim.Config{TP: c.Layout.TPSize(), KVCacheDtype: c.Layout.KVCacheDtypeOrAuto(), MaxModelLen: c.Plan.MaxModelLen,
		MaxNumBatchedTokens: c.Layout.MaxBatchedTokens}
	if c.Layout.RopeScaling {
		engine.ModelOverrides = c.Model.RopeScalingJSON()
	}
	s, err := NewSim(SimConfig{GPUs: gpus, Model: c.Model.Name, Engine: engine, Seed: int64(seed)})
	if err != nil {
		return nil, 0, fmt.Errorf("bench: evaluate layout %s: %w", c.Layout, err)
	}
	maxLen := s.MaxModelLen()
	w, err := preset.Workload(seed, sessions, maxLen)
	if err != nil {
		return nil, 0, fmt.Errorf("bench: evaluate layout %s: %w", c.Layout, err)
	}
	run, err := s.Run(ctx, w, EvaluationPolicy, sessions, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("bench: evaluate layout %s, seed %d: %w", c.Layout, seed, err)
	}
	return run, maxLen, nil
}

// layoutResult measures one candidate over its runs taken together, as
// if they had run one after another: each run's times move past the
// previous run's last, and its sessions are told apart by their seed.
func layoutResult(c catalog.Candidate, maxModelLen, sessions int, seed uint64, runs []*SimRun) LayoutResult {
	r := LayoutResult{Candidate: c, MaxModelLen: maxModelLen}
	var all []Result
	var offset time.Duration
	for k, run := range runs {
		end := offset
		for _, res := range run.Results {
			res.Session = fmt.Sprintf("seed%d-%s", k, res.Session)
			res.Sent, res.FirstToken, res.Done = res.Sent+offset, res.FirstToken+offset, res.Done+offset
			end = max(end, res.Done)
			all = append(all, res)
			if res.Err == nil {
				r.PeakContext = max(r.PeakContext, res.PromptTokens+res.OutputTokens)
			}
		}
		offset = end
	}
	r.Summary = Summarize(EvaluationPolicy, sessions, all)
	r.Summary.Seed = seed
	if r.PeakContext > 0 {
		for _, e := range runs[0].Engines {
			r.SessionsFit += e.NumGPUBlocks * tokenizer.DefaultBlockSize / r.PeakContext
		}
	}
	return r
}

// LayoutReport is an evaluation as `hearth plan --agent --json` prints
// it: every candidate layout as the simulation measured it and the
// recommendation. Field names are stable.
type LayoutReport struct {
	Model    string `json:"model"`
	Repo     string `json:"repo"`
	Agent    string `json:"agent"`
	Sessions int    `json:"sessions"`
	// TotalSessions is the closed set of sessions every layout ran to their
	// end: the evaluation's rounds × Sessions on each of the Seeds workloads
	// from seed Seed.
	TotalSessions int               `json:"total_sessions"`
	Seed          uint64            `json:"seed"`
	Seeds         int               `json:"seeds"`
	Policy        string            `json:"policy"`
	Layouts       []LayoutReportRow `json:"layouts"`
	Recommended   string            `json:"recommended"`
	Reason        string            `json:"reason"`
}

// LayoutReportRow is one layout of a LayoutReport: times in ms, task time
// (a finished session's first request to its last token; 0 when none
// finished) in s.
type LayoutReportRow struct {
	Layout                string  `json:"layout"`
	TP                    int     `json:"tp"`
	KVCacheDtype          string  `json:"kv_cache_dtype"`
	RopeScaling           bool    `json:"rope_scaling"`
	Engines               int     `json:"engines"`
	MaxModelLen           int     `json:"max_model_len"`
	PeakContext           int     `json:"peak_context"`
	SessionsFit           int     `json:"sessions_fit"`
	TTFTP50Ms             float64 `json:"ttft_p50_ms"`
	TTFTP90Ms             float64 `json:"ttft_p90_ms"`
	TTFTP99Ms             float64 `json:"ttft_p99_ms"`
	TaskP50S              float64 `json:"task_p50_s"`
	CompactionsPerSession float64 `json:"compactions_per_session"`
	Errors                int     `json:"errors"`
	StartedSessions       int     `json:"started_sessions"`
	FinishedSessions      int     `json:"finished_sessions"`
	OutputTokS            float64 `json:"output_tok_s"`
	Recommended           bool    `json:"recommended"`
}

// Report is the evaluation's report, for model.
func (ev LayoutEvaluation) Report(model catalog.Model) LayoutReport {
	out := LayoutReport{Model: model.Name, Repo: model.Repo, Agent: ev.Preset, Sessions: ev.Sessions, TotalSessions: ev.TotalSessions, Seed: ev.Seed, Seeds: ev.Size.Seeds,
		Policy: EvaluationPolicy, Recommended: ev.Recommended().Candidate.Layout.String(), Reason: ev.Reason}
	for i, r := range ev.Layouts {
		l, s := r.Candidate.Layout, r.Summary
		task := 0.0
		if s.FinishedSessions > 0 {
			task = math.Round(s.Session.P50) / 1000
		}
		out.Layouts = append(out.Layouts, LayoutReportRow{
			Layout: l.String(), TP: l.TPSize(), KVCacheDtype: l.KVCacheDtypeOrAuto(), RopeScaling: l.RopeScaling,
			Engines: len(r.Candidate.Plan.Engines), MaxModelLen: r.MaxModelLen, PeakContext: r.PeakContext, SessionsFit: r.SessionsFit,
			TTFTP50Ms: round1(s.TTFT.P50), TTFTP90Ms: round1(s.TTFT.P90), TTFTP99Ms: round1(s.TTFT.P99), TaskP50S: task,
			CompactionsPerSession: math.Round(s.CompactionsPerSession*1000) / 1000, Errors: s.Errors,
			StartedSessions: s.StartedSessions, FinishedSessions: s.FinishedSessions, OutputTokS: round1(s.OutputTokS),
			Recommended: i == ev.Best,
		})
	}
	return out
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// WriteLayoutTable prints one row per evaluated layout and the
// recommendation: context in tokens, sessions whose peak context the KV
// caches hold at once, TTFT of turns in ms, task time in s, compactions per
// session and output tokens per second.
func WriteLayoutTable(w io.Writer, ev LayoutEvaluation) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s, %d sessions at once, %d in all over seeds %d-%d, policy %s:\n",
		ev.Preset, ev.Sessions, ev.TotalSessions, ev.Seed, ev.Seed+uint64(ev.Size.Seeds)-1, EvaluationPolicy)
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "layout\tengines\tcontext\tsessions fit\tttft p50\tttft p90\ttask p50\tcompact/s\terrors\tdone\tout tok/s\t")
	for i, r := range ev.Layouts {
		mark := ""
		if i == ev.Best {
			mark = "* "
		}
		task := "-"
		if r.Summary.FinishedSessions > 0 {
			task = fmt.Sprintf("%.1f", r.Summary.Session.P50/1000)
		}
		fmt.Fprintf(tw, "%s%s\t%d\t%d\t%d\t%.1f\t%.1f\t%s\t%.2f\t%s\t%d/%d\t%.1f\t\n",
			mark, r.Candidate.Layout, len(r.Candidate.Plan.Engines), r.MaxModelLen, r.SessionsFit,
			r.Summary.TTFT.P50, r.Summary.TTFT.P90, task, r.Summary.CompactionsPerSession,
			errorsCell(r.Summary), r.Summary.FinishedSessions, r.Summary.StartedSessions, r.Summary.OutputTokS)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("bench: write layout table: %w", err)
	}
	fmt.Fprintln(bw, "every layout runs the same sessions to their end, the figures over all seeds; context in tokens; sessions fit: sessions at the run's longest context the KV caches hold at once; ttft of turns in ms; task: a session's first request to its last token, in s, p50 over the sessions finished; compact/s: compactions per session; done: sessions finished of those run (the others ended in an error)")
	fmt.Fprintf(bw, "recommended: %s\n", ev.Reason)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("bench: write layout table: %w", err)
	}
	return nil
}

// EvaluateCandidates evaluates the given candidates, a subset of
// catalog.AgentCandidates chosen by the caller (the layouts a cluster of
// rigs can serve), on the workload of req.Client's preset.
func (e LayoutEvaluator) EvaluateCandidates(ctx context.Context, req catalog.AgentLayoutRequest, candidates []catalog.Candidate) (LayoutEvaluation, error) {
	return e.evaluate(ctx, req, candidates)
}
