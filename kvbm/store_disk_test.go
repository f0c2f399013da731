package kvbm

import (
	"errors"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFullDisk fills a 4 MiB tmpfs: the Put that does not fit fails with
// ENOSPC and leaves neither a temp file nor a catalog entry, and a store
// whose capacity fits the disk then keeps working by evicting.
func TestFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("skipping: cannot mount a 4 MiB tmpfs on %s (needs root): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	const size = 256 << 10
	s := openTest(t, dir, 1<<30)
	sp := s.Space("m")
	var full error
	var stored uint64
	for h := uint64(1); h < 100; h++ {
		before := s.Stats().Total
		if err := sp.Put(h, size, payloadFor(h, size)); err != nil {
			full = err
			if sp.Has(h) {
				t.Error("the failed block is in the catalog")
			}
			after := s.Stats().Total
			if after.Blocks != before.Blocks || after.Bytes != before.Bytes || after.Stores != before.Stores {
				t.Errorf("catalog changed by a failed Put: %+v, was %+v", after, before)
			}
			break
		}
		stored = h
	}
	if !errors.Is(full, syscall.ENOSPC) {
		t.Fatalf("filling 4 MiB with %d KiB blocks: %v; want an error wrapping ENOSPC", size>>10, full)
	}
	t.Logf("%d blocks stored before: %v", stored, full)
	if got := tempFiles(t, dir); len(got) != 0 {
		t.Errorf("temp files left after ENOSPC: %v", got)
	}
	if stored == 0 || s.Stats().Total.Blocks != int64(stored) {
		t.Errorf("%d blocks in the catalog, %d stored", s.Stats().Total.Blocks, stored)
	}
	for h := uint64(1); h <= stored; h++ {
		if _, err := sp.Get(h, nil); err != nil {
			t.Errorf("block %d after ENOSPC: %v", h, err)
		}
	}
	s.Close()

	// A store sized to the disk evicts instead of failing.
	fit := openTest(t, dir, 3<<20)
	fsp := fit.Space("m")
	for h := uint64(1000); h < 1040; h++ {
		if err := fsp.Put(h, size, payloadFor(h, size)); err != nil {
			t.Fatalf("Put %d in a store that fits the disk: %v", h, err)
		}
	}
	st := fit.Stats().Total
	if st.Bytes > 3<<20 || st.EvictedBlocks == 0 || !fsp.Has(1039) {
		t.Errorf("store sized to the disk: %+v", st)
	}
	if _, err := DefaultCapacity(dir); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("DefaultCapacity of a 4 MiB disk: %v, want ENOSPC", err)
	}
}
