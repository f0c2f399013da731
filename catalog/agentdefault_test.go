package catalog

import (
	"errors"
	"strings"
	"testing"
)

func boards(t *testing.T, kinds ...string) []GPUUse {
	t.Helper()
	var out []GPUUse
	for _, k := range kinds {
		g, ok := LookupGPU(k)
		if !ok {
			t.Fatalf("no GPU %q", k)
		}
		out = append(out, GPUUse{GPU: g})
	}
	return out
}

// TestDefaultAgentLayoutPicksTheEvaluatedLayouts: on the GPU sets whose
// evaluation docs/perf.md records, the rule picks the layout the
// evaluation recommended for each client.
func TestDefaultAgentLayoutPicksTheEvaluatedLayouts(t *testing.T) {
	t.Parallel()
	model, _ := LookupModel("qwen3-14b-fp8")
	for _, tc := range []struct {
		gpus   []string
		client string
		want   string
	}{
		{[]string{"rtx4090", "rtx4090"}, "claude-code", "tp2, fp8 KV, yarn"},
		{[]string{"rtx4090", "rtx4090"}, "codex", "tp2, fp8 KV, yarn"},
		{[]string{"rtx4090", "rtx4090", "rtx4090", "rtx4090"}, "opencode", "tp4, fp8 KV, yarn"},
		{[]string{"rtx4090", "rtx3090"}, "claude-code", "tp2, fp8 KV, yarn"},
		{[]string{"rtx4090"}, "codex", "per-GPU, fp8 KV, yarn"},
	} {
		got, err := DefaultAgentLayout(boards(t, tc.gpus...), model, tc.client)
		if err != nil {
			t.Fatalf("%v %s: %v", tc.gpus, tc.client, err)
		}
		if got.Candidate.Layout.String() != tc.want || got.Shortfall != "" {
			t.Errorf("%v %s: %s (shortfall %q), want %s", tc.gpus, tc.client, got.Candidate.Layout, got.Shortfall, tc.want)
		}
		if !strings.HasPrefix(got.Reason, "for coding agents, a ") || !strings.Contains(got.Reason, "-token context per session") {
			t.Errorf("%v %s: reason %q", tc.gpus, tc.client, got.Reason)
		}
	}
}

func TestDefaultAgentLayoutSaysWhatWouldFit(t *testing.T) {
	t.Parallel()
	big, _ := LookupModel("qwen3-14b-fp8")
	// A 4090 of which a game holds 4 GB: the 14B model fits, with too
	// short a context for Claude Code; the 8B model would serve it.
	gpus := boards(t, "rtx4090")
	gpus[0].UsedBytes = 4 << 30
	got, err := DefaultAgentLayout(gpus, big, "claude-code")
	if err != nil {
		t.Fatal(err)
	}
	if got.Shortfall == "" || !strings.Contains(got.Shortfall, "--model ") {
		t.Errorf("shortfall %q, want one naming a smaller model", got.Shortfall)
	}
	if got.Candidate.Plan.MaxModelLen == 0 {
		t.Errorf("no layout chosen beside the shortfall")
	}
	// One that fits no layout at all.
	huge, _ := LookupModel("qwen3-32b-fp8")
	_, err = DefaultAgentLayout(boards(t, "rtx3080"), huge, "codex")
	if !errors.Is(err, ErrNoAgentLayout) || !strings.Contains(err.Error(), "--model ") {
		t.Errorf("err %v, want ErrNoAgentLayout naming a smaller model", err)
	}
	if _, err := DefaultAgentLayout(boards(t, "rtx4090"), big, "vim"); err == nil {
		t.Error("an unknown client was taken")
	}
}
