//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

// TestNodeStoreSurvivesEngineRestarts is what the SSD tier is for: both
// engines of a node are killed with SIGKILL and restarted by the daemon,
// their GPU caches and host-RAM tiers gone, and the next turn of a session
// loads its prefix from the node store instead of recomputing it. Without
// the store (--kvbm ram) the same turn recomputes everything.
func TestNodeStoreSurvivesEngineRestarts(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("skipping: no path to this test binary to run engines with: %v", err)
	}
	t.Setenv(asHearthEnv, "1") // the engines are this binary as hearth sim-engine
	for _, tc := range []struct {
		tiers     string
		minCached float64 // share of turn 1's prompt the next turn finds cached
		maxCached float64
	}{
		{tiersRAMSSD, 0.9, 1},
		{tiersRAM, 0, 0},
	} {
		t.Run(tc.tiers, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "kvstore")
			baseURL, stop := serveTestUp(t, []string{"--sim", "2x4090", "--engine-runtime", "process", "--speedup", "20",
				"--data-dir", t.TempDir(), "--kvbm", tc.tiers, "--kv-store-dir", store, "--stop-timeout", "10s"}, func(cfg *upConfig) {
				cfg.hearthBinary = exe
				cfg.backoff = hruntime.Backoff{Initial: 100 * time.Millisecond}
			})
			defer stop()

			history := []string{strings.Repeat("You are a coding agent. Read the repository before you edit it. ", 300)}
			first := chatTurn(t, baseURL, history)
			if first.prompt < 3000 {
				t.Fatalf("turn 1 has %d prompt tokens; the test needs a long prefix", first.prompt)
			}
			if tc.tiers == tiersRAMSSD {
				if n := countBlocks(t, store); n*16 < first.prompt*9/10 {
					t.Fatalf("the store holds %d blocks after a %d-token prompt", n, first.prompt)
				}
			}

			before := listEngines(t, baseURL)
			for _, e := range before {
				if err := syscall.Kill(e.PID, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
			for _, e := range before {
				waitEngine(t, baseURL, e.Name, 30*time.Second, func(now engineJSON) bool {
					return now.State == "ready" && now.PID != e.PID
				})
			}

			history = append(history, "I read it.", "Now fix the failing test.")
			next := chatTurn(t, baseURL, history)
			share := float64(next.cached) / float64(first.prompt)
			t.Logf("turn 1: %d prompt tokens; after the restarts: %d of %d cached", first.prompt, next.cached, next.prompt)
			if share < tc.minCached || share > tc.maxCached {
				t.Errorf("after both engines restarted the next turn found %d of turn 1's %d tokens cached (%.2f), want %.2f to %.2f",
					next.cached, first.prompt, share, tc.minCached, tc.maxCached)
			}
		})
	}
}

type turnUsage struct{ prompt, cached int }

// chatTurn sends a conversation (user, assistant, user, ...) and returns
// its prompt and cached tokens.
func chatTurn(t *testing.T, baseURL string, turns []string) turnUsage {
	t.Helper()
	var msgs []string
	for i, text := range turns {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, fmt.Sprintf(`{"role":%q,"content":%q}`, role, text))
	}
	body := `{"model":"qwen3-14b-fp8","max_tokens":4,"messages":[` + strings.Join(msgs, ",") + `]}`
	req, err := http.NewRequest(http.MethodPost, baseURL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-session-id", "restart-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: %s: %s", resp.Status, raw)
	}
	var out struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			Details      struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("chat: %v: %s", err, raw)
	}
	return turnUsage{out.Usage.PromptTokens, out.Usage.Details.CachedTokens}
}

// countBlocks counts the block files under a node store.
func countBlocks(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".kv") {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
