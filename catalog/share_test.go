package catalog

import (
	"errors"
	"slices"
	"testing"
)

func shareModels(t *testing.T, names ...string) []Model {
	t.Helper()
	var ms []Model
	for _, n := range names {
		m, ok := LookupModel(n)
		if !ok {
			t.Fatalf("no model %s", n)
		}
		ms = append(ms, m)
	}
	return ms
}

// TestPlanSharesSetsThatFit: a small model keeps a share of its own beside
// a larger one when both hold an agent turn within the budget, so they are
// resident together; a pair that does not fit gets the whole budget each,
// and swaps.
func TestPlanSharesSetsThatFit(t *testing.T) {
	rtx4090, _ := LookupGPU("rtx4090")
	a6000, _ := LookupGPU("a6000")
	for _, tc := range []struct {
		name   string
		gpu    GPU
		models []string
		kv     string
		sets   [][]string
	}{
		{"8b and 4b share a 4090", rtx4090, []string{"qwen3-8b-fp8", "qwen3-4b-fp8"}, "", [][]string{{"qwen3-8b-fp8", "qwen3-4b-fp8"}}},
		{"14b and 4b do not fit a 4090 together", rtx4090, []string{"qwen3-14b-fp8", "qwen3-4b-fp8"}, "", [][]string{{"qwen3-14b-fp8"}, {"qwen3-4b-fp8"}}},
		{"14b and 8b swap on a 4090", rtx4090, []string{"qwen3-14b-fp8", "qwen3-8b"}, KVCacheFP8, [][]string{{"qwen3-14b-fp8"}, {"qwen3-8b"}}},
		{"14b alone, 8b beside 4b", rtx4090, []string{"qwen3-14b-fp8", "qwen3-8b-fp8", "qwen3-4b-fp8"}, "",
			[][]string{{"qwen3-14b-fp8"}, {"qwen3-8b-fp8", "qwen3-4b-fp8"}}},
		{"14b and 4b share an A6000", a6000, []string{"qwen3-14b-fp8", "qwen3-4b-fp8"}, "", [][]string{{"qwen3-14b-fp8", "qwen3-4b-fp8"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := shareModels(t, tc.models...)
			p, err := PlanShares(ShareRequest{GPUs: []GPUUse{{GPU: tc.gpu}}, Models: ms, Layout: Layout{KVCacheDtype: tc.kv}})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(p.Sets, tc.sets, slices.Equal) {
				t.Errorf("sets %v, want %v (%s)", p.Sets, tc.sets, p)
			}
			for _, set := range p.Sets {
				var sum float64
				for _, name := range set {
					m, _ := p.Model(name)
					sum += m.Share
				}
				if sum > p.Budget+1e-9 {
					t.Errorf("set %v takes %.2f of the GPU, over the budget %.2f", set, sum, p.Budget)
				}
			}
			for _, m := range p.Models {
				if m.Share < m.Need {
					t.Errorf("%s: share %.2f under its need %.2f", m.Name, m.Share, m.Need)
				}
				if m.Engine.KVTokens < AgentTurnTokens || m.Engine.MaxModelLen < AgentTurnTokens {
					t.Errorf("%s at %.2f holds %d tokens (context %d), less than one agent turn", m.Name, m.Share, m.Engine.KVTokens, m.Engine.MaxModelLen)
				}
				if m.Engine.GPUMemoryUtilization != m.Share {
					t.Errorf("%s: engine planned at %.2f, share %.2f", m.Name, m.Engine.GPUMemoryUtilization, m.Share)
				}
			}
		})
	}
}

// TestPlanSharesSGLangDoesNotShare: SGLang's fraction is of the memory free
// when it starts, so its models each get the budget and swap, even where
// vLLM's would share.
func TestPlanSharesSGLangDoesNotShare(t *testing.T) {
	rtx4090, _ := LookupGPU("rtx4090")
	p, err := PlanShares(ShareRequest{GPUs: []GPUUse{{GPU: rtx4090}}, Models: shareModels(t, "qwen3-8b-fp8", "qwen3-4b-fp8"), Share: ShareOfFreeStatic})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Sets) != 2 {
		t.Errorf("sets %v, want each model alone", p.Sets)
	}
	for _, m := range p.Models {
		if m.Share != p.Budget {
			t.Errorf("%s: share %.2f, want the budget %.2f", m.Name, m.Share, p.Budget)
		}
	}
}

// TestShareBudgetCountsEveryEngine: each engine of the group keeps its CUDA
// context on the GPU, asleep too, so the budget shrinks with the engines
// and with what other programs hold.
func TestShareBudgetCountsEveryEngine(t *testing.T) {
	rtx4090, _ := LookupGPU("rtx4090")
	use := []GPUUse{{GPU: rtx4090, UsedBytes: 2 * gib}}
	one, three := ShareBudget(use, 1), ShareBudget(use, 3)
	if one != MemoryFraction(rtx4090.MemoryBytes, 2*gib) {
		t.Errorf("one engine's budget %.2f, want MemoryFraction's %.2f", one, MemoryFraction(rtx4090.MemoryBytes, 2*gib))
	}
	if three >= one {
		t.Errorf("three engines' budget %.2f, want less than one engine's %.2f", three, one)
	}
}

// TestPlanSharesRefusesWhatFitsNowhere: a model too large for the GPU is
// refused with the plan's sentence, as it is alone.
func TestPlanSharesRefusesWhatFitsNowhere(t *testing.T) {
	rtx4090, _ := LookupGPU("rtx4090")
	_, err := PlanShares(ShareRequest{GPUs: []GPUUse{{GPU: rtx4090}}, Models: shareModels(t, "qwen3-4b-fp8", "qwen3-32b-fp8")})
	var nf *NotFitError
	if !errors.As(err, &nf) || nf.Model.Name != "qwen3-32b-fp8" {
		t.Fatalf("err %v, want the 32B's NotFitError", err)
	}
}
