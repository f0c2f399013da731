package kvbm

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

func openTestNodeStore(t *testing.T, dir string, capacity int64, clk clock.Clock) *NodeStore {
	t.Helper()
	n, err := openNodeStore("node", StoreConfig{Dir: dir, CapacityBytes: capacity, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func openTestEngineSpace(t *testing.T, dir, space string) *EngineSpace {
	t.Helper()
	e, err := OpenEngineSpace(dir, space, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestNodeStoreHoldsItsCapacityWithoutWalking: four engine processes write
// blocks far faster than the daemon walks the directory (its clock never
// moves, so no walk runs at all), and announce them as their KV events do.
// The store stays within its capacity after every round, its catalog
// holds what is on disk, and every block that left was reported. A store
// that learns of other processes' blocks only by walking (before
// NodeStore.Written) held every block ever written.
func TestNodeStoreHoldsItsCapacityWithoutWalking(t *testing.T) {
	const (
		space      = "vllm-m-b16"
		payload    = 4096
		capBlocks  = 16
		engines    = 4
		rounds     = 25
		perRound   = 20 // blocks per engine per round
		blockBytes = HeaderSize + payload
	)
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	n := openTestNodeStore(t, dir, capBlocks*blockBytes, clk)
	var evicted evictLog
	n.TellEvictions(evicted.record)
	var es [engines]*EngineSpace
	for i := range es {
		es[i] = openTestEngineSpace(t, dir, space)
	}

	next := uint64(1)
	for round := range rounds {
		for _, e := range es {
			hashes := make([]uint64, 0, perRound)
			for range perRound {
				h := next * 0x9e3779b97f4a7c15
				next++
				if err := e.Store(h, payload); err != nil {
					t.Fatal(err)
				}
				hashes = append(hashes, h)
			}
			n.Written(space, hashes)
		}
		if err := n.takeWritten(context.Background()); err != nil {
			t.Fatal(err)
		}
		files := countBlockFiles(t, dir)
		if files*blockBytes > capBlocks*blockBytes {
			t.Fatalf("round %d: %d block files on disk (%d bytes), capacity %d blocks", round, files, files*blockBytes, capBlocks)
		}
		if got := n.Stats().Total.Blocks; got != int64(files) {
			t.Fatalf("round %d: the catalog holds %d blocks, the disk %d", round, got, files)
		}
	}
	written := int(next - 1)
	if got, want := len(evicted.get(space)), written-countBlockFiles(t, dir); got != want {
		t.Errorf("%d blocks reported gone, want the %d written and no longer on disk", got, want)
	}
}

// TestNodeStoreKeepsRoomForUnannouncedWrites: engines announce a step's
// blocks after writing them, so the files on disk between two
// announcements are what the store holds plus what was written since. The
// store keeps room for a window's writes, so that sum stays within the
// capacity while the engines write steadily; and once they pause, the
// room shrinks to what they write then, so a slow writer fills the store.
func TestNodeStoreKeepsRoomForUnannouncedWrites(t *testing.T) {
	const (
		space      = "vllm-m-b16"
		payload    = 4096
		blockBytes = HeaderSize + payload
		capBlocks  = 32
		engines    = 4
		perStep    = 4 // blocks per engine per step
	)
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	n := openTestNodeStore(t, dir, capBlocks*blockBytes, clk)
	var es [engines]*EngineSpace
	for i := range es {
		es[i] = openTestEngineSpace(t, dir, space)
	}
	next := uint64(1)
	write := func(e *EngineSpace, blocks int) []uint64 {
		hashes := make([]uint64, 0, blocks)
		for range blocks {
			h := next * 0x9e3779b97f4a7c15
			next++
			if err := e.Store(h, payload); err != nil {
				t.Fatal(err)
			}
			hashes = append(hashes, h)
		}
		return hashes
	}
	for step := range 30 {
		announced := make([][]uint64, engines)
		for i, e := range es {
			announced[i] = write(e, perStep)
		}
		if files := countBlockFiles(t, dir); files > capBlocks {
			t.Fatalf("step %d: %d block files on disk before the engines announced them, capacity %d blocks", step, files, capBlocks)
		}
		for _, hashes := range announced {
			n.Written(space, hashes)
		}
		if err := n.takeWritten(context.Background()); err != nil {
			t.Fatal(err)
		}
		clk.Advance(50 * time.Millisecond)
	}
	// A pause, then one block a step: the room kept is one step's.
	for range 40 {
		clk.Advance(2 * writeReserveWindow)
		n.Written(space, write(es[0], 1))
		if err := n.takeWritten(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := countBlockFiles(t, dir), capBlocks-1; got != want {
		t.Errorf("after a slow writer, %d block files, want %d (room for one more)", got, want)
	}
}

// TestNodeStoreRunTakesInAnnouncedBlocks: Run takes in what Written
// announces without any tick of its clock.
func TestNodeStoreRunTakesInAnnouncedBlocks(t *testing.T) {
	const space, payload = "vllm-m-b16", 100
	dir := t.TempDir()
	n := openTestNodeStore(t, dir, 4*(HeaderSize+payload), clock.NewFake(time.Unix(1_700_000_000, 0)))
	e := openTestEngineSpace(t, dir, space)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var hashes []uint64
	for h := uint64(1); h <= 10; h++ {
		if err := e.Store(h, payload); err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	n.Written(space, hashes)
	deadline := time.Now().Add(10 * time.Second)
	for countBlockFiles(t, dir) > 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// Ten blocks at once: the store keeps room for as many again, at most
	// half its capacity.
	if got := countBlockFiles(t, dir); got != 2 {
		t.Errorf("%d block files after Run took the announcement in, want half the capacity's 4", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestNodeStoreWrittenOverflowWalks: announcements past maxPendingWrites
// are dropped, and the next turn walks the directory instead, so that no
// block written is left out.
func TestNodeStoreWrittenOverflowWalks(t *testing.T) {
	const space, payload = "vllm-m-b16", 100
	dir := t.TempDir()
	n := openTestNodeStore(t, dir, 4*(HeaderSize+payload), clock.NewFake(time.Unix(1_700_000_000, 0)))
	e := openTestEngineSpace(t, dir, space)
	for h := uint64(1); h <= 10; h++ {
		if err := e.Store(h, payload); err != nil {
			t.Fatal(err)
		}
	}
	n.Written(space, make([]uint64, maxPendingWrites+1))
	if err := n.takeWritten(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := countBlockFiles(t, dir); got != 4 {
		t.Errorf("%d block files after an overflow, want the capacity's 4 (a walk)", got)
	}
	n.pmu.Lock()
	defer n.pmu.Unlock()
	if n.npending != 0 || len(n.pending) != 0 || n.overflow {
		t.Errorf("after the turn %d blocks pending, overflow %v; want none", n.npending, n.overflow)
	}
}

// TestEvictionGivesOthersUsesASecondChance: a block another process read
// (its Get touched the file) is not the next evicted, though this store
// never saw the use and no rescan ran; a block whose file is gone leaves
// without counting as evicted.
func TestEvictionGivesOthersUsesASecondChance(t *testing.T) {
	const payload = 100
	dir := t.TempDir()
	s := openTest(t, dir, 3*(HeaderSize+payload))
	sp := s.Space("m")
	for h := uint64(1); h <= 3; h++ {
		if err := sp.Put(h, payload, payloadFor(h, payload)); err != nil {
			t.Fatal(err)
		}
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(sp.path(1), later, later); err != nil { // another process's Get
		t.Fatal(err)
	}
	if err := sp.Put(4, payload, payloadFor(4, payload)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sp.path(1)); err != nil {
		t.Errorf("block 1, used by another process, was evicted: %v", err)
	}
	if _, err := os.Stat(sp.path(2)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("block 2, the least recently used, is still there (%v)", err)
	}
	if err := os.Remove(sp.path(3)); err != nil { // deleted by another process
		t.Fatal(err)
	}
	if err := sp.Put(5, payload, payloadFor(5, payload)); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Total.EvictedBlocks; got != 1 {
		t.Errorf("%d blocks counted evicted, want 1 (block 2; block 3's file was gone)", got)
	}
	if !sp.Has(1) || !sp.Has(4) || !sp.Has(5) || sp.Has(3) {
		t.Errorf("catalog: 1 %v, 3 %v, 4 %v, 5 %v; want 1, 4 and 5 alone", sp.Has(1), sp.Has(3), sp.Has(4), sp.Has(5))
	}
}

// TestEngineSpaceKeepsNoCatalog: an engine's space asks the files, so a
// block the daemon evicted is not taken for stored and is written again,
// and a damaged block is deleted rather than loaded.
func TestEngineSpaceKeepsNoCatalog(t *testing.T) {
	const space, payload = "vllm-m-b16", 100
	dir := t.TempDir()
	n := openTestNodeStore(t, dir, 2*(HeaderSize+payload), nil)
	e := openTestEngineSpace(t, dir, space)
	for h := uint64(1); h <= 3; h++ {
		if err := e.Store(h, payload); err != nil {
			t.Fatal(err)
		}
	}
	n.Written(space, []uint64{1, 2, 3})
	if err := n.takeWritten(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e.Has(1) {
		t.Fatal("block 1, evicted by the daemon, is still reported stored")
	}
	if err := e.Load(1, payload); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load of an evicted block: %v, want ErrNotFound", err)
	}
	if err := e.Store(1, payload); err != nil {
		t.Fatal(err)
	}
	if !e.Has(1) {
		t.Error("block 1 was not written again")
	}
	if err := e.Load(1, payload); err != nil {
		t.Errorf("Load of block 1: %v", err)
	}
	if err := e.Load(1, payload+1); err == nil {
		t.Error("Load of block 1 at another size succeeded")
	}
	if err := os.WriteFile(e.sp.path(3), []byte("not a block, but long enough to pass for a header at a glance"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.Load(3, payload); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Load of a damaged block: %v, want ErrCorrupt", err)
	}
	if _, err := os.Stat(e.sp.path(3)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the damaged block's file is still there (%v)", err)
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
