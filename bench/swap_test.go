package bench

import (
	"context"
	"testing"
	"time"
)

// swapTestConfig is a tiny swap workload: two agents, one on each model,
// each session sending a title request to the small model.
func swapTestConfig(t *testing.T) SwapConfig {
	return SwapConfig{
		GPU: "rtx4090", Agent: "qwen3-14b-fp8", Side: "qwen3-4b-fp8",
		Workload: AgenticConfig{
			Seed: 1, Sessions: 2, TotalSessions: 4, Steps: 4, PrefixTokens: 2000,
			ToolPause:    Constant{Value: 2 * time.Second},
			SideRequests: []SideRequest{{Name: "title", PrefixTokens: 300, AnswerTokens: IntRange{Min: 10, Max: 20}}},
		},
		StoreDir: t.TempDir(),
	}
}

func TestRunSwapTiny(t *testing.T) {
	cmp, err := RunSwap(context.Background(), swapTestConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cmp.Summaries {
		t.Logf("%s: swaps %d load %.1fs turn p50/p90 %.0f/%.0f first-after-swap p50 %.0f task p50 %.0f errors %d ssd %d",
			s.Policy, s.Swaps, s.LoadSeconds, s.Run.TurnTTFT.P50, s.Run.TurnTTFT.P90, s.FirstAfterSwap.P50, s.Run.Session.P50, s.Run.Errors, s.SSDCachedAfterSwap)
	}
}
