package daemon

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func TestParseGPUList(t *testing.T) {
	got, err := parseGPUList("1, GPU-7b1e0d8c-2f4e-4c1a-9d55-3c3f1ad0e6a2")
	want := []GPURef{{Index: 1}, {Index: 1, UUID: "GPU-7b1e0d8c-2f4e-4c1a-9d55-3c3f1ad0e6a2"}}
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("parseGPUList = %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []string{"", "-1", "x", "GPU-", "all", "2,2"} {
		if _, err := parseGPUList(bad); err == nil {
			t.Errorf("parseGPUList(%q): no error", bad)
		}
	}
}

// parseConfig is hearth up's configuration from args and the variables
// in vars, as cmd/hearth reads it.
func parseConfig(t *testing.T, vars map[string]string, args ...string) (Config, error) {
	t.Helper()
	env := Env{Getenv: func(k string) string { return vars[k] }}
	var cfg Config
	if _, err := RegisterFlags(flag.NewFlagSet("up", flag.ContinueOnError), &cfg, env).Parse(args); err != nil {
		return cfg, err
	}
	if err := cfg.Complete(env); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// TestCompleteFillsWhatTheFlagsImply: the defaults that depend on other
// flags or the environment are worked out in one place.
func TestCompleteFillsWhatTheFlagsImply(t *testing.T) {
	home := map[string]string{"HOME": "/home/u"}
	for _, tc := range []struct {
		name  string
		vars  map[string]string
		args  []string
		check func(Config) string
	}{
		{"simulated GPUs run in the daemon", home, []string{"--sim", "2x4090"}, func(c Config) string {
			if c.EngineRuntime != RuntimeSim || c.GPURuntime != "none" || c.Engine != "" || c.KVOffloadAuto {
				return fmt.Sprintf("runtime %q, gpu runtime %q, engine %q, offload auto %v", c.EngineRuntime, c.GPURuntime, c.Engine, c.KVOffloadAuto)
			}
			return ""
		}},
		{"simulated images pass for vLLM", home, []string{"--sim", "1x4090", "--engine-runtime", "docker"}, func(c Config) string {
			if c.Engine != "vllm" || c.GPURuntime != "none" {
				return fmt.Sprintf("engine %q, gpu runtime %q", c.Engine, c.GPURuntime)
			}
			return ""
		}},
		{"real engines run in containers, host RAM planned", home, []string{"--engine", "sglang", "--gpus", "1,0"}, func(c Config) string {
			if c.EngineRuntime != RuntimeDocker || c.GPURuntime != "nvidia" || !c.KVOffloadAuto || len(c.GPUs) != 2 || c.GPUs[0].Index != 1 {
				return fmt.Sprintf("runtime %q, gpu runtime %q, offload auto %v, gpus %+v", c.EngineRuntime, c.GPURuntime, c.KVOffloadAuto, c.GPUs)
			}
			return ""
		}},
		{"a RAM tier sized on the command line", home, []string{"--engine", "vllm", "--kv-offloading-size", "8"}, func(c Config) string {
			if c.KVOffloadAuto || c.KVOffloadGiB != 8 {
				return fmt.Sprintf("offload auto %v, %v GiB", c.KVOffloadAuto, c.KVOffloadGiB)
			}
			return ""
		}},
		{"the data directory and its store", home, []string{"--sim", "1x4090"}, func(c Config) string {
			if c.DataDir != "/home/u/.local/share/hearth" || c.KVStoreDir != "/home/u/.local/share/hearth/kvstore" {
				return fmt.Sprintf("data dir %q, store %q", c.DataDir, c.KVStoreDir)
			}
			return ""
		}},
		{"no tiers, no store", map[string]string{"XDG_DATA_HOME": "/xdg"}, []string{"--sim", "1x4090", "--kvbm", "off"}, func(c Config) string {
			if c.DataDir != "/xdg/hearth" || c.KVStoreDir != "" || c.KVOffloadGiB != 0 {
				return fmt.Sprintf("data dir %q, store %q, offload %v GiB", c.DataDir, c.KVStoreDir, c.KVOffloadGiB)
			}
			return ""
		}},
		{"the model of the smallest GPU, every name mapped to it", home, []string{"--sim", "1x4090+1x3090"}, func(c Config) string {
			if c.Model != "qwen3-14b-fp8" || len(c.Models) != 1 || c.Aliases["*"] != c.Model {
				return fmt.Sprintf("model %q of %v, aliases %v", c.Model, c.Models, c.Aliases)
			}
			return ""
		}},
		{"a repository served by its catalog name", home, []string{"--sim", "1x4090", "--model", "Qwen/Qwen3-8B, qwen3-8b"}, func(c Config) string {
			if len(c.Models) != 1 || c.Model != "qwen3-8b" {
				return fmt.Sprintf("models %v", c.Models)
			}
			return ""
		}},
		{"the server's keys from their own variable", map[string]string{"HEARTH_SERVER_API_KEYS": "a, b", "HEARTH_API_KEY": "client"}, []string{"--sim", "1x4090", "--api-key", "c"}, func(c Config) string {
			if strings.Join(c.APIKeys, ",") != "c,a,b" {
				return fmt.Sprintf("keys %v", c.APIKeys)
			}
			return ""
		}},
		{"the Hugging Face home and the token", map[string]string{"HF_HOME": "/hf", "HF_TOKEN": "hf_x"}, []string{"--sim", "1x4090"}, func(c Config) string {
			if c.HFCache != "/hf" || c.hubDir() != "/hf/hub" || c.HFToken != "hf_x" {
				return fmt.Sprintf("hf cache %q, hub %q, token %q", c.HFCache, c.hubDir(), c.HFToken)
			}
			return ""
		}},
		{"debug logs, inferred hints off", home, []string{"--sim", "1x4090", "-v", "--infer-hints", "off"}, func(c Config) string {
			if c.LogLevel != slog.LevelDebug || !c.NoInferredHints || c.LogFormat != LogFormatText {
				return fmt.Sprintf("level %v, no inferred hints %v, format %q", c.LogLevel, c.NoInferredHints, c.LogFormat)
			}
			return ""
		}},
		{"static peers, each a route", home, []string{"--sim", "1x4090", "--peer", "10.0.0.2", "--peer", "rig-b:7500", "--peer", "[fd00::3]"}, func(c Config) string {
			want := "nats-route://10.0.0.2:7422,nats-route://rig-b:7500,nats-route://[fd00::3]:7422"
			if strings.Join(c.Cluster.Peers, ",") != want {
				return fmt.Sprintf("peers %v, want %s", c.Cluster.Peers, want)
			}
			return ""
		}},
		{"the agent's explicit layout flags", home, []string{"--sim", "1x4090", "--agent", "codex", "--tp", "1", "--rope-scaling"}, func(c Config) string {
			if c.Agent.Client != "codex" || c.Agent.Sessions != 4 || strings.Join(c.Agent.Explicit, ",") != "tp,rope-scaling" {
				return fmt.Sprintf("agent %+v", c.Agent)
			}
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(t, tc.vars, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if msg := tc.check(cfg); msg != "" {
				t.Errorf("up %q: %s", tc.args, msg)
			}
		})
	}
}

func TestCompleteRefusesBadText(t *testing.T) {
	for _, args := range [][]string{
		{"--sim", "1x4090", "--infer-hints", "maybe"},
		{"--sim", "1x4090", "--agent", "aider"},
		{"--sim", "1x4090", "--agent", "codex", "--agent-sessions", "65"},
		{"--engine", "vllm", "--gpus", "0,0"},
		{"--sim", "1x4090", "--model", " , "},
		{"--sim", "1x4090", "--log-format", "xml"},
		{"--sim", "1x4090", "--join", "x", "--join-file", "/dev/null"},
	} {
		if _, err := parseConfig(t, nil, args...); !errors.Is(err, ErrUsage) {
			t.Errorf("up %q: %v, want a usage error", args, err)
		}
	}
}

func TestUpFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{}, // no --sim
		{"--sim", "2x4090", "--policy", "fastest"},
		{"--sim", "2x4090", "--speedup", "0"},
		{"--sim", "2x4090", "--kv-offloading-size", "-1"},
		{"--sim", "2x4090", "--alias", "claude"},
		{"--sim", "2x4090", "--sim-tool-calls", "6-3"},
		{"--sim", "2x4090", "--sim-tool-calls", "some"},
	} {
		if _, err := parseConfig(t, nil, args...); !errors.Is(err, ErrUsage) {
			t.Errorf("hearth up %v: got %v, want a usage error", args, err)
		}
	}
}

func TestLogFormatFlag(t *testing.T) {
	if _, err := parseConfig(t, nil, "--sim", "1x4090", "--log-format", "xml"); err == nil {
		t.Error("--log-format xml accepted")
	}
	cfg, err := parseConfig(t, nil, "--sim", "1x4090")
	if err != nil || cfg.LogFormat != LogFormatText {
		t.Errorf("default log format %q (%v), want text", cfg.LogFormat, err)
	}
}

// The daemon reads its keys from its own variable: HEARTH_API_KEY is the
// clients' (the printed settings tell them to export it), and a daemon
// started from a client's shell must not start requiring it.
func TestServerKeysFromTheirOwnVariable(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"nothing set", nil, nil, nil},
		{"the clients' variable is ignored", map[string]string{"HEARTH_API_KEY": "client-key"}, nil, nil},
		{"the server's variable, separated by commas", map[string]string{"HEARTH_SERVER_API_KEYS": "sk-a, sk-b,,", "HEARTH_API_KEY": "client-key"}, nil, []string{"sk-a", "sk-b"}},
		{"flags and variable together", map[string]string{"HEARTH_SERVER_API_KEYS": "sk-a"}, []string{"--api-key", "sk-flag"}, []string{"sk-flag", "sk-a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(t, tc.env, append([]string{"--sim", "1x4090"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.APIKeys, tc.want) {
				t.Errorf("keys %q, want %q", cfg.APIKeys, tc.want)
			}
		})
	}
}

func TestUpAgentFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--sim", "1x4090", "--agent", "aider"},
		{"--sim", "1x4090", "--agent", "codex", "--agent-sessions", "0"},
	} {
		if _, err := parseConfig(t, nil, append(args, "--data-dir", t.TempDir())...); !errors.Is(err, ErrUsage) {
			t.Errorf("up %v: %v, want a usage error", args, err)
		}
	}
}

// hearth up --infer-hints reaches the daemon's configuration: on by
// default, off to compare, anything else refused.
func TestUpInferHintsFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		off  bool
		bad  bool
	}{
		{nil, false, false},
		{[]string{"--infer-hints", "on"}, false, false},
		{[]string{"--infer-hints", "off"}, true, false},
		{[]string{"--infer-hints", "no"}, false, true},
	} {
		cfg, err := parseConfig(t, nil, append([]string{"--sim", "1x4090", "--data-dir", t.TempDir()}, tc.args...)...)
		if tc.bad {
			if !errors.Is(err, ErrUsage) {
				t.Errorf("%q: error %v, want a usage error", tc.args, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if cfg.NoInferredHints != tc.off {
			t.Errorf("%q: NoInferredHints %v, want %v", tc.args, cfg.NoInferredHints, tc.off)
		}
	}
}

func TestUpRefusesPlainHTTPBeyondLoopback(t *testing.T) {
	base := []string{"--sim", "1x4090"}
	cases := []struct {
		name    string
		args    []string
		wantErr string // "" = accepted
	}{
		{"loopback by default", nil, ""},
		{"loopback named", []string{"--listen", "localhost:8000"}, ""},
		{"IPv6 loopback", []string{"--listen", "[::1]:8000"}, ""},
		{"every address, plain", []string{"--listen", "0.0.0.0:8080"}, "--tls auto"},
		{"empty host, plain", []string{"--listen", ":8080"}, "--tls auto"},
		{"a LAN name, plain", []string{"--listen", "box.lan:8080"}, "--tls auto"},
		{"every address, --tls auto", []string{"--listen", "0.0.0.0:8080", "--tls", "auto"}, ""},
		{"every address, own certificate", []string{"--listen", "0.0.0.0:8080", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, ""},
		{"every address, --insecure-lan", []string{"--listen", "0.0.0.0:8080", "--insecure-lan"}, ""},
		{"unknown --tls", []string{"--tls", "on"}, "unknown --tls"},
		{"certificate without key", []string{"--tls-cert", "c.pem"}, "go together"},
		{"auto and own certificate", []string{"--tls", "auto", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, "drop"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(t, nil, append(append([]string{}, base...), tc.args...)...)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("accepted, want an error naming %q", tc.wantErr)
			case tc.wantErr != "" && (!errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want a usage error naming %q", err, tc.wantErr)
			}
		})
	}
}
