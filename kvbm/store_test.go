package kvbm

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zeebo/xxh3"
)

// payloadFor is a block's deterministic content: never all zero, different
// per hash, so that a block read under the wrong name or with stale bytes
// shows.
func payloadFor(hash uint64, size int) []byte {
	b := make([]byte, size)
	x := hash ^ 0x9e3779b97f4a7c15
	for i := 0; i < size; i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		for j := 0; j < 8 && i+j < size; j++ {
			b[i+j] = byte(x>>(8*j)) | 1
		}
	}
	return b
}

func openTest(t testing.TB, dir string, capacity int64, mod ...func(*StoreConfig)) *Store {
	t.Helper()
	cfg := StoreConfig{Dir: dir, CapacityBytes: capacity, Logger: slog.New(slog.DiscardHandler)}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := OpenStore(cfg)
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// evictLog records OnEvict calls.
type evictLog struct {
	mu     sync.Mutex
	hashes map[string][]uint64
}

func (l *evictLog) record(space string, hs []uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hashes == nil {
		l.hashes = map[string][]uint64{}
	}
	l.hashes[space] = append(l.hashes[space], hs...)
}

func (l *evictLog) get(space string) []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.hashes[space])
}

func tempFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), ".") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return out
}

func TestHeaderRoundTrip(t *testing.T) {
	tests := []blockHeader{
		{hash: 0, length: 0, payloadSum: zeroSum(0)},
		{hash: 0xdeadbeefcafef00d, length: 2621440, payloadSum: 42},
		{hash: ^uint64(0), length: MaxBlockBytes, payloadSum: ^uint64(0)},
	}
	for _, h := range tests {
		var b [HeaderSize]byte
		h.encode(b[:])
		got, err := parseHeader(b[:])
		if err != nil || got != h {
			t.Errorf("parseHeader(encode(%+v)) = %+v, %v", h, got, err)
		}
	}
}

func TestZeroSumMatchesOneShotHash(t *testing.T) {
	for _, n := range []int64{0, 1, 64 << 10, 64<<10 + 3, 2621440} {
		if got, want := zeroSum(n), xxh3.Hash(make([]byte, n)); got != want {
			t.Errorf("zeroSum(%d) = %x, want %x", n, got, want)
		}
	}
}

func TestSanitizeSpaceName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"vllm-Qwen3-14B-b16", "vllm-Qwen3-14B-b16"},
		{"sglang/Qwen/Qwen3-14B b16", "sglang_Qwen_Qwen3-14B_b16"},
		{"..", "_."},
		{"", "_"},
		{"a.b_c", "a.b_c"},
		{strings.Repeat("x", 200), strings.Repeat("x", 128)},
	}
	for _, tc := range tests {
		if got := SanitizeSpaceName(tc.in); got != tc.want {
			t.Errorf("SanitizeSpaceName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPutGetRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		size    int
		sparse  bool
		hash    uint64
		wantDir string
	}{
		{"small", 100, false, 0x0123456789abcdef, "01"},
		{"empty", 0, false, 0xff00000000000001, "ff"},
		{"qwen3-14b block", 2621440, false, 0x8000000000000000, "80"},
		{"sparse", 2621440, true, 0x00000000000000aa, "00"},
	}
	dir := t.TempDir()
	s := openTest(t, dir, 1<<30)
	sp := s.Space("vllm-Qwen3-14B-b16")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := payloadFor(tc.hash, tc.size)
			var put []byte = want
			if tc.sparse {
				want, put = make([]byte, tc.size), nil
			}
			if err := sp.Put(tc.hash, int64(tc.size), put); err != nil {
				t.Fatalf("Put: %v", err)
			}
			if !sp.Has(tc.hash) {
				t.Fatal("Has = false after Put")
			}
			p := filepath.Join(dir, "vllm-Qwen3-14B-b16", tc.wantDir, blockFileName(tc.hash))
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatalf("block file: %v", err)
			}
			if fi.Size() != int64(HeaderSize+tc.size) {
				t.Errorf("file size %d, want %d", fi.Size(), HeaderSize+tc.size)
			}
			got, err := sp.Get(tc.hash, nil)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Error("Get returned other bytes than Put wrote")
			}
			// Get reuses dst when it has room.
			dst := make([]byte, 0, tc.size+10)
			got, err = sp.Get(tc.hash, dst)
			if err != nil || !bytes.Equal(got, want) || (tc.size > 0 && &got[0] != &dst[:1][0]) {
				t.Errorf("Get into dst: err %v, equal %v", err, bytes.Equal(got, want))
			}
		})
	}
	if _, err := sp.Get(0x42, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of an absent block: %v, want ErrNotFound", err)
	}
	if sp.Has(0x42) {
		t.Error("Has of an absent block")
	}
	if err := sp.Put(7, 10, make([]byte, 9)); err == nil {
		t.Error("Put with a payload shorter than size succeeded")
	}
	if got := tempFiles(t, dir); len(got) != 0 {
		t.Errorf("temp files left: %v", got)
	}
	st := s.Stats()
	if st.Total.Blocks != 4 || st.Total.Hits != 8 || st.Total.Misses != 1 || st.Total.Stores != 4 {
		t.Errorf("stats %+v", st.Total)
	}
	// The catalog survives a reopen.
	s2 := openTest(t, dir, 1<<30)
	for _, tc := range tests {
		if !s2.Space("vllm-Qwen3-14B-b16").Has(tc.hash) {
			t.Errorf("reopened store lacks %016x", tc.hash)
		}
	}
}

func TestSparsePutIsSparse(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, 1<<40)
	sp := s.Space("sparse")
	const size = 64 << 20
	if err := sp.Put(1, size, nil); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sp.path(1))
	if err != nil {
		t.Fatal(err)
	}
	allocated := fi.Sys().(*syscall.Stat_t).Blocks * 512
	if fi.Size() != HeaderSize+size || allocated > 1<<20 {
		t.Errorf("size %d, %d bytes allocated: want %d bytes in a sparse file", fi.Size(), allocated, HeaderSize+size)
	}
	got, err := sp.Get(1, nil)
	if err != nil || len(got) != size || !bytes.Equal(got[:4096], make([]byte, 4096)) {
		t.Errorf("Get of a sparse block: %d bytes, %v", len(got), err)
	}
}

func TestCapacityRespected(t *testing.T) {
	const size = 1000
	const block = HeaderSize + size
	tests := []struct {
		name     string
		capacity int64
		puts     int
		want     int
	}{
		{"fits", 10 * block, 10, 10},
		{"one over", 10 * block, 11, 10},
		{"many over", 10*block + block/2, 100, 10},
		{"one block", block, 5, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var ev evictLog
			s := openTest(t, dir, tc.capacity, func(c *StoreConfig) { c.OnEvict = ev.record })
			sp := s.Space("m")
			for i := range tc.puts {
				if err := sp.Put(uint64(i), size, payloadFor(uint64(i), size)); err != nil {
					t.Fatalf("Put %d: %v", i, err)
				}
				if st := s.Stats(); st.Total.Bytes > tc.capacity {
					t.Fatalf("after Put %d: %d bytes over capacity %d", i, st.Total.Bytes, tc.capacity)
				}
			}
			st := s.Stats()
			if st.Total.Blocks != int64(tc.want) || st.Total.EvictedBlocks != int64(tc.puts-tc.want) {
				t.Errorf("blocks %d evicted %d, want %d and %d", st.Total.Blocks, st.Total.EvictedBlocks, tc.want, tc.puts-tc.want)
			}
			// The oldest went first, and their files with them.
			var wantEvicted []uint64
			for i := range tc.puts - tc.want {
				wantEvicted = append(wantEvicted, uint64(i))
			}
			if got := ev.get("m"); !slices.Equal(got, wantEvicted) {
				t.Errorf("OnEvict got %v, want %v", got, wantEvicted)
			}
			for _, h := range wantEvicted {
				if _, err := os.Stat(sp.path(h)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("evicted block %d still on disk: %v", h, err)
				}
			}
		})
	}
	s := openTest(t, t.TempDir(), 100)
	if err := s.Space("m").Put(1, 100, nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Put of a block over capacity: %v, want ErrTooLarge", err)
	}
}

// TestEvictionOrder drives the segmented LRU through a script: "p" puts a
// block, "g" gets one; want is the catalog afterwards.
func TestEvictionOrder(t *testing.T) {
	const size = 1000
	const block = HeaderSize + size
	type op struct {
		kind string
		hash uint64
	}
	seq := func(kind string, from, to uint64) []op {
		var ops []op
		for h := from; h < to; h++ {
			ops = append(ops, op{kind, h})
		}
		return ops
	}
	cat := func(parts ...[]op) []op { return slices.Concat(parts...) }
	tests := []struct {
		name     string
		capacity int64
		ops      []op
		want     []uint64 // blocks present at the end
		gone     []uint64 // blocks evicted
	}{
		{
			name:     "plain LRU among one-off blocks",
			capacity: 3 * block,
			ops:      seq("p", 1, 6),
			want:     []uint64{3, 4, 5},
			gone:     []uint64{1, 2},
		},
		{
			name:     "a scan of one-off blocks does not evict a prefix used twice",
			capacity: 10 * block,
			ops:      cat(seq("p", 1, 4), seq("g", 1, 4), seq("p", 100, 200)),
			want:     []uint64{1, 2, 3, 193, 194, 195, 196, 197, 198, 199},
			gone:     []uint64{100, 150, 192},
		},
		{
			name:     "a repeated Put is a second use",
			capacity: 4 * block,
			ops:      cat(seq("p", 1, 3), seq("p", 1, 2), seq("p", 10, 20)),
			want:     []uint64{1, 17, 18, 19},
			gone:     []uint64{2, 10},
		},
		{
			name:     "the protected segment is capped and evicts LRU-first",
			capacity: 5 * block, // protected holds 4
			ops:      cat(seq("p", 1, 6), seq("g", 1, 6), seq("p", 10, 12)),
			// Getting 5 pushed 1 back to probation, where the
			// one-off blocks 10 and 11 then evicted it.
			want: []uint64{2, 3, 4, 5, 11},
			gone: []uint64{1, 10},
		},
		{
			name:     "probation empty: protected evicts its least recently used",
			capacity: 2 * block,
			ops:      []op{{"p", 1}, {"p", 2}, {"g", 1}, {"g", 2}, {"g", 1}, {"p", 3}},
			want:     []uint64{1, 3},
			gone:     []uint64{2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, t.TempDir(), tc.capacity)
			sp := s.Space("m")
			for _, o := range tc.ops {
				var err error
				if o.kind == "p" {
					err = sp.Put(o.hash, size, payloadFor(o.hash, size))
				} else {
					_, err = sp.Get(o.hash, nil)
				}
				if err != nil {
					t.Fatalf("%s %d: %v", o.kind, o.hash, err)
				}
			}
			for _, h := range tc.want {
				if !sp.Has(h) {
					t.Errorf("block %d was evicted", h)
				}
			}
			for _, h := range tc.gone {
				if sp.Has(h) {
					t.Errorf("block %d was kept", h)
				}
			}
			if got := s.Stats().Total.Blocks; got != int64(len(tc.want)) {
				t.Errorf("%d blocks, want %d", got, len(tc.want))
			}
		})
	}
}

func TestRemoveSpace(t *testing.T) {
	dir := t.TempDir()
	var ev evictLog
	s := openTest(t, dir, 1<<20, func(c *StoreConfig) { c.OnEvict = ev.record })
	a, b := s.Space("a"), s.Space("b")
	for h := range uint64(5) {
		for _, sp := range []*Space{a, b} {
			if err := sp.Put(h, 100, payloadFor(h, 100)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.RemoveSpace("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("space dir still there: %v", err)
	}
	for h := range uint64(5) {
		if a.Has(h) {
			t.Errorf("removed space has %d", h)
		}
		if _, err := a.Get(h, nil); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get %d in the removed space: %v", h, err)
		}
		if !b.Has(h) {
			t.Errorf("other space lost %d", h)
		}
	}
	st := s.Stats()
	if st.Total.Blocks != 5 || st.Total.Bytes != 5*(HeaderSize+100) {
		t.Errorf("after RemoveSpace: %+v", st.Total)
	}
	if got := ev.get("a"); len(got) != 0 {
		t.Errorf("RemoveSpace reported evictions: %v", got)
	}
	// The space stays usable.
	if err := a.Put(9, 10, nil); err != nil || !a.Has(9) {
		t.Errorf("Put after RemoveSpace: %v", err)
	}
	if err := s.RemoveSpace("never-there"); err != nil {
		t.Errorf("RemoveSpace of an unknown space: %v", err)
	}
}

func TestRescanAcrossStores(t *testing.T) {
	dir := t.TempDir()
	var ev evictLog
	writer := openTest(t, dir, 1<<20)
	reader := openTest(t, dir, 1<<20, func(c *StoreConfig) { c.OnEvict = ev.record })
	w, r := writer.Space("m"), reader.Space("m")

	if err := w.Put(1, 100, payloadFor(1, 100)); err != nil {
		t.Fatal(err)
	}
	if r.Has(1) {
		t.Fatal("reader saw the block before a Rescan")
	}
	if err := reader.Rescan(); err != nil {
		t.Fatal(err)
	}
	if !r.Has(1) {
		t.Fatal("reader does not see the block after Rescan")
	}
	if got, err := r.Get(1, nil); err != nil || !bytes.Equal(got, payloadFor(1, 100)) {
		t.Fatalf("reader's Get: %v", err)
	}
	// A Get of a block the catalog lacks still finds it on disk.
	if err := w.Put(2, 100, payloadFor(2, 100)); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Get(2, nil); err != nil || !bytes.Equal(got, payloadFor(2, 100)) || !r.Has(2) {
		t.Fatalf("reader's Get of an unscanned block: %v", err)
	}

	// A Put of a block another process wrote takes its file.
	if err := w.Put(5, 100, payloadFor(5, 100)); err != nil {
		t.Fatal(err)
	}
	if err := r.Put(5, 100, payloadFor(5, 100)); err != nil || !r.Has(5) {
		t.Fatalf("reader's Put of a block on disk: %v", err)
	}
	if st := reader.Stats().Total; st.Stores != 0 || st.WrittenBytes != 0 {
		t.Errorf("reader wrote a block already on disk: %+v", st)
	}

	// The writer's use of block 3 reaches the reader as a newer mtime:
	// the reader then keeps 3 over 4 when it must evict.
	// Their files are dated a minute back, so that the Get's touch is
	// newer whatever the file system's timestamp granularity.
	written := time.Now().Add(-time.Minute)
	for _, h := range []uint64{3, 4} {
		if err := w.Put(h, 100, payloadFor(h, 100)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(w.path(h), written, written); err != nil {
			t.Fatal(err)
		}
	}
	if err := reader.Rescan(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Get(3, nil); err != nil {
		t.Fatal(err)
	}
	if err := reader.Rescan(); err != nil {
		t.Fatal(err)
	}
	reader.mu.Lock()
	seg3, seg4 := r.blocks[3].seg, r.blocks[4].seg
	reader.mu.Unlock()
	if seg3 != segProtected || seg4 != segProbation {
		t.Errorf("after the writer's Get: block 3 in segment %d, 4 in %d; want protected, probation", seg3, seg4)
	}

	// One deletes, the other's Get says not found and drops it.
	if err := writer.RemoveSpace("m"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(1, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after another store deleted the block: %v, want ErrNotFound", err)
	}
	if r.Has(1) {
		t.Error("block deleted elsewhere still in the catalog after Get")
	}
	if err := reader.Rescan(); err != nil {
		t.Fatal(err)
	}
	if st := reader.Stats(); st.Total.Blocks != 0 || st.Total.Bytes != 0 {
		t.Errorf("after Rescan of an emptied dir: %+v", st.Total)
	}
	got := ev.get("m")
	slices.Sort(got)
	if !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) {
		t.Errorf("OnEvict reported %v, want the 5 vanished blocks", got)
	}
}

// corruption damages a block file in place.
type corruption struct {
	name   string
	damage func(t *testing.T, path string)
}

func flipByte(at int64) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var b [1]byte
		if _, err := f.ReadAt(b[:], at); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x40
		if _, err := f.WriteAt(b[:], at); err != nil {
			t.Fatal(err)
		}
	}
}

func truncateTo(n int64) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		if err := os.Truncate(path, n); err != nil {
			t.Fatal(err)
		}
	}
}

var corruptions = []corruption{
	{"truncated payload", truncateTo(HeaderSize + 500)},
	{"truncated header", truncateTo(10)},
	{"empty file", truncateTo(0)},
	{"grown file", truncateTo(HeaderSize + 1001)},
	{"flipped payload byte", flipByte(HeaderSize + 123)},
	{"flipped last payload byte", flipByte(HeaderSize + 999)},
	{"flipped magic byte", flipByte(1)},
	{"flipped hash byte", flipByte(9)},
	{"flipped length byte", flipByte(16)},
	{"flipped header checksum byte", flipByte(35)},
}

// TestCorruptBlockAtGet: damage after the catalog holds the block is caught
// by Get, which deletes the file and never returns the bytes.
func TestCorruptBlockAtGet(t *testing.T) {
	for _, tc := range corruptions {
		t.Run(tc.name, func(t *testing.T) {
			var ev evictLog
			s := openTest(t, t.TempDir(), 1<<20, func(c *StoreConfig) { c.OnEvict = ev.record })
			sp := s.Space("m")
			if err := sp.Put(5, 1000, payloadFor(5, 1000)); err != nil {
				t.Fatal(err)
			}
			tc.damage(t, sp.path(5))
			got, err := sp.Get(5, nil)
			if !errors.Is(err, ErrCorrupt) || got != nil {
				t.Fatalf("Get of a damaged block: %d bytes, %v; want ErrCorrupt", len(got), err)
			}
			if sp.Has(5) {
				t.Error("damaged block still in the catalog")
			}
			if _, err := os.Stat(sp.path(5)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("damaged file not deleted: %v", err)
			}
			if st := s.Stats().Total; st.CorruptBlocks != 1 || st.Blocks != 0 || st.Bytes != 0 {
				t.Errorf("stats %+v", st)
			}
			if got := ev.get("m"); !slices.Equal(got, []uint64{5}) {
				t.Errorf("OnEvict got %v", got)
			}
			if _, err := sp.Get(5, nil); !errors.Is(err, ErrNotFound) {
				t.Errorf("second Get: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestCorruptBlockAtOpen: a damaged header or size is caught by the scan of
// OpenStore; damaged payload bytes, which it does not read, by the first Get.
func TestCorruptBlockAtOpen(t *testing.T) {
	for _, tc := range corruptions {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, dir, 1<<20)
			sp := s.Space("m")
			for h := range uint64(3) {
				if err := sp.Put(h, 1000, payloadFor(h, 1000)); err != nil {
					t.Fatal(err)
				}
			}
			tc.damage(t, sp.path(1))
			s.Close()

			s2 := openTest(t, dir, 1<<20)
			sp2 := s2.Space("m")
			payloadOnly := strings.Contains(tc.name, "payload byte")
			if sp2.Has(1) != payloadOnly {
				t.Errorf("Has(damaged) = %v at open", sp2.Has(1))
			}
			got, err := sp2.Get(1, nil)
			if got != nil || err == nil {
				t.Fatalf("Get returned %d bytes of a damaged block", len(got))
			}
			if st := s2.Stats().Total; st.CorruptBlocks != 1 || st.Blocks != 2 {
				t.Errorf("stats %+v, want 1 corrupt and 2 blocks", st)
			}
			for _, h := range []uint64{0, 2} {
				if got, err := sp2.Get(h, nil); err != nil || !bytes.Equal(got, payloadFor(h, 1000)) {
					t.Errorf("intact block %d: %v", h, err)
				}
			}
		})
	}
}

func TestMisplacedAndForeignFiles(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, 1<<20)
	sp := s.Space("m")
	if err := sp.Put(0x1100000000000001, 100, payloadFor(1, 100)); err != nil {
		t.Fatal(err)
	}
	// A valid block renamed to another hash fails the header's hash check.
	other := sp.path(0x1100000000000002)
	if err := os.Link(sp.path(0x1100000000000001), other); err != nil {
		t.Fatal(err)
	}
	// Files that are not blocks are left alone.
	if err := os.WriteFile(filepath.Join(dir, "m", "11", "README"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Rescan(); err != nil {
		t.Fatal(err)
	}
	if sp.Has(0x1100000000000002) || s.Stats().Total.CorruptBlocks != 1 {
		t.Errorf("a block under another hash's name was accepted")
	}
	if _, err := os.Stat(filepath.Join(dir, "m", "11", "README")); err != nil {
		t.Errorf("foreign file: %v", err)
	}
}

func TestStaleTempFileRemoved(t *testing.T) {
	dir := t.TempDir()
	shard := filepath.Join(dir, "m", "ab")
	if err := os.MkdirAll(shard, 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(shard, ".ab00000000000001.123.x.tmp")
	young := filepath.Join(shard, ".ab00000000000002.123.y.tmp")
	for _, p := range []string{stale, young} {
		if err := os.WriteFile(p, payloadFor(1, 500), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * staleTempAge)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, dir, 1<<20)
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale temp file kept: %v", err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("young temp file (a write in progress) deleted: %v", err)
	}
	st := s.Stats()
	if st.TempFilesRemoved != 1 || st.Total.Blocks != 0 {
		t.Errorf("stats %+v", st)
	}
	if _, err := s.Space("m").Get(0xab00000000000001, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a torn write: %v, want ErrNotFound", err)
	}
}

func TestOpenEvictsOverCapacity(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, 1<<20)
	sp := s.Space("m")
	for h := range uint64(10) {
		if err := sp.Put(h, 100, nil); err != nil {
			t.Fatal(err)
		}
		// Distinct mtimes give the reopened store its LRU order.
		ts := time.Unix(1_700_000_000+int64(h), 0)
		if err := os.Chtimes(sp.path(h), ts, ts); err != nil {
			t.Fatal(err)
		}
	}
	var ev evictLog
	s2 := openTest(t, dir, 4*(HeaderSize+100), func(c *StoreConfig) { c.OnEvict = ev.record })
	if got := ev.get("m"); !slices.Equal(got, []uint64{0, 1, 2, 3, 4, 5}) {
		t.Errorf("evicted at open: %v, want the 6 oldest", got)
	}
	if st := s2.Stats().Total; st.Blocks != 4 {
		t.Errorf("%d blocks after open", st.Blocks)
	}
}

func TestClosedStore(t *testing.T) {
	s := openTest(t, t.TempDir(), 1<<20)
	sp := s.Space("m")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sp.Put(1, 1, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}
	if _, err := sp.Get(1, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
}

func TestDefaultCapacity(t *testing.T) {
	dir := t.TempDir()
	c, err := DefaultCapacity(dir)
	free, ferr := freeBytes(dir)
	if ferr != nil {
		t.Fatal(ferr)
	}
	switch {
	case free/10 < MinDefaultCapacity:
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("DefaultCapacity with %d free: %d, %v; want ENOSPC", free, c, err)
		}
	case err != nil:
		t.Fatal(err)
	case c > MaxDefaultCapacity || c < MinDefaultCapacity || (free/10 < MaxDefaultCapacity && absDiff(c, free/10) > free/100):
		t.Errorf("DefaultCapacity = %d with %d free", c, free)
	}
	if _, err := DefaultCapacity(filepath.Join(dir, "missing")); err == nil {
		t.Error("DefaultCapacity of a missing dir succeeded")
	}
}

func absDiff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}

// TestConcurrentUse runs Puts, Gets, Has and Rescans together (for -race)
// and then checks every block still present reads back intact.
func TestConcurrentUse(t *testing.T) {
	dir := t.TempDir()
	const size = 4096
	s := openTest(t, dir, 40*(HeaderSize+size))
	other := openTest(t, dir, 40*(HeaderSize+size))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			st := s
			if w%2 == 1 {
				st = other
			}
			sp := st.Space("m")
			buf := make([]byte, size)
			for i := range 300 {
				h := uint64((i*7 + w*13) % 97)
				switch i % 4 {
				case 0, 1:
					if err := sp.Put(h, size, payloadFor(h, size)); err != nil {
						t.Errorf("Put: %v", err)
					}
				case 2:
					got, err := sp.Get(h, buf)
					if err == nil && !bytes.Equal(got, payloadFor(h, size)) {
						t.Errorf("Get %d returned wrong bytes", h)
					} else if err != nil && !errors.Is(err, ErrNotFound) {
						t.Errorf("Get: %v", err)
					}
				case 3:
					sp.Has(h)
					if i%40 == 3 {
						if err := st.Rescan(); err != nil {
							t.Errorf("Rescan: %v", err)
						}
					}
				}
			}
		})
	}
	wg.Wait()
	if got := tempFiles(t, dir); len(got) != 0 {
		t.Errorf("temp files left: %v", got)
	}
	for _, st := range []*Store{s, other} {
		if c := st.Stats().Total.CorruptBlocks; c != 0 {
			t.Errorf("%d corrupt blocks", c)
		}
		if b := st.Stats().Total.Bytes; b > st.Capacity() {
			t.Errorf("%d bytes over capacity %d", b, st.Capacity())
		}
	}
}

// TestRescanContextGivesUp: a rescan whose context has ended stops before it
// enters what other processes wrote, and drops nothing on the strength of a
// walk it did not finish; the next rescan does the work.
func TestRescanContextGivesUp(t *testing.T) {
	dir := t.TempDir()
	writer := openTest(t, dir, 1<<20)
	reader := openTest(t, dir, 1<<20)
	w, r := writer.Space("m"), reader.Space("m")
	if err := r.Put(9, 100, payloadFor(9, 100)); err != nil {
		t.Fatal(err)
	}
	for h := uint64(1); h <= 3; h++ {
		if err := w.Put(h<<56|h, 100, payloadFor(h, 100)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := reader.RescanContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("RescanContext after cancel: %v, want context.Canceled", err)
	}
	if r.Has(1<<56|1) || !r.Has(9) {
		t.Fatalf("a cancelled rescan changed the catalog: has 1: %v, has 9: %v", r.Has(1<<56|1), r.Has(9))
	}
	if err := reader.RescanContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	for h := uint64(1); h <= 3; h++ {
		if !r.Has(h<<56 | h) {
			t.Errorf("block %d not entered by the next rescan", h)
		}
	}
}
