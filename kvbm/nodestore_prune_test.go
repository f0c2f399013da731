package kvbm

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// TestEngineStorePrunesForgetEvictedBlocks: an engine process evicts
// nothing itself; the daemon's store deletes the files. Without rescans the
// engine's catalog kept an entry for every block it ever wrote (and would
// not write one of them again); RunPrunes keeps it to what is on disk.
func TestEngineStorePrunesForgetEvictedBlocks(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	engine := openTest(t, dir, EngineStoreCapacity, func(c *StoreConfig) { c.Clock = clk })
	daemon := openTest(t, dir, 10*(HeaderSize+100))
	sp := engine.Space("m")
	const written = 200
	for h := uint64(1); h <= written; h++ {
		if err := sp.Put(h, 100, payloadFor(h, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := daemon.Rescan(); err != nil { // enters the engine's files, evicts to 10
		t.Fatal(err)
	}
	onDisk := countBlockFiles(t, dir)
	if onDisk > 10 {
		t.Fatalf("%d block files after the daemon's eviction, want at most 10", onDisk)
	}
	if _, err := os.Stat(sp.path(1)); !os.IsNotExist(err) {
		t.Fatalf("block 1, the oldest, is still on disk (%v)", err)
	}
	if got := engine.Stats().Total.Blocks; got != written {
		t.Fatalf("before a prune the engine's catalog holds %d blocks, want all %d it wrote", got, written)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- engine.RunPrunes(ctx, EnginePruneEvery) }()
	deadline := time.Now().Add(10 * time.Second)
	for engine.Stats().Total.Blocks > int64(onDisk) && time.Now().Before(deadline) {
		clk.Advance(EnginePruneEvery)
		time.Sleep(5 * time.Millisecond)
	}
	if got := engine.Stats().Total.Blocks; got != int64(onDisk) {
		t.Errorf("after prunes the engine's catalog holds %d blocks, want the %d on disk", got, onDisk)
	}
	// A block the daemon evicted is written again, not taken for stored.
	if err := sp.Put(1, 100, payloadFor(1, 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sp.path(1)); err != nil {
		t.Errorf("block 1 was not written again after its eviction: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("RunPrunes: %v", err)
	}
}

func countBlockFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".kv" {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
