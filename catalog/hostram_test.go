package catalog

import (
	"strings"
	"testing"
)

func TestPlanHostTiers(t *testing.T) {
	cases := []struct {
		name             string
		total, available uint64
		keepFree         uint64
		gpuKV            []float64
		wantGiB          []float64
		wantNote         []string // a word each note holds; "" for none
	}{
		{"no engines", 64 * gib, 60 * gib, 0, nil, []float64{}, []string{}},
		// headroom 16, slack 6.4: min(48, 53.6) - 2 x 4 = 40, halved.
		{"idle 64 GB box, two engines", 64 * gib, 60 * gib, 0, []float64{10 * gib, 10 * gib},
			[]float64{20, 20}, []string{"", ""}},
		// min(48, 20 - 6.4) - 8 = 5.6: 2.8 each, floored to 2, below 10.
		{"busy 64 GB box", 64 * gib, 20 * gib, 0, []float64{10 * gib, 10 * gib},
			[]float64{2, 2}, []string{"churn", "churn"}},
		// headroom 8, slack 4: min(8, 10) - 4 = 4, below the GPU's 10.
		{"16 GB box", 16 * gib, 14 * gib, 0, []float64{10 * gib},
			[]float64{4}, []string{"churn"}},
		// min(8, 4) - 8 < 0.
		{"nothing left", 16 * gib, 8 * gib, 0, []float64{10 * gib, 10 * gib},
			[]float64{0, 0}, []string{"too little", "too little"}},
		// headroom 64, slack 25.6: min(192, 224.4) - 8 = 184, split 3:1.
		{"proportional to GPU KV", 256 * gib, 250 * gib, 0, []float64{30 * gib, 10 * gib},
			[]float64{138, 46}, []string{"", ""}},
		// min(48, 53.6) - 4 = 44, all of it.
		{"GPU KV unknown", 64 * gib, 60 * gib, 0, []float64{0}, []float64{44}, []string{""}},
		{"one engine without GPU KV", 64 * gib, 60 * gib, 0, []float64{10 * gib, 0},
			[]float64{40, 0}, []string{"", "no KV cache"}},
		// An engine that keeps 10 GiB free (SGLang): min(48, 50 - 10) - 4
		// = 36, where the slack of 6.4 alone would give 39 and SGLang would
		// refuse it (39 > 50 - 4 - 10).
		{"keeps 10 GiB free", 64 * gib, 50 * gib, 10 * gib, []float64{0}, []float64{36}, []string{""}},
		// ... and on a busy box: min(48, 20 - 10) - 4 = 6, not 9.
		{"busy box, keeps 10 GiB free", 64 * gib, 20 * gib, 10 * gib, []float64{10 * gib}, []float64{6}, []string{"churn"}},
		// min(8, 7.5 - 4) - 4 = -0.5.
		{"share under 1 GB", 16 * gib, 7.5 * gib, 0, []float64{10 * gib},
			[]float64{0}, []string{"too little"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := PlanHostTiers(tc.total, tc.available, tc.keepFree, tc.gpuKV)
			if len(got) != len(tc.wantGiB) {
				t.Fatalf("%d tiers, want %d", len(got), len(tc.wantGiB))
			}
			for i, tier := range got {
				if tier.GiB != tc.wantGiB[i] {
					t.Errorf("engine %d: %g GiB, want %g", i, tier.GiB, tc.wantGiB[i])
				}
				if w := tc.wantNote[i]; (w == "") != (tier.Note == "") || !strings.Contains(tier.Note, w) {
					t.Errorf("engine %d: note %q, want one with %q", i, tier.Note, w)
				}
			}
		})
	}
}

// TestPlanHostTiersNeverOvercommits: over a grid of machines and engine
// counts, the tiers and the engines' allowances fit both the RAM Hearth
// may take and the RAM available.
func TestPlanHostTiersNeverOvercommits(t *testing.T) {
	for _, total := range []uint64{8 * gib, 16 * gib, 32 * gib, 64 * gib, 128 * gib, 512 * gib, 2048 * gib} {
		for _, availPct := range []uint64{5, 30, 60, 95, 100} {
			available := total * availPct / 100
			for n := 1; n <= 8; n++ {
				kv := make([]float64, n)
				for i := range kv {
					kv[i] = float64(i+1) * 3 * gib
				}
				var sum float64
				for _, tier := range PlanHostTiers(total, available, 0, kv) {
					if tier.GiB < 0 || tier.GiB != float64(int(tier.GiB)) {
						t.Fatalf("total %d GiB, %d%% available, %d engines: tier %g GiB", total/gib, availPct, n, tier.GiB)
					}
					sum += tier.GiB * gib
				}
				used := sum + float64(n)*engineProcessBytes
				headroom := max(hostHeadroomMinBytes, hostHeadroomShare*float64(total))
				slack := max(hostSlackMinBytes, hostSlackShare*float64(total))
				if sum > 0 && (used > float64(total)-headroom || used > float64(available)-slack) {
					t.Errorf("total %d GiB, %d%% available, %d engines: tiers of %.1f GiB overcommit",
						total/gib, availPct, n, sum/gib)
				}
			}
		}
	}
}

func TestEnginePlanKVCacheBytes(t *testing.T) {
	e := EnginePlan{KVTokens: 1000, GPUs: []GPUPlan{
		{Memory: Memory{KVBytesPerToken: 96 * 1024}}, {Memory: Memory{KVBytesPerToken: 96 * 1024}},
	}}
	if got, want := e.KVCacheBytes(), 1000*2*96*1024.0; got != want {
		t.Errorf("KVCacheBytes() = %g, want %g", got, want)
	}
}

func TestCapHostTiersToPinnedMemory(t *testing.T) {
	t.Parallel()
	tiers := []HostTier{{GiB: 20}, {GiB: 10}, {GiB: 0, Note: "none"}}
	if got := CapHostTiers(tiers, 0); got[0].GiB != 20 || got[1].GiB != 10 {
		t.Errorf("no limit: %+v", got)
	}
	if got := CapHostTiers(tiers, 40<<30); got[0].GiB != 20 || got[0].Note != "" {
		t.Errorf("under the limit: %+v", got)
	}
	got := CapHostTiers(tiers, 15<<30)
	if got[0].GiB != 10 || got[1].GiB != 5 || got[2].GiB != 0 || got[2].Note != "none" {
		t.Fatalf("capped at 15 GiB: %+v, want 10 and 5", got)
	}
	if !strings.Contains(got[0].Note, "can pin") || tiers[0].GiB != 20 {
		t.Errorf("note %q, input %+v", got[0].Note, tiers[0])
	}
	if got := CapHostTiers([]HostTier{{GiB: 8}, {GiB: 8}}, 1<<30); got[0].GiB != 0 || !strings.Contains(got[0].Note, "no host-RAM KV tier") {
		t.Errorf("too little to pin: %+v", got)
	}
}
