package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/bench"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/daemon"
)

// TestUpAgentTakesTheRecommendedLayout holds hearth up --agent to hearth
// plan --agent's recommendation, and explicit layout flags to overriding
// it field by field with a log line that says so.
func TestUpAgentTakesTheRecommendedLayout(t *testing.T) {
	t.Parallel()
	board, _ := catalog.LookupGPU("rtx4090")
	uses := []catalog.GPUUse{{GPU: board}}
	model, _ := catalog.LookupModel("qwen3-14b-fp8")
	evaluator := bench.LayoutEvaluator{Size: smallLayoutEvaluation}
	ev, err := evaluator.Evaluate(context.Background(), catalog.AgentLayoutRequest{
		GPUs: uses, Model: model, Client: "codex", Sessions: 2, Seed: catalog.AgentEvaluationSeed,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := ev.Recommended().Candidate.Layout
	if !want.FP8KV() || !want.RopeScaling {
		t.Fatalf("the case assumes the recommendation on one 4090 is FP8 KV with YaRN, not %s", want)
	}
	env := &environment{stderr: io.Discard, getenv: func(string) string { return "" }}
	for _, tc := range []struct {
		name     string
		args     []string
		want     catalog.Layout
		override bool
	}{
		{"recommended", nil, want, false},
		{"rope scaling given", []string{"--rope-scaling=false"}, catalog.Layout{TP: 1, KVCacheDtype: catalog.KVCacheFP8}, true},
		{"dtype given", []string{"--kv-cache-dtype", "auto"}, catalog.Layout{TP: 1, KVCacheDtype: catalog.KVCacheAuto, RopeScaling: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--sim", "1x4090", "--agent", "codex", "--agent-sessions", "2", "--data-dir", t.TempDir()}, tc.args...)
			cfg, err := parseUpFlags(env, args)
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			if err := daemon.ChooseAgentLayout(context.Background(), &cfg, evaluator, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
				t.Fatal(err)
			}
			got := catalog.Layout{TP: cfg.TP, KVCacheDtype: cfg.KVCacheDtype, RopeScaling: cfg.RopeScaling}
			if got.String() != tc.want.String() {
				t.Errorf("layout %s, want %s", got, tc.want)
			}
			if said := strings.Contains(logs.String(), "explicit flags override"); said != tc.override {
				t.Errorf("override logged %v, want %v:\n%s", said, tc.override, logs.String())
			}
			// One line says what the wait is for, one what was chosen.
			if lines := strings.Split(strings.TrimSpace(logs.String()), "\n"); len(lines) != 2 || !strings.Contains(lines[0], "simulating") {
				t.Errorf("want a line before the simulation and one with the layout:\n%s", logs.String())
			}
		})
	}
}
