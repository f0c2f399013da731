package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/daemon"
)

// askedLayouts records the questions hearth up --agent asks of the layout
// evaluation, and answers them with smallLayouts.
type askedLayouts struct {
	mu    sync.Mutex
	asked []question
}

type question struct {
	req        catalog.AgentLayoutRequest
	candidates []catalog.Candidate
}

func (a *askedLayouts) MeasureLayouts(ctx context.Context, req catalog.AgentLayoutRequest, candidates []catalog.Candidate) ([]catalog.LayoutMeasure, error) {
	a.mu.Lock()
	a.asked = append(a.asked, question{req, slices.Clone(candidates)})
	a.mu.Unlock()
	return smallLayouts.MeasureLayouts(ctx, req, candidates)
}

// TestUpAgentTakesTheRecommendedLayout holds hearth up --agent to hearth
// plan --agent's recommendation, and explicit layout flags to overriding
// it field by field with a log line that says so.
func TestUpAgentTakesTheRecommendedLayout(t *testing.T) {
	t.Parallel()
	board, _ := catalog.LookupGPU("rtx4090")
	uses := []catalog.GPUUse{{GPU: board}}
	model, _ := catalog.LookupModel("qwen3-14b-fp8")
	// hearth plan --agent's question, as plan.go asks it: its answer is
	// what hearth up --agent must take, and each case below must ask the
	// same (the flags they set only override the answer), which
	// smallLayouts then simulates once.
	plan := question{
		req:        catalog.AgentLayoutRequest{GPUs: uses, Model: model, Client: "codex", Sessions: 2, Seed: catalog.AgentEvaluationSeed},
		candidates: catalog.AgentCandidates(uses, model),
	}
	ev, err := smallLayouts.Evaluate(context.Background(), plan.req)
	if err != nil {
		t.Fatal(err)
	}
	want := ev.Recommended().Candidate.Layout
	evaluator := &askedLayouts{}
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
	if len(evaluator.asked) != 3 {
		t.Fatalf("hearth up --agent asked the evaluator %d questions in 3 cases, want one each", len(evaluator.asked))
	}
	for i, q := range evaluator.asked {
		if !reflect.DeepEqual(q, plan) {
			t.Errorf("case %d asked the evaluator %+v, want hearth plan --agent's question %+v", i, q, plan)
		}
	}
}
