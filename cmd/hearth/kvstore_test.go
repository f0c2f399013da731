//go:build linux

package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/kvbm"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// TestNodeStoreSurvivesEngineRestarts is what the SSD tier is for: both
// engines of a node are killed with SIGKILL and restarted by the daemon,
// their GPU caches and host-RAM tiers gone, and the next turn of a session
// loads its prefix from the node store instead of recomputing it. Without
// the store (--kvbm ram) the same turn recomputes everything.
func TestNodeStoreSurvivesEngineRestarts(t *testing.T) {
	exe := hearthBinary(t)
	t.Parallel()
	for _, tc := range []struct {
		tiers     string
		minCached float64 // share of turn 1's prompt the next turn finds cached
		maxCached float64
	}{
		{kvbm.TiersRAMSSD, 0.9, 1},
		{kvbm.TiersRAM, 0, 0},
	} {
		t.Run(tc.tiers, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "kvstore")
			baseURL, stop := serveTestUp(t, []string{"--sim", "2x4090", "--engine-runtime", "process", "--speedup", "20",
				"--data-dir", t.TempDir(), "--kvbm", tc.tiers, "--kv-store-dir", store, "--kv-store-size", "64", "--stop-timeout", "10s"}, daemon.WithHearthBinary(exe), daemon.WithBackoff(hruntime.Backoff{Initial: 100 * time.Millisecond}),
				daemon.WithSpecHook(asHearthEngine))
			defer stop()

			history := []string{strings.Repeat("You are a coding agent. Read the repository before you edit it. ", 300)}
			first := chatTurn(t, baseURL, history)
			if first.prompt < 3000 {
				t.Fatalf("turn 1 has %d prompt tokens; the test needs a long prefix", first.prompt)
			}
			// The store's capacity (its files are sparse) gives each
			// engine a write budget above a step's blocks: with less, the
			// blocks over the budget wait for the engine's next step.
			if tc.tiers == kvbm.TiersRAMSSD {
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
				waitEngine(t, baseURL, e.Name, 30*time.Second, func(now adminapi.Engine) bool {
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
