package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/installer/doctor"
)

// hfHomeWithModel lays out a Hugging Face home (HF_HOME) as
// huggingface_hub does, with one model the catalog does not list in its
// hub/: a small Llama whose context is 8,192 tokens.
func hfHomeWithModel(t *testing.T) (home, repo string) {
	t.Helper()
	home, repo = t.TempDir(), "acme/tiny-coder"
	snap := filepath.Join(home, "hub", "models--acme--tiny-coder", "snapshots", "c0ffee")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"config.json": `{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
			"intermediate_size": 5632, "max_position_embeddings": 8192, "num_attention_heads": 32,
			"num_key_value_heads": 4, "num_hidden_layers": 22, "torch_dtype": "bfloat16", "vocab_size": 32000}`,
		"model.safetensors.index.json": `{"metadata": {"total_size": 2200000000}, "weight_map": {}}`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(snap, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return home, repo
}

// TestHFCacheIsHFHomeForEveryCommand holds hearth up, hearth doctor and
// hearth plan to one meaning of --hf-cache, Hugging Face's HF_HOME (the
// models under its hub/), on one cache; and a hub directory given instead
// to being taken for its HF_HOME with a note saying so.
func TestHFCacheIsHFHomeForEveryCommand(t *testing.T) {
	home, repo := hfHomeWithModel(t)
	for _, tc := range []struct {
		name, hfCache, note string
	}{
		{"HF_HOME", home, ""},
		{"its hub directory", filepath.Join(home, "hub"), "is a Hugging Face hub directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("plan", func(t *testing.T) {
				out, errOut, err := runHearth(t, "", "plan", "--gpu", "rtx4090", "--model", repo, "--hf-cache", tc.hfCache, "--json")
				if err != nil {
					t.Fatalf("plan: %v\n%s", err, errOut)
				}
				var plan struct {
					Repo        string `json:"repo"`
					MaxModelLen int    `json:"max_model_len"`
				}
				if err := json.Unmarshal([]byte(out), &plan); err != nil {
					t.Fatal(err)
				}
				if plan.Repo != repo || plan.MaxModelLen != 8192 {
					t.Errorf("plan: %+v, want %s with its cached 8192-token context", plan, repo)
				}
				if !strings.Contains(errOut, tc.note) {
					t.Errorf("plan said %q, want %q", errOut, tc.note)
				}
			})
			t.Run("doctor", func(t *testing.T) {
				dir := t.TempDir()
				out, errOut, _ := runHearth(t, "", "doctor", "--json", "--sim", "1x4090", "--model", repo, "--hf-cache", tc.hfCache,
					"--data-dir", dir+"/data", "--listen", "127.0.0.1:0")
				checks := decodeDoctorJSON(t, out)
				if c := findCheck(t, checks, doctor.GPUMemoryName(0)); c.Status != doctor.Pass || !strings.Contains(c.Evidence, "tiny-coder fits with a 8,192-token context") {
					t.Errorf("doctor weighed %+v, want %s from the cache, fitting", c, repo)
				}
				if c := findCheck(t, checks, doctor.CheckHFCacheDisk); !strings.Contains(c.Evidence, home) {
					t.Errorf("doctor checked the disk of %+v, want %s's", c, home)
				}
				if !strings.Contains(errOut, tc.note) {
					t.Errorf("doctor said %q, want %q", errOut, tc.note)
				}
			})
			t.Run("up", func(t *testing.T) {
				var errOut strings.Builder
				env := &environment{stdout: io.Discard, stderr: &errOut, getenv: func(string) string { return "" }}
				cfg, err := parseUpFlags(env, []string{"--sim", "1x4090", "--engine", "vllm", "--engine-runtime", "docker",
					"--model", repo, "--hf-cache", tc.hfCache, "--data-dir", t.TempDir()})
				if err != nil {
					t.Fatal(err)
				}
				specs, _, err := daemon.Plan(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				if specs[0].ModelPath != repo || specs[0].MaxModelLen != 8192 {
					t.Errorf("up planned %s with a %d-token context, want %s with its cached 8192", specs[0].ModelPath, specs[0].MaxModelLen, repo)
				}
				if !strings.Contains(errOut.String(), tc.note) {
					t.Errorf("up said %q, want %q", errOut.String(), tc.note)
				}
			})
		})
	}
}
