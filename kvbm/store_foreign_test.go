package kvbm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestForeignPages: SGLang's page files at the store's root are held to
// what the store's own blocks leave of its capacity, oldest first; a page
// shorter than its suffix's others is deleted once its write is over; every
// page that goes is reported under ForeignSpace by SGLang's event hash; the
// store's own blocks and other files are left alone.
func TestForeignPages(t *testing.T) {
	dir := t.TempDir()
	const page = 1000
	suffix := "_Qwen-Qwen3-14B_0_1"
	name := func(i int) (string, uint64) {
		hash := fmt.Sprintf("%016x", uint64(i)<<40|0xabc)
		return fmt.Sprintf("%s%048x%s.bin", hash, i, suffix), uint64(i)<<40 | 0xabc
	}
	old := time.Now().Add(-time.Hour)
	write := func(i, size int, at time.Time) uint64 {
		n, h := name(i)
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
		return h
	}
	var hashes []uint64
	for i := range 6 {
		hashes = append(hashes, write(i+1, page, old.Add(time.Duration(i)*time.Minute)))
	}
	torn := write(7, page/2, old)
	inProgress := write(8, page/3, time.Now()) // a write still going on
	if err := os.WriteFile(filepath.Join(dir, "notes.bin"), []byte("not a page"), 0o644); err != nil {
		t.Fatal(err)
	}

	var reported []uint64
	// Room for the store's own block and four pages.
	st, err := OpenStore(StoreConfig{Dir: dir, CapacityBytes: HeaderSize + 100 + 4*page + page/3,
		OnEvict: func(space string, h []uint64) {
			if space != ForeignSpace {
				t.Errorf("evicted from %q", space)
			}
			reported = append(reported, h...)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Space("vllm-m-b16").Store(1, 100); err != nil {
		t.Fatal(err)
	}
	if err := st.Rescan(); err != nil {
		t.Fatal(err)
	}
	want := []uint64{torn, hashes[0], hashes[1]} // the torn page, then the two oldest
	slices.Sort(want)
	slices.Sort(reported)
	if !slices.Equal(reported, want) {
		t.Errorf("reported %x, want %x", reported, want)
	}
	for i, h := range append(hashes, inProgress) {
		n, _ := name(i + 1)
		if i == 6 {
			n, _ = name(8)
		}
		_, err := os.Stat(filepath.Join(dir, n))
		if gone := slices.Contains(want, h); gone != os.IsNotExist(err) {
			t.Errorf("page %d: gone %v, stat %v", i+1, gone, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.bin")); err != nil {
		t.Errorf("a file that is no page was touched: %v", err)
	}
	if !st.Space("vllm-m-b16").Has(1) {
		t.Error("the store's own block was evicted for SGLang's pages")
	}
	var got SpaceStats
	for _, sp := range st.Stats().Spaces {
		if sp.Name == ForeignSpace {
			got = sp
		}
	}
	if got.Blocks != 5 || got.EvictedBlocks != 2 || got.CorruptBlocks != 1 {
		t.Errorf("stats of SGLang's pages: %+v, want 5 held, 2 evicted, 1 torn", got)
	}
}

func TestParseForeignName(t *testing.T) {
	tests := []struct {
		name   string
		ok     bool
		hash   uint64
		suffix string
	}{
		{"00000000000000ff" + fmt.Sprintf("%048x", 0) + "_m_0_1.bin", true, 0xff, "_m_0_1"},
		{fmt.Sprintf("%064x", 1) + ".bin", true, 0, ""},
		{fmt.Sprintf("%063x", 1) + ".bin", false, 0, ""},
		{fmt.Sprintf("%064X", 0xab) + ".bin", false, 0, ""},
		{fmt.Sprintf("%064x", 1) + ".kv", false, 0, ""},
	}
	for _, tc := range tests {
		h, suffix, ok := parseForeignName(tc.name)
		if ok != tc.ok || ok && (h != tc.hash || suffix != tc.suffix) {
			t.Errorf("parseForeignName(%q) = %x, %q, %v", tc.name, h, suffix, ok)
		}
	}
}
