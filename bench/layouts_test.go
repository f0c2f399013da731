package bench

import (
	"bytes"
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/catalog"
)

// codexEvaluations holds, by size, the evaluation of the codex preset's
// layouts on one RTX 4090 at two sessions (a YaRN layout among them): the
// simulation is deterministic, so the tests share one of each size.
var codexEvaluations = struct {
	sync.Mutex
	bySize map[EvaluationSize]LayoutEvaluation
}{bySize: map[EvaluationSize]LayoutEvaluation{}}

func evaluateCodex(t *testing.T, size EvaluationSize) LayoutEvaluation {
	t.Helper()
	codexEvaluations.Lock()
	defer codexEvaluations.Unlock()
	if ev, ok := codexEvaluations.bySize[size]; ok {
		return ev
	}
	board, _ := catalog.LookupGPU("rtx4090")
	gpus := []catalog.GPUUse{{GPU: board}}
	model, err := catalog.DefaultModel(gpus)
	if err != nil {
		t.Fatal(err)
	}
	preset, err := PresetByName("codex")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := EvaluateLayouts(context.Background(), catalog.AgentCandidates(gpus, model), []string{"rtx4090"}, preset, 2, 1, size)
	if err != nil {
		t.Fatal(err)
	}
	codexEvaluations.bySize[size] = ev
	return ev
}

// propertiesEvaluation is the evaluation the tests of what holds for any
// evaluation take: the full one, which the golden test makes anyway, or
// under the race detector, which slows the simulation down ten times, one
// of a single workload and round (the same goroutines, a ninth of the
// work).
func propertiesEvaluation(t *testing.T) LayoutEvaluation {
	if raceEnabled {
		return evaluateCodex(t, EvaluationSize{Seeds: 1, Rounds: 1})
	}
	return evaluateCodex(t, FullEvaluation)
}

func TestWriteLayoutTableGolden(t *testing.T) {
	if raceEnabled {
		t.Skip("skipping: the full evaluation takes minutes under the race detector; this golden is checked without -race")
	}
	var b bytes.Buffer
	if err := WriteLayoutTable(&b, evaluateCodex(t, FullEvaluation)); err != nil {
		t.Fatal(err)
	}
	golden(t, "layouts-codex-1x4090.golden", b.Bytes())
}

func TestEvaluateLayoutsRecommendsTheBest(t *testing.T) {
	ev := propertiesEvaluation(t)
	if len(ev.Layouts) < 2 {
		t.Fatalf("evaluated %d layouts, want several to choose from", len(ev.Layouts))
	}
	best := ev.Recommended()
	if best.Summary.FinishedSessions == 0 {
		t.Fatalf("recommended %s, which finished no session", best.Candidate.Layout)
	}
	for _, r := range ev.Layouts {
		if r.Summary.FinishedSessions > 0 && best.Summary.Session.P50 > 1.05*r.Summary.Session.P50 {
			t.Errorf("recommended %s with task time p50 %.0f ms, more than 5%% above %s's %.0f ms",
				best.Candidate.Layout, best.Summary.Session.P50, r.Candidate.Layout, r.Summary.Session.P50)
		}
	}
}

func TestEvaluateLayoutsRunsTheSameSessionsToTheirEnd(t *testing.T) {
	ev := propertiesEvaluation(t)
	if want := ev.Size.Seeds * ev.Size.Rounds * 2; ev.TotalSessions != want {
		t.Fatalf("TotalSessions = %d, want %d seeds of %d rounds of 2 sessions", ev.TotalSessions, ev.Size.Seeds, ev.Size.Rounds)
	}
	for _, r := range ev.Layouts {
		s := r.Summary
		// The preset compacts instead of failing, so every session of the
		// closed set must reach its last turn, on every layout alike.
		if s.StartedSessions != ev.TotalSessions || s.FinishedSessions != ev.TotalSessions || s.Errors != 0 {
			t.Errorf("%s: started %d, finished %d sessions with %d errors, want all %d started and finished",
				r.Candidate.Layout, s.StartedSessions, s.FinishedSessions, s.Errors, ev.TotalSessions)
		}
	}
}

// TestLayoutResultPoolsTheSeeds holds the figures of a layout to those of
// its runs one after another: the seeds' sessions, which share names, stay
// apart, and no run's time overlaps another's.
func TestLayoutResultPoolsTheSeeds(t *testing.T) {
	seedRun := func(taskS int) *SimRun {
		end := time.Duration(taskS) * time.Second
		return &SimRun{Results: []Result{
			{Session: "s0", Turn: 0, Sent: 0, FirstToken: time.Second, Done: 2 * time.Second, OutputTokens: 100},
			{Session: "s0", Turn: 1, Last: true, Sent: end - 2*time.Second, FirstToken: end - time.Second, Done: end, OutputTokens: 100},
		}}
	}
	r := layoutResult(catalog.Candidate{}, 4096, 1, 7, []*SimRun{seedRun(10), seedRun(30), seedRun(20)})
	s := r.Summary
	if s.StartedSessions != 3 || s.FinishedSessions != 3 {
		t.Fatalf("started %d, finished %d sessions, want the 3 seeds' one each", s.StartedSessions, s.FinishedSessions)
	}
	if s.Session.P50 != 20_000 {
		t.Errorf("task time p50 %.0f ms, want 20000 (the middle seed's session)", s.Session.P50)
	}
	if want := 600.0 / 60; math.Abs(s.OutputTokS-want) > 0.01 {
		t.Errorf("output %.2f tok/s, want %.2f: 600 tokens over the 60 s of the three runs one after another", s.OutputTokS, want)
	}
	if s.Seed != 7 || r.MaxModelLen != 4096 {
		t.Errorf("seed %d, context %d, want 7 and 4096", s.Seed, r.MaxModelLen)
	}
}

// TestDefaultAgentLayoutIsTheEvaluated: the layout hearth up serves by
// rule (catalog.DefaultAgentLayout) is the one the evaluation recommends
// for the same client and GPUs.
func TestDefaultAgentLayoutIsTheEvaluated(t *testing.T) {
	ev := propertiesEvaluation(t)
	board, _ := catalog.LookupGPU("rtx4090")
	gpus := []catalog.GPUUse{{GPU: board}}
	model, err := catalog.DefaultModel(gpus)
	if err != nil {
		t.Fatal(err)
	}
	choice, err := catalog.DefaultAgentLayout(gpus, model, "codex")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := choice.Candidate.Layout, ev.Recommended().Candidate.Layout; got != want {
		t.Errorf("the rule serves %s, the evaluation recommends %s (%s)", got, want, ev.Reason)
	}
}
