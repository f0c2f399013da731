package bench

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/router"
)

// tieredRun runs a small agentic workload on two engines with few KV
// blocks, so that contexts leave the GPU between turns.
func tieredRun(t *testing.T, cfg SimConfig) *SimRun {
	t.Helper()
	cfg.GPUs = []string{"rtx4090", "rtx4090"}
	cfg.Engine.NumGPUBlocks = 1000
	s := newTestSim(t, cfg)
	run, err := s.Run(context.Background(), smallAgentic(t, 7, 8), router.PolicyHearth, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	if run.Summary.Errors > 0 {
		t.Fatalf("%d requests failed: %+v", run.Summary.Errors, run.Summary.ErrorsByCause)
	}
	return run
}

// TestNodeStoreTier: with a node store, turns whose context left the GPU
// (and a host-RAM tier too small to keep it) load it from the store
// instead of recomputing, every block the engines load was written by one
// of them, and the run's store is removed afterwards.
func TestNodeStoreTier(t *testing.T) {
	dir := t.TempDir()
	without := tieredRun(t, SimConfig{KVOffloadingGiB: -1})
	with := tieredRun(t, SimConfig{KVOffloadingGiB: -1, StoreDir: dir})
	if without.Summary.SSDCachedTokens != 0 {
		t.Errorf("a run without a store loaded %d tokens from one", without.Summary.SSDCachedTokens)
	}
	if with.Summary.SSDCachedTokens == 0 {
		t.Fatal("no turn loaded from the node store")
	}
	if with.Summary.PrefillTokens >= without.Summary.PrefillTokens {
		t.Errorf("prefill tokens with the store %d, without %d: the store must save prefill", with.Summary.PrefillTokens, without.Summary.PrefillTokens)
	}
	var loaded, stored int64
	for _, e := range with.Engines {
		loaded += e.DiskLoadedBlocks
		stored += e.DiskStoredBlocks
	}
	if loaded*16 < with.Summary.SSDCachedTokens || stored == 0 {
		t.Errorf("engines loaded %d blocks and stored %d for %d tokens served from the store", loaded, stored, with.Summary.SSDCachedTokens)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the run's store was left behind: %v", left)
	}
}

// TestRestartKeepsNodeStore: every engine restarts mid-run, losing its GPU
// and host-RAM caches. With the node store the next turns recompute almost
// none of their context; without it, most.
func TestRestartKeepsNodeStore(t *testing.T) {
	at := 40 * time.Second
	with := tieredRun(t, SimConfig{StoreDir: t.TempDir(), RestartAt: at})
	without := tieredRun(t, SimConfig{RestartAt: at})
	for name, run := range map[string]*SimRun{"with the store": with, "without": without} {
		if run.Restart == nil || run.Restart.Turns == 0 {
			t.Fatalf("%s: no session continued across the restart: %+v", name, run.Restart)
		}
	}
	if got := with.Restart.ReusedShare(); got < 0.9 {
		t.Errorf("with the store the turns after the restart reused %.2f of their context, want at least 0.9 (%+v)", got, with.Restart)
	}
	if with.Restart.SSDTokens == 0 {
		t.Error("no turn after the restart loaded from the store")
	}
	if got := without.Restart.ReusedShare(); got >= 0.9*with.Restart.ReusedShare() {
		t.Errorf("without the store the turns after the restart reused %.2f of their context: the restart lost nothing?", got)
	}
}
