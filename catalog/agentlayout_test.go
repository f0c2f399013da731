package catalog

import (
	"slices"
	"testing"
)

func TestBetterLayoutRanks(t *testing.T) {
	run := func(taskMs, compactions float64, finished int) LayoutMeasure {
		return LayoutMeasure{TaskP50: taskMs, CompactionsPerSession: compactions, FinishedSessions: finished}
	}
	for _, tc := range []struct {
		name string
		a, b LayoutMeasure
		want bool
	}{
		{"faster", run(100, 2, 1), run(120, 0, 1), true},
		{"slower", run(120, 0, 1), run(100, 2, 1), false},
		{"tie, fewer compactions", run(100.5, 0, 1), run(100, 1, 1), true},
		{"tie, more compactions", run(100, 1, 1), run(100.5, 0, 1), false},
		{"finished beats none", run(0, 0, 0), run(500, 3, 1), false},
		{"none loses", run(500, 3, 1), run(0, 0, 0), true},
		{"more finished beats faster", run(500, 0, 6), run(100, 0, 5), true},
		{"fewer finished loses", run(100, 0, 5), run(500, 0, 6), false},
	} {
		if got := betterLayout(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: betterLayout = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRecommendationReasonSaysWhenOnlyItFinishedMost(t *testing.T) {
	measure := func(layout Layout, taskMs float64, finished int) LayoutMeasure {
		return LayoutMeasure{Layout: layout, TaskP50: taskMs, FinishedSessions: finished, Sessions: 10}
	}
	best, got := RecommendLayout([]LayoutMeasure{
		measure(Layout{TP: 1}, 100_000, 9),
		measure(Layout{TP: 2}, 150_000, 10),
	})
	if want := "tp2: finished 10 of the 10 sessions, more than any other layout (per-GPU: 9), task time p50 150.0 s"; best != 1 || got != want {
		t.Errorf("recommended %d, %q; want 1, %q", best, got, want)
	}
}

func TestAgentCandidatesLeaveOutYaRNThatAddsNoContext(t *testing.T) {
	board, _ := LookupGPU("rtx4090")
	gpus := []GPUUse{{GPU: board}, {GPU: board}}
	model, err := DefaultModel(gpus)
	if err != nil {
		t.Fatal(err)
	}
	all := Candidates(gpus, []Model{model})
	got := AgentCandidates(gpus, model)
	if len(got) >= len(all) {
		t.Fatalf("AgentCandidates kept %d of %d layouts; per-GPU BF16 KV has no room for YaRN's context and should go", len(got), len(all))
	}
	for _, c := range got {
		if c.Layout.RopeScaling && c.Plan.MaxModelLen <= model.MaxModelLen {
			t.Errorf("%s kept with context %d, no longer than the native %d", c.Layout, c.Plan.MaxModelLen, model.MaxModelLen)
		}
	}
}

func TestWithoutTP(t *testing.T) {
	t.Parallel()
	in := []Candidate{{Layout: Layout{TP: 1}}, {Layout: Layout{TP: 2}}, {Layout: Layout{}}, {Layout: Layout{TP: 2, RopeScaling: true}}}
	got := WithoutTP(in)
	if len(got) != 2 || got[0].Layout.TPSize() != 1 || got[1].Layout.TPSize() != 1 {
		t.Errorf("WithoutTP = %+v, want the two one-GPU layouts", got)
	}
}

// TestSmallerModel: the next smaller model of the family, FP8 first; none
// below the smallest or for a family of one.
func TestSmallerModel(t *testing.T) {
	for _, tc := range []struct{ model, want string }{
		{"qwen3-14b-fp8", "qwen3-8b-fp8"},
		{"qwen3-32b-fp8", "qwen3-14b-fp8"},
		{"qwen3-8b-fp8", "qwen3-4b-fp8"},
		{"qwen3-4b-fp8", ""},
		{"llama-3.1-8b-instruct", ""},
	} {
		m, ok := LookupModel(tc.model)
		if !ok {
			t.Fatalf("no model %s in the catalog", tc.model)
		}
		got, found := SmallerModel(m)
		if found != (tc.want != "") || found && got.Name != tc.want {
			t.Errorf("SmallerModel(%s) = %s, %v; want %q", tc.model, got.Name, found, tc.want)
		}
	}
}

// TestOnRigs: single-GPU rigs keep one engine per GPU; two-GPU rigs keep
// TP 2 too, never TP 4 across two of them.
func TestOnRigs(t *testing.T) {
	m, _ := LookupModel("qwen3-14b-fp8")
	four := []GPUUse{{GPU: mustGPU(t, "rtx4090")}, {GPU: mustGPU(t, "rtx4090")}, {GPU: mustGPU(t, "rtx4090")}, {GPU: mustGPU(t, "rtx4090")}}
	all := AgentCandidates(four, m)
	for perRig, allowed := range map[int][]int{1: {1}, 2: {1, 2}, 4: {1, 2, 4}} {
		seen := map[int]bool{}
		for _, c := range OnRigs(all, perRig) {
			seen[c.Layout.TPSize()] = true
			if !slices.Contains(allowed, c.Layout.TPSize()) {
				t.Errorf("rigs of %d GPUs: kept %s", perRig, c.Layout)
			}
		}
		if !seen[1] {
			t.Errorf("rigs of %d GPUs: no one-engine-per-GPU layout kept", perRig)
		}
	}
}

func mustGPU(t *testing.T, kind string) GPU {
	t.Helper()
	g, ok := LookupGPU(kind)
	if !ok {
		t.Fatalf("no GPU %s in the catalog", kind)
	}
	return g
}
