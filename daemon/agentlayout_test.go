package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/catalog"
)

// fakeEvaluator measures the layout want as the fastest of the candidates
// and records what it was asked.
type fakeEvaluator struct {
	want  catalog.Layout
	asked catalog.AgentLayoutRequest
	seen  []catalog.Layout
}

func (f *fakeEvaluator) MeasureLayouts(_ context.Context, req catalog.AgentLayoutRequest, candidates []catalog.Candidate) ([]catalog.LayoutMeasure, error) {
	f.asked = req
	ms := make([]catalog.LayoutMeasure, len(candidates))
	for i, c := range candidates {
		f.seen = append(f.seen, c.Layout)
		ms[i] = catalog.LayoutMeasure{Layout: c.Layout, Sessions: 10, FinishedSessions: 10, TaskP50: 60_000}
		if c.Layout.SameEngines(f.want) {
			ms[i].TaskP50 = 30_000
		}
	}
	return ms, nil
}

// TestChooseAgentLayoutTakesTheRecommendation: hearth up --agent asks the
// evaluator about the client's sessions on the layouts that fit its GPUs,
// takes the one the planner recommends, and keeps each layout flag the
// command line gave, saying so.
func TestChooseAgentLayoutTakesTheRecommendation(t *testing.T) {
	want := catalog.Layout{TP: 1, KVCacheDtype: catalog.KVCacheFP8, RopeScaling: true}
	for _, tc := range []struct {
		name     string
		args     []string
		layout   catalog.Layout
		override bool
	}{
		{"recommended", nil, want, false},
		{"rope scaling given", []string{"--rope-scaling=false"}, catalog.Layout{TP: 1, KVCacheDtype: catalog.KVCacheFP8}, true},
		{"dtype given", []string{"--kv-cache-dtype", "auto"}, catalog.Layout{TP: 1, KVCacheDtype: catalog.KVCacheAuto, RopeScaling: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(t, nil, append([]string{"--sim", "1x4090", "--agent", "codex", "--agent-sessions", "2", "--data-dir", t.TempDir()}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			ev := &fakeEvaluator{want: want}
			var logs bytes.Buffer
			if err := ChooseAgentLayout(context.Background(), &cfg, ev, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
				t.Fatal(err)
			}
			if got := (catalog.Layout{TP: cfg.TP, KVCacheDtype: cfg.KVCacheDtype, RopeScaling: cfg.RopeScaling}); got.String() != tc.layout.String() {
				t.Errorf("layout %s, want %s", got, tc.layout)
			}
			if cfg.MaxBatchedTokens != catalog.AgentMaxBatchedTokens {
				t.Errorf("step budget %d, want the agent layout's %d", cfg.MaxBatchedTokens, catalog.AgentMaxBatchedTokens)
			}
			if r := ev.asked; r.Client != "codex" || r.Sessions != 2 || r.Seed != catalog.AgentEvaluationSeed || r.Model.Name != cfg.Model || len(r.GPUs) != 1 {
				t.Errorf("asked %+v, want codex's 2 sessions on %s and one GPU, seed %d", r, cfg.Model, catalog.AgentEvaluationSeed)
			}
			if len(ev.seen) < 2 {
				t.Errorf("measured %v, want the layouts that fit a 4090", ev.seen)
			}
			if said := strings.Contains(logs.String(), "explicit flags override"); said != tc.override {
				t.Errorf("override logged %v, want %v:\n%s", said, tc.override, logs.String())
			}
			if lines := strings.Split(strings.TrimSpace(logs.String()), "\n"); len(lines) != 2 || !strings.Contains(lines[0], "simulating") {
				t.Errorf("want a line before the simulation and one with the layout:\n%s", logs.String())
			}
		})
	}
}
