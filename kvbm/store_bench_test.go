package kvbm

import (
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// qwen3Block is the KV block of 16 tokens of Qwen3-14B in bf16: 40 layers ×
// 2 (K and V) × 8 KV heads × 128 dims × 2 bytes × 16 tokens.
const qwen3Block = 40 * 2 * 8 * 128 * 2 * 16

func BenchmarkSpaceHas(b *testing.B) {
	const blocks = 1 << 20
	s := openTest(b, b.TempDir(), 1<<50)
	sp := s.Space("m")
	// The catalog is filled directly: a million files would measure the
	// disk, not the lookup.
	s.mu.Lock()
	for i := range uint64(blocks) {
		e := s.insertLocked(sp, tortureHash(i), qwen3Block, 0)
		s.used += e.bytes()
	}
	s.mu.Unlock()
	b.ReportAllocs()
	b.ResetTimer()
	hits := 0
	for i := 0; i < b.N; i++ {
		// Half the lookups hit (even i), half miss.
		h := tortureHash(uint64(i>>1) % blocks)
		if i&1 == 1 {
			h++
		}
		if sp.Has(h) {
			hits++
		}
	}
	b.StopTimer()
	if want := (b.N + 1) / 2; hits != want {
		b.Fatalf("%d hits, want %d", hits, want)
	}
}

// diskFigures is the disk's own sequential throughput in MB/s (1e6 bytes),
// measured once per run with dd and direct I/O beside the benchmarks' files.
type diskFigures struct {
	writeMBps, readMBps float64
	skip                string // why there are no figures
}

var (
	diskOnce sync.Once
	disk     diskFigures
)

func measureDisk() diskFigures {
	diskOnce.Do(func() { disk = runDD() })
	return disk
}

func runDD() diskFigures {
	dd, err := exec.LookPath("dd")
	if err != nil {
		return diskFigures{skip: "dd is not on PATH"}
	}
	dir, err := os.MkdirTemp("", "kvbm-dd-")
	if err != nil {
		return diskFigures{skip: err.Error()}
	}
	defer os.RemoveAll(dir)
	const count = 205 // × 2.5 MiB ≈ 512 MiB
	// The source is random bytes in the page cache, so dd's write is not
	// of zeros, which some devices handle faster.
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	chunk := make([]byte, qwen3Block)
	f, err := os.Create(src)
	if err != nil {
		return diskFigures{skip: err.Error()}
	}
	for range count {
		_, _ = rand.Read(chunk)
		if _, err := f.Write(chunk); err != nil {
			f.Close()
			return diskFigures{skip: err.Error()}
		}
	}
	f.Close()
	run := func(args ...string) (float64, error) {
		start := time.Now()
		out, err := exec.Command(dd, args...).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("dd %v: %v: %s", args, err, out)
		}
		return float64(count*qwen3Block) / time.Since(start).Seconds() / 1e6, nil
	}
	w, err := run("if="+src, "of="+dst, "bs=2560k", fmt.Sprint("count=", count), "oflag=direct", "conv=fsync")
	if err != nil {
		return diskFigures{skip: "direct I/O write refused or failed: " + err.Error()}
	}
	r, err := run("if="+dst, "of=/dev/null", "bs=2560k", fmt.Sprint("count=", count), "iflag=direct")
	if err != nil {
		return diskFigures{skip: "direct I/O read refused or failed: " + err.Error()}
	}
	return diskFigures{writeMBps: w, readMBps: r}
}

// BenchmarkDiskDirectIO reports the disk's own sequential throughput, the
// yardstick of the store's benchmarks.
func BenchmarkDiskDirectIO(b *testing.B) {
	d := measureDisk()
	if d.skip != "" {
		b.Skip("skipping: " + d.skip)
	}
	for b.Loop() {
	}
	b.ReportMetric(d.writeMBps, "dd-write-MB/s")
	b.ReportMetric(d.readMBps, "dd-read-MB/s")
}

// reportVsDisk reports the store's throughput as a share of dd's.
func reportVsDisk(b *testing.B, bytes int64, diskMBps func(diskFigures) float64, unit string) {
	d := measureDisk()
	if d.skip != "" {
		b.Logf("no comparison with the disk: %s", d.skip)
		return
	}
	mbps := float64(bytes) * float64(b.N) / b.Elapsed().Seconds() / 1e6
	b.ReportMetric(mbps/diskMBps(d), unit)
}

func BenchmarkStorePut(b *testing.B) {
	measureDisk() // before the timed part, not inside it
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v", sync), func(b *testing.B) {
			// 64 blocks of capacity: the loop evicts as a full store does.
			s := openTest(b, b.TempDir(), 64*(HeaderSize+qwen3Block), func(c *StoreConfig) { c.Sync = sync })
			sp := s.Space("vllm-Qwen3-14B-b16")
			payloads := make([][]byte, 8)
			for i := range payloads {
				payloads[i] = make([]byte, qwen3Block)
				_, _ = rand.Read(payloads[i])
			}
			b.SetBytes(qwen3Block)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := sp.Put(uint64(i)+1, qwen3Block, payloads[i%len(payloads)]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportVsDisk(b, qwen3Block, func(d diskFigures) float64 { return d.writeMBps }, "x-dd-write")
		})
	}
}

func BenchmarkStoreGet(b *testing.B) {
	measureDisk()
	const blocks = 64
	s := openTest(b, b.TempDir(), 1<<40, func(c *StoreConfig) { c.Sync = true; c.Logger = slog.New(slog.DiscardHandler) })
	sp := s.Space("vllm-Qwen3-14B-b16")
	payload := make([]byte, qwen3Block)
	for h := uint64(1); h <= blocks; h++ {
		_, _ = rand.Read(payload)
		if err := sp.Put(h, qwen3Block, payload); err != nil {
			b.Fatal(err)
		}
	}
	// dropCache evicts a block file from the page cache (it is clean: Put
	// fsynced it), so that the Get reads the disk.
	dropCache := func(h uint64) {
		f, err := os.Open(sp.path(h))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			b.Fatal(err)
		}
	}
	dst := make([]byte, qwen3Block)
	b.SetBytes(qwen3Block)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h := uint64(i%blocks) + 1
		b.StopTimer()
		dropCache(h)
		b.StartTimer()
		if _, err := sp.Get(h, dst); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportVsDisk(b, qwen3Block, func(d diskFigures) float64 { return d.readMBps }, "x-dd-read")
}
