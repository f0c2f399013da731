package kvbm

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestForeignPages: SGLang's page files at the store's root are held to
// what the store's own blocks leave of its capacity, oldest first, whatever
// their sizes (two engines of one model with different page sizes share a
// suffix); every page that goes is reported under ForeignSpace by SGLang's
// event hash; the store's own blocks and other files are left alone.
func TestForeignPages(t *testing.T) {
	dir := t.TempDir()
	const page = 1000
	old := time.Now().Add(-time.Hour)
	var hashes []uint64
	for i := range 6 {
		hashes = append(hashes, writeForeignPage(t, dir, i+1, page, old.Add(time.Duration(i)*time.Minute)))
	}
	// A smaller page of the same suffix, as old as the oldest: an engine
	// with a smaller page size. It is a page like the others.
	small := writeForeignPage(t, dir, 7, page/2, old.Add(30*time.Second))
	if err := os.WriteFile(filepath.Join(dir, "notes.bin"), []byte("not a page"), 0o644); err != nil {
		t.Fatal(err)
	}

	var reported []uint64
	// Room for the store's own block and five pages.
	st, err := OpenStore(StoreConfig{Dir: dir, CapacityBytes: HeaderSize + 100 + 5*page,
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
	want := []uint64{hashes[0], small} // the two oldest
	slices.Sort(want)
	slices.Sort(reported)
	if !slices.Equal(reported, want) {
		t.Errorf("reported %x, want %x", reported, want)
	}
	for i, h := range append(hashes, small) {
		_, err := os.Stat(filepath.Join(dir, foreignPageName(i+1)))
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
	if got := foreignStats(st); got.Blocks != 5 || got.Bytes != 5*page || got.EvictedBlocks != 2 || got.CorruptBlocks != 0 {
		t.Errorf("stats of SGLang's pages: %+v, want 5 held (%d bytes), 2 evicted", got, 5*page)
	}
}

// TestForeignTempFiles: SGLang writes a page to
// "<page>.bin.tmp.<pid>.<thread id>.<uuid hex>" and renames it onto the
// page. The temp file of a writer killed mid-write is counted against the
// capacity until a scan finds it older than staleTempAge and deletes it; a
// live writer's fresh temp file is counted and left alone, and settled
// pages make room for it.
func TestForeignTempFiles(t *testing.T) {
	dir := t.TempDir()
	const page = 1000
	old := time.Now().Add(-time.Hour)
	var hashes []uint64
	for i := range 4 {
		hashes = append(hashes, writeForeignPage(t, dir, i+1, page, old.Add(time.Duration(i)*time.Minute)))
	}
	killed := startForeignWriter(t, dir, 5, page/2)
	killed.kill(t)
	live := startForeignWriter(t, dir, 6, page/2)
	defer live.kill(t)
	// The killed writer died two minutes ago.
	then := time.Now().Add(-2 * staleTempAge)
	if err := os.Chtimes(killed.path, then, then); err != nil {
		t.Fatal(err)
	}

	var reported []uint64
	// Room for three pages and one write in progress.
	st, err := OpenStore(StoreConfig{Dir: dir, CapacityBytes: 3*page + page/2,
		OnEvict: func(_ string, h []uint64) { reported = append(reported, h...) }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := os.Stat(killed.path); !os.IsNotExist(err) {
		t.Errorf("the killed writer's temp file is still there: %v", err)
	}
	if _, err := os.Stat(live.path); err != nil {
		t.Errorf("the live writer's temp file was removed: %v", err)
	}
	if !slices.Equal(reported, hashes[:1]) {
		t.Errorf("evicted %x for the write in progress, want the oldest page %x", reported, hashes[:1])
	}
	if got := foreignStats(st); got.Blocks != 3 || got.Bytes != 3*page+page/2 {
		t.Errorf("stats of SGLang's pages: %+v, want 3 pages and the live write, %d bytes", got, 3*page+page/2)
	}
	if got := st.Stats().TempFilesRemoved; got != 1 {
		t.Errorf("TempFilesRemoved = %d, want 1", got)
	}
}

// foreignPageName is the file name of SGLang's i-th test page.
func foreignPageName(i int) string {
	return fmt.Sprintf("%016x%048x_Qwen-Qwen3-14B_0_1.bin", foreignPageHash(i), i)
}

func foreignPageHash(i int) uint64 { return uint64(i)<<40 | 0xabc }

// writeForeignPage writes SGLang's i-th test page with size bytes and the
// given mtime, and returns its event hash.
func writeForeignPage(t *testing.T, dir string, i, size int, at time.Time) uint64 {
	t.Helper()
	p := filepath.Join(dir, foreignPageName(i))
	if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
	return foreignPageHash(i)
}

func foreignStats(st *Store) SpaceStats {
	for _, sp := range st.Stats().Spaces {
		if sp.Name == ForeignSpace {
			return sp
		}
	}
	return SpaceStats{}
}

const foreignWriterEnv = "HEARTH_KVBM_FOREIGN_WRITER"

// foreignWriter is a child process writing one page as SGLang does, that
// stops halfway through and waits to be killed.
type foreignWriter struct {
	cmd  *exec.Cmd
	path string // its temp file
}

func startForeignWriter(t *testing.T, dir string, i, size int) *foreignWriter {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestForeignWriterChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%d", foreignWriterEnv, dir, foreignPageName(i), size))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("writer child: %v", err)
	}
	return &foreignWriter{cmd: cmd, path: strings.TrimSpace(line)}
}

func (w *foreignWriter) kill(t *testing.T) {
	if w.cmd.ProcessState != nil {
		return
	}
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Error(err)
	}
	w.cmd.Wait()
}

// TestForeignWriterChild is the writer startForeignWriter runs: it writes
// half of a page to SGLang's temp name for it, prints the name, and blocks.
func TestForeignWriterChild(t *testing.T) {
	arg := os.Getenv(foreignWriterEnv)
	if arg == "" {
		t.Skip("skipping: runs only as the child of TestForeignTempFiles")
	}
	parts := strings.Split(arg, ",")
	size, _ := strconv.Atoi(parts[2])
	// HiCacheFile.set: f"{tensor_path}.tmp.{os.getpid()}.{threading.get_ident()}.{uuid.uuid4().hex}"
	tmp := filepath.Join(parts[0], fmt.Sprintf("%s.tmp.%d.%d.%032x", parts[1], os.Getpid(), 139872345678912, rand.Uint64()))
	f, err := os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	fmt.Println(tmp)
	select {}
}

func TestIsForeignTemp(t *testing.T) {
	page := fmt.Sprintf("%064x", 1) + "_m_0_1.bin"
	uuid := "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name string
		ok   bool
	}{
		{page + ".tmp.4242.139872345678912." + uuid, true},
		{"." + uuid + ".tmp", true},
		{page, false},
		{page + ".tmp.4242.139872345678912." + uuid[1:], false},
		{page + ".tmp.4242." + uuid, false},
		{page + ".tmp.x.1." + uuid, false},
		{page + ".tmp.1.2." + strings.ToUpper(uuid), false},
		{fmt.Sprintf("%063x", 1) + ".bin.tmp.1.2." + uuid, false},
		{".0123.tmp", false},
		{"." + uuid + ".kv", false},
	}
	for _, tc := range tests {
		if got := isForeignTemp(tc.name); got != tc.ok {
			t.Errorf("isForeignTemp(%q) = %v", tc.name, got)
		}
	}
}

// FuzzForeignName: names read from the store's root never panic the
// parsers, and no name is both a page and a temp file.
func FuzzForeignName(f *testing.F) {
	f.Add(fmt.Sprintf("%064x", 1) + "_m_0_1.bin")
	f.Add(fmt.Sprintf("%064x", 1) + "_m_0_1.bin.tmp.1.2.0123456789abcdef0123456789abcdef")
	f.Add(".0123456789abcdef0123456789abcdef.tmp")
	f.Fuzz(func(t *testing.T, name string) {
		_, _, page := parseForeignName(name)
		if page && isForeignTemp(name) {
			t.Fatalf("%q is both a page and a temp file", name)
		}
	})
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
