package bench

import (
	"testing"
	"time"

	"github.com/hearth-llm/hearth/router"
)

// TestWarmStartSessionsFindThePrefixCached: with WarmStart, what two
// earlier sessions shared (the workload's 2,000-token prefix, in whole
// blocks) is learned and prefilled on both engines before time zero, so
// that the sessions starting together find it cached and the router
// predicts it; without, the first of them computes it.
func TestWarmStartSessionsFindThePrefixCached(t *testing.T) {
	w := smallAgentic(t, 3, 4)
	if got := learnEarlierPrefixes(w, DefaultSimModel).Hot(DefaultSimModel); len(got) != 1 || len(got[0]) != 2000/16*16 {
		t.Fatalf("learned %d prefixes (first %d tokens); want the 1,984 tokens of whole blocks the sessions share", len(got), len(firstOr(got)))
	}
	firstTurns := func(warm bool) (cold int, predicted int, warmed int) {
		s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090", "rtx4090"}, WarmStart: warm})
		d := runDES(t, s, w, router.PolicyHearth)
		for _, r := range d.results {
			if r.Turn != 0 || r.Err != nil {
				continue
			}
			if r.CachedTokens < 1984 {
				cold++
			}
			if r.PredictedCachedTokens >= 1984 {
				predicted++
			}
		}
		return cold, predicted, d.warmed
	}
	cold, _, warmed := firstTurns(false)
	if cold == 0 || warmed != 0 {
		t.Fatalf("without warm start: %d first prompts computed the prefix, %d prefixes warmed; want some and none", cold, warmed)
	}
	cold, predicted, warmed := firstTurns(true)
	if cold != 0 || warmed != 2 {
		t.Errorf("with warm start: %d first prompts computed the prefix, %d prefixes warmed; want none and one per engine", cold, warmed)
	}
	if predicted == 0 {
		t.Error("with warm start the router predicted no first prompt's prefix cached: the prefill's KV events did not reach it")
	}
}

func firstOr(ps [][]uint32) []uint32 {
	if len(ps) == 0 {
		return nil
	}
	return ps[0]
}

// TestWarmStartAfterARestart: after every engine restarts mid-run, the
// engines get the prefix the run's own first prompts shared again before
// the held turns, so that no turn after the restart computes it; without
// a warm start the first of them does.
func TestWarmStartAfterARestart(t *testing.T) {
	at := 40 * time.Second
	run := func(warm bool) (cold int, warmed int) {
		s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090", "rtx4090"}, RestartAt: at, WarmStart: warm})
		d := runDES(t, s, smallAgentic(t, 7, 8), router.PolicyHearth)
		if !d.restarted {
			t.Fatal("the engines did not restart")
		}
		for _, r := range d.results {
			if r.Sent >= at && r.Err == nil && !r.Side && r.CachedTokens < 1984 {
				cold++
			}
		}
		return cold, d.warmed
	}
	cold, _ := run(false)
	if cold == 0 {
		t.Fatal("without warm start every turn after the restart found the prefix cached: the restart lost nothing?")
	}
	cold, warmed := run(true)
	if cold != 0 || warmed != 4 {
		t.Errorf("with warm start %d turns after the restart computed the prefix and %d prefixes were warmed; want none, and one per engine at the start and after the restart", cold, warmed)
	}
}

// TestFirstPromptsTogetherWaitForOnePrefill: sessions whose first prompts
// arrive together on an empty engine compute their shared prefix once (one
// of them computes it, the others find it cached), and every one of them
// waits for that computation; spread over a ramp, the later ones find it
// cached without waiting.
func TestFirstPromptsTogetherWaitForOnePrefill(t *testing.T) {
	const prefix = 8000 // tokens, whole blocks
	firstTurns := func(ramp time.Duration) (leader Result, followers []Result) {
		w, err := NewAgentic(AgenticConfig{Seed: 5, PrefixTokens: prefix, Steps: 2, Sessions: 4,
			ToolPause: Constant{time.Second}, Ramp: ramp, Duration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		s := newTestSim(t, SimConfig{GPUs: []string{"rtx4090"}})
		d := runDES(t, s, w, router.PolicyHearth)
		for _, r := range d.results {
			switch {
			case r.Turn != 0 || r.Err != nil || r.Session > "s00003": // the first four sessions only
			case r.CachedTokens < prefix:
				if leader.Session != "" {
					t.Fatalf("ramp %v: %s and %s both computed the prefix", ramp, leader.Session, r.Session)
				}
				leader = r
			default:
				followers = append(followers, r)
			}
		}
		if leader.Session == "" || len(followers) != 3 {
			t.Fatalf("ramp %v: leader %q, %d followers; want one session computing the prefix and 3 finding it cached", ramp, leader.Session, len(followers))
		}
		return leader, followers
	}
	leader, followers := firstTurns(0)
	for _, f := range followers {
		if f.FirstToken < leader.FirstToken {
			t.Errorf("together: %s's first token at %v, before the prefix was computed (%v)", f.Session, f.FirstToken, leader.FirstToken)
		}
	}
	leader, followers = firstTurns(20 * time.Second)
	for _, f := range followers {
		if wait, prefill := f.FirstToken-f.Sent, leader.FirstToken-leader.Sent; wait*2 > prefill {
			t.Errorf("ramped: %s waited %v for its first token, against the prefix's %v", f.Session, wait, prefill)
		}
	}
}
