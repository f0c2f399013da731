package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/agentclient"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/nodes"
)

func simGPUs(t *testing.T, spec string) []nodes.GPU {
	t.Helper()
	gpus, err := nodes.ParseSimSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	return gpus
}

// TestChooseLayoutServesAgentsByDefault: without layout flags hearth up
// serves the layout for coding agents; --layout per-gpu keeps one engine
// per GPU; a layout flag given anywhere (command line, environment) serves
// the layout the flags make.
func TestChooseLayoutServesAgentsByDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		vars   map[string]string
		args   []string
		want   string
		chosen string
	}{
		{"default", nil, nil, "tp2, fp8 KV, yarn", ChosenByRule},
		{"per-gpu", nil, []string{"--layout", "per-gpu"}, "per-GPU", ChosenPerGPU},
		{"tp given", nil, []string{"--tp", "2"}, "tp2", ChosenByFlags},
		{"dtype given", nil, []string{"--kv-cache-dtype", "fp8"}, "per-GPU, fp8 KV", ChosenByFlags},
		{"context from the environment", map[string]string{"HEARTH_MAX_MODEL_LEN": "16384"}, nil, "per-GPU", ChosenByFlags},
		{"several models", nil, []string{"--model", "qwen3-8b-fp8,qwen3-4b-fp8"}, "per-GPU", ChosenByFallback},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := parseConfig(t, tc.vars, append([]string{"--sim", "2x4090", "--data-dir", t.TempDir()}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			s, err := chooseLayout(&cfg, simGPUs(t, "2x4090"))
			if err != nil {
				t.Fatal(err)
			}
			got := catalog.Layout{TP: cfg.TP, KVCacheDtype: cfg.KVCacheDtype, RopeScaling: cfg.RopeScaling}
			if got.String() != tc.want || s.Name != tc.want || s.Chosen != tc.chosen {
				t.Errorf("config %s, served %s chosen %s; want %s chosen %s", got, s.Name, s.Chosen, tc.want, tc.chosen)
			}
			if s.Reason == "" {
				t.Error("no reason")
			}
		})
	}
}

func TestLayoutFlagIsChecked(t *testing.T) {
	t.Parallel()
	_, err := parseConfig(t, nil, "--sim", "2x4090", "--layout", "tp", "--data-dir", t.TempDir())
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "agent or per-gpu") {
		t.Errorf("err %v, want a usage error naming agent and per-gpu", err)
	}
}

// TestPlanServesTheAgentLayout: the engines planned for two 4090s without
// layout flags are one over both GPUs, with FP8 KV and YaRN's context,
// and the served layout records the limits the clients are told.
func TestPlanServesTheAgentLayout(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig(t, nil, "--sim", "2x4090", "--data-dir", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	specs, _, err := Plan(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 1 || len(specs[0].TensorParallel) != 1 || specs[0].KVCacheDtype != catalog.KVCacheFP8 || specs[0].ModelOverrides == "" {
		t.Fatalf("planned %d engines (%+v), want one over both GPUs with FP8 KV and YaRN", len(specs), specs)
	}
	if n := specs[0].Estimate.MaxModelLen; n < 64*1024 {
		t.Errorf("context %d, want at least 64k", n)
	}
	s := ServedLayout{Name: "tp2, fp8 KV, yarn"}.withContext(specs[0].Estimate.MaxModelLen, contextShortfall(specs))
	if s.ClaudeCompactWindow != agentclient.ClaudeCodeCompactWindow(s.ContextTokens) || s.OutputTokens != agentclient.OutputTokens(s.ContextTokens) || s.Shortfall != "" {
		t.Errorf("served %+v", s)
	}
}

func TestServedLayoutRoundTrips(t *testing.T) {
	t.Parallel()
	d := DataDir(t.TempDir())
	want := ServedLayout{Name: "tp2, fp8 KV, yarn", Layout: catalog.Layout{TP: 2, KVCacheDtype: "fp8", RopeScaling: true},
		Chosen: ChosenByRule, Reason: "why", ContextTokens: 131072, OutputTokens: 8192, ClaudeCompactWindow: 131072}
	if _, err := ReadServedLayout(d); err == nil {
		t.Error("read a layout no daemon wrote")
	}
	if err := writeServedLayout(d, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadServedLayout(d)
	if err != nil || got != want {
		t.Errorf("read %+v, %v; want %+v", got, err, want)
	}
}
