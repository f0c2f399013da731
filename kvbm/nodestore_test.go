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

func openTestEngineSpace(t *testing.T, dir, space, writer string) *EngineSpace {
	t.Helper()
	e, err := OpenEngineSpace(dir, space, writer, slog.New(slog.DiscardHandler))
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
		es[i] = openTestEngineSpace(t, dir, space, "")
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
			n.Written("", space, hashes)
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
		es[i] = openTestEngineSpace(t, dir, space, "")
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
			n.Written("", space, hashes)
		}
		if err := n.takeWritten(context.Background()); err != nil {
			t.Fatal(err)
		}
		clk.Advance(50 * time.Millisecond)
	}
	// A pause, then one block a step: the room kept is one step's.
	for range 40 {
		clk.Advance(2 * writeReserveWindow)
		n.Written("", space, write(es[0], 1))
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
	e := openTestEngineSpace(t, dir, space, "")
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
	n.Written("", space, hashes)
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
	e := openTestEngineSpace(t, dir, space, "")
	for h := uint64(1); h <= 10; h++ {
		if err := e.Store(h, payload); err != nil {
			t.Fatal(err)
		}
	}
	n.Written("", space, make([]uint64, maxPendingWrites+1))
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
	e := openTestEngineSpace(t, dir, space, "")
	for h := uint64(1); h <= 3; h++ {
		if err := e.Store(h, payload); err != nil {
			t.Fatal(err)
		}
	}
	n.Written("", space, []uint64{1, 2, 3})
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

// TestNodeStoreGrantsBoundAStepsWrites: four engines each write a step of
// up to 512 blocks before they announce any of it, as the engines' KV
// events do. Holding each writer to its grant keeps the files on disk
// within the capacity at every moment between announcements; without
// grants the first step alone wrote 2,048 blocks into a store of 256. The
// writers still get their blocks written: a refused block is written at
// a later step.
func TestNodeStoreGrantsBoundAStepsWrites(t *testing.T) {
	t.Parallel()
	const (
		space      = "vllm-m-b16"
		payload    = 4096
		blockBytes = HeaderSize + payload
		capBlocks  = 256
		engines    = 4
		perStep    = 512
		steps      = 12
	)
	dir := t.TempDir()
	n := openTestNodeStore(t, dir, capBlocks*blockBytes, clock.NewFake(time.Unix(1_700_000_000, 0)))
	var es [engines]*EngineSpace
	names := [engines]string{"e0", "e1", "e2", "e3"}
	for i := range es {
		if err := n.AddWriter(names[i]); err != nil {
			t.Fatal(err)
		}
		es[i] = openTestEngineSpace(t, dir, space, names[i])
	}
	next := [engines]uint64{}
	written := 0
	for step := range steps {
		announced := make([][]uint64, engines)
		for i, e := range es {
			for range perStep {
				h := uint64(i+1)<<56 | next[i]
				err := e.Store(h, payload)
				if errors.Is(err, ErrNoGrant) {
					break // the step's other blocks wait for a later step
				}
				if err != nil {
					t.Fatal(err)
				}
				next[i]++
				written++
				announced[i] = append(announced[i], h)
			}
			if files := countBlockFiles(t, dir); files > capBlocks {
				t.Fatalf("step %d, engine %d: %d block files on disk before the engines announced them, capacity %d blocks",
					step, i, files, capBlocks)
			}
		}
		for i, hashes := range announced {
			n.Written(names[i], space, hashes)
		}
		if err := n.takeWritten(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// Each writer's grant is capBlocks/8/4 = 8 blocks a step.
	if want := steps * engines * capBlocks / grantShare / engines; written < want {
		t.Errorf("%d blocks written over %d steps, want at least %d (every grant used)", written, steps, want)
	}
	if files := countBlockFiles(t, dir); files < capBlocks-capBlocks/grantShare-engines {
		t.Errorf("%d block files at the end: the store keeps more room than its writers' grants", files)
	}
}

// TestEngineSpaceWithoutGrantWritesNothing: a writer whose daemon has not
// granted it a budget writes nothing; once granted it writes its budget,
// and a daemon that starts counting again (restarted) leaves the writer's
// unannounced blocks counted.
func TestEngineSpaceWithoutGrantWritesNothing(t *testing.T) {
	t.Parallel()
	const space, payload = "vllm-m-b16", 100
	dir := t.TempDir()
	e := openTestEngineSpace(t, dir, space, "e0")
	if err := e.Store(1, payload); !errors.Is(err, ErrNoGrant) {
		t.Fatalf("Store before any grant: %v, want ErrNoGrant", err)
	}
	if err := writeGrant(dir, "e0", grant{announced: 0, budget: 2 * (HeaderSize + payload)}); err != nil {
		t.Fatal(err)
	}
	for h := uint64(1); h <= 2; h++ {
		if err := e.Store(h, payload); err != nil {
			t.Fatalf("Store %d within the grant: %v", h, err)
		}
	}
	if err := e.Store(3, payload); !errors.Is(err, ErrNoGrant) {
		t.Fatalf("Store past the grant: %v, want ErrNoGrant", err)
	}
	if err := writeGrant(dir, "e0", grant{announced: 1, budget: 2 * (HeaderSize + payload)}); err != nil {
		t.Fatal(err)
	}
	if err := e.Store(3, payload); err != nil {
		t.Fatalf("Store after one block was taken in: %v", err)
	}
	// A daemon counting from zero: two blocks are still outstanding.
	if err := writeGrant(dir, "e0", grant{announced: 0, budget: 2 * (HeaderSize + payload)}); err != nil {
		t.Fatal(err)
	}
	if err := e.Store(4, payload); !errors.Is(err, ErrNoGrant) {
		t.Fatalf("Store after the daemon's count went down: %v, want ErrNoGrant", err)
	}
}

func FuzzParseGrant(f *testing.F) {
	f.Add(grant{announced: 12, budget: 4096}.encode())
	f.Add([]byte("hearth-kv-grant 1\nannounced -1\nbudget 3\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := parseGrant(b)
		if err != nil {
			return
		}
		if g.announced < 0 || g.budget < 0 {
			t.Fatalf("negative grant %+v from %q", g, b)
		}
		if again, err := parseGrant(g.encode()); err != nil || again != g {
			t.Fatalf("grant %+v encodes to %q, parsed as %+v, %v", g, g.encode(), again, err)
		}
	})
}
