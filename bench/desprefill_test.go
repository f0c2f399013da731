package bench

import (
	"context"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// scriptSessions is scriptWorkload with session ids passed to the router,
// as an agentic workload's are.
type scriptSessions struct{ d *scriptDriver }

func (w scriptSessions) Kind() string      { return "agentic" }
func (w scriptSessions) NewDriver() Driver { return w.d }

func tokensOf(seed uint64, n int) []uint32 {
	p := make([]uint32, n)
	fillTokens(p, NewRand(seed))
	return p
}

// pauseTurns are a session's turn that ends in a tool call, due at 0, and
// its next turn, due at next: the first prompt, the answer, a tool result.
func pauseTurns(session string, prompt, answer, result int, next time.Duration) (first, second *Request) {
	toks := tokensOf(7, prompt+answer+result)
	n, end := prompt, prompt+answer
	first = &Request{
		Session: session, Turn: 0, Prompt: toks[:n:n], OutputTokens: answer, Answer: toks[n:end:end],
		Segments: []Segment{{Role: RoleUser, Start: 0, End: n}},
	}
	second = &Request{
		Session: session, Turn: 1, Due: next, Prompt: toks, OutputTokens: 4, Answer: tokensOf(8, 4), Last: true,
		Segments: []Segment{{Role: RoleUser, Start: 0, End: n}, {Role: RoleAssistant, Start: n, End: end},
			{Role: RoleTool, Start: end, End: len(toks)}},
	}
	return first, second
}

func runScript(t *testing.T, cfg SimConfig, reqs []*Request) (*des, *SimRun) {
	t.Helper()
	s := newTestSim(t, cfg)
	d := runDES(t, s, scriptSessions{&scriptDriver{reqs: reqs}}, router.PolicyHearth)
	return d, d.result(router.PolicyHearth, 2)
}

// TestToolPausePrefillRestoresEvictedContext: session a's answer ends in
// a tool call while b's long prompt waits for the engine's blocks; b runs
// first (a turn goes before background work) and evicts most of a's
// context. The prefill in the pause then computes it again, so that a's
// next turn finds its prompt before the tool result cached; without it
// the turn computes it.
func TestToolPausePrefillRestoresEvictedContext(t *testing.T) {
	cfg := SimConfig{
		GPUs:            []string{"rtx4090"},
		Engine:          sim.Config{NumGPUBlocks: 200},
		KVOffloadingGiB: -1, // what the GPU evicts is gone
	}
	for _, tc := range []struct {
		hints      bool
		wantShare  float64 // at least
		wantAtMost float64
	}{
		{hints: true, wantShare: 0.99, wantAtMost: 1},
		{hints: false, wantShare: 0, wantAtMost: 0.5}, // the scenario evicts
	} {
		cfg.InferHints = tc.hints
		a0, a1 := pauseTurns("a", 1600, 16, 160, 20*time.Second)
		b := &Request{Session: "b", Due: time.Millisecond, Prompt: tokensOf(9, 2800), OutputTokens: 8, Answer: tokensOf(10, 8), Last: true}
		d, run := runScript(t, cfg, []*Request{a0, b, a1})
		var got *Result
		for i := range run.Results {
			if run.Results[i].Session == "a" && run.Results[i].Turn == 1 {
				got = &run.Results[i]
			}
		}
		if got == nil || got.Err != nil {
			t.Fatalf("hints %v: a's second turn %+v", tc.hints, got)
		}
		share := float64(got.CachedTokens) / float64(got.PauseContextTokens)
		t.Logf("hints %v: a's second turn found %d of %d tokens before the tool result cached (%.1f%%); prefills %+v",
			tc.hints, got.CachedTokens, got.PauseContextTokens, 100*share, d.prefilled)
		if share < tc.wantShare || share > tc.wantAtMost {
			t.Errorf("hints %v: cached share %.3f, want within [%.2f, %.2f]", tc.hints, share, tc.wantShare, tc.wantAtMost)
		}
		if run.Summary.PauseCachedShare != share {
			t.Errorf("hints %v: summary's pause cached share %v, want %v", tc.hints, run.Summary.PauseCachedShare, share)
		}
		if run.Summary.Requests != 3 || run.Summary.Errors != 0 {
			t.Errorf("hints %v: %d requests, %d errors; want the 3 of the script, none failed", tc.hints, run.Summary.Requests, run.Summary.Errors)
		}
		want := (*PrefillCounts)(nil)
		if tc.hints {
			want = &PrefillCounts{Sent: 1, Completed: 1}
		}
		if g := run.Summary.ToolPausePrefill; (g == nil) != (want == nil) || (g != nil && *g != *want) {
			t.Errorf("hints %v: prefills %+v, want %+v", tc.hints, g, want)
		}
	}
}

// TestToolPausePrefillCancelledByTheTurn: the prefill waits behind b's
// long prompt when a's next turn arrives, which cancels it: it never
// completes, counts in no result, and the engine drops it.
func TestToolPausePrefillCancelledByTheTurn(t *testing.T) {
	cfg := SimConfig{GPUs: []string{"rtx4090"}, InferHints: true}
	a0, a1 := pauseTurns("a", 400, 1, 100, time.Second)
	b := &Request{Session: "b", Due: time.Millisecond, Prompt: tokensOf(9, 12000), OutputTokens: 8, Answer: tokensOf(10, 8), Last: true}
	d, run := runScript(t, cfg, []*Request{a0, b, a1})
	if g, want := run.Summary.ToolPausePrefill, (PrefillCounts{Sent: 1, Cancelled: 1}); g == nil || *g != want {
		t.Errorf("prefills %+v, want %+v", g, want)
	}
	if len(d.prefills) != 0 || len(d.pauses) != 0 {
		t.Errorf("%d prefills, %d pauses left; want none", len(d.prefills), len(d.pauses))
	}
	if d.engines[0].core.HasWork() {
		t.Error("the engine still has work: the cancelled prefill was not dropped")
	}
	if run.Summary.Requests != 3 || run.Summary.Errors != 0 {
		t.Errorf("%d requests, %d errors; want the 3 of the script, none failed", run.Summary.Requests, run.Summary.Errors)
	}
	for _, r := range run.Results {
		if r.Session == "a" && r.Turn == 1 && r.Sent != time.Second {
			t.Errorf("a's second turn sent at %v, want 1s", r.Sent)
		}
	}
}

// TestToolPausePrefillOnlyWithHints: an agentic run sends prefills only
// with InferHints, counts none of them as a request, and fails none.
func TestToolPausePrefillOnlyWithHints(t *testing.T) {
	for _, hints := range []bool{false, true} {
		s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090", "rtx4090"}, InferHints: hints})
		run, err := s.Run(context.Background(), smallAgentic(t, 5, 3), router.PolicyHearth, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		sum := run.Summary
		t.Logf("hints %v: %d requests, pause cached share %.3f, prefills %+v", hints, sum.Requests, sum.PauseCachedShare, sum.ToolPausePrefill)
		if sum.Errors != 0 || sum.PauseCachedShare == 0 {
			t.Errorf("hints %v: %d errors, pause cached share %v", hints, sum.Errors, sum.PauseCachedShare)
		}
		turnsWithPause := 0
		for _, r := range run.Results {
			if !r.Last && !r.Side && !r.Compaction {
				turnsWithPause++
			}
		}
		switch p := sum.ToolPausePrefill; {
		case !hints && p != nil:
			t.Errorf("prefills %+v without hints", p)
		case hints && (p == nil || p.Sent != turnsWithPause):
			t.Errorf("prefills %+v, want one per turn that ends in a tool call (%d)", p, turnsWithPause)
		}
	}
}

// TestToolPausePrefillYieldsToTurns: the engine runs one request at a time,
// so its queue order is the order requests run. The prefill after a's
// answer waits behind b; c's turn, which comes after it, runs first, as
// the engine's priority scheduling puts background work after turns.
func TestToolPausePrefillYieldsToTurns(t *testing.T) {
	cfg := SimConfig{GPUs: []string{"rtx4090"}, InferHints: true, Engine: sim.Config{MaxNumSeqs: 1}}
	a0, a1 := pauseTurns("a", 400, 1, 100, 20*time.Second)
	b := &Request{Session: "b", Due: time.Millisecond, Prompt: tokensOf(9, 2000), OutputTokens: 50, Answer: tokensOf(10, 50), Last: true}
	c := &Request{Session: "c", Due: 200 * time.Millisecond, Prompt: tokensOf(11, 300), OutputTokens: 1, Answer: tokensOf(12, 1), Last: true}
	s := newTestSim(t, cfg)
	d, err := s.newDES(scriptSessions{&scriptDriver{reqs: []*Request{a0, b, c, a1}}}, router.PolicyHearth)
	if err != nil {
		t.Fatal(err)
	}
	checked := false
	for done := false; !done; {
		if done, err = d.step(); err != nil {
			t.Fatal(err)
		}
		for _, r := range d.results {
			if r.Session != "c" || checked {
				continue
			}
			checked = true
			if d.prefilled.Sent != 1 || d.prefilled.Completed != 0 {
				t.Errorf("when c's turn ended at %v: prefills %+v; want one sent, not completed", d.now, d.prefilled)
			}
			for _, r := range d.results {
				if r.Session == "b" && r.Done > c.Due {
					return // b was still running when c came: the order is the queue's
				}
			}
			t.Fatal("b ended before c came: the test does not exercise the queue")
		}
	}
	t.Fatal("c never ended")
}
