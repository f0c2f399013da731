package kvbm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// The kill -9 torture: the test binary runs itself as a child that writes,
// reads and evicts blocks in a loop; the parent kills it with SIGKILL at a
// random moment, opens the store and reads every block. Each must verify and
// equal its expected content, or be absent: never wrong data.

const (
	tortureEnv    = "KVBM_TORTURE_CHILD_DIR"
	tortureHashes = 64
	tortureSpace  = "torture"
	tortureReady  = "store open"
)

// tortureSize varies the block size per hash (up to 96 KiB), so that a torn
// write would show as a wrong size or checksum.
func tortureSize(hash uint64) int { return 1024 + int(hash*7919%96)*1024 }

func tortureHash(i uint64) uint64 { return i*0x9e3779b97f4a7c15 | 1 }

// TestTortureChild is the child's loop; it runs only when started by
// TestKillNineTorture.
func TestTortureChild(t *testing.T) {
	dir := os.Getenv(tortureEnv)
	if dir == "" {
		t.Skip("skipping: runs only as the child process of TestKillNineTorture")
	}
	// A capacity of about a third of the blocks keeps eviction (and so
	// deletes) in the loop.
	s, err := OpenStore(StoreConfig{Dir: dir, CapacityBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	sp := s.Space(tortureSpace)
	fmt.Println(tortureReady)
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 1))
	buf := make([]byte, 0, 128<<10)
	for {
		h := tortureHash(rng.Uint64N(tortureHashes))
		if rng.IntN(3) == 0 {
			got, err := sp.Get(h, buf)
			if err == nil && !bytes.Equal(got, payloadFor(h, tortureSize(h))) {
				t.Fatalf("child read wrong bytes for %016x", h)
			}
			continue
		}
		if err := sp.Put(h, int64(tortureSize(h)), payloadFor(h, tortureSize(h))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestKillNineTorture(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: -short")
	}
	dir := t.TempDir()
	const maxRuns = 300
	budget := 20 * time.Second
	start := time.Now()
	rng := rand.New(rand.NewPCG(uint64(start.UnixNano()), 2))
	runs, present, absent, wrote := 0, 0, 0, int64(0)
	for runs < maxRuns && time.Since(start) < budget {
		runs++
		cmd := exec.Command(os.Args[0], "-test.run=^TestTortureChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), tortureEnv+"="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The delay counts from the child's word that its store is open,
		// so a slow start (as under -race) does not eat it.
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || line != tortureReady+"\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("run %d: child did not start: %q, %v\n%s", runs, line, err, stderr.String())
		}
		time.Sleep(time.Duration(rng.IntN(31)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("run %d: child ended by %v before the kill:\n%s", runs, err, stderr.String())
		}

		s, err := OpenStore(StoreConfig{Dir: dir, CapacityBytes: 1 << 30})
		if err != nil {
			t.Fatalf("run %d: open after kill: %v", runs, err)
		}
		sp := s.Space(tortureSpace)
		for i := range uint64(tortureHashes) {
			h := tortureHash(i)
			got, err := sp.Get(h, nil)
			switch {
			case errors.Is(err, ErrNotFound):
				absent++
			case err != nil:
				t.Fatalf("run %d: block %016x: %v", runs, h, err)
			case !bytes.Equal(got, payloadFor(h, tortureSize(h))):
				t.Fatalf("run %d: block %016x: wrong data", runs, h)
			default:
				present++
			}
		}
		st := s.Stats().Total
		if st.CorruptBlocks != 0 {
			t.Fatalf("run %d: %d corrupt blocks after a kill", runs, st.CorruptBlocks)
		}
		wrote = max(wrote, st.Blocks)
		s.Close()
	}
	t.Logf("%d kill -9 runs in %v: %d block reads verified, %d absent, up to %d blocks on disk",
		runs, time.Since(start).Round(time.Millisecond), present, absent, wrote)
	if present == 0 {
		t.Error("no run left a block to verify: the child never wrote")
	}
	leftover := tempFiles(t, dir)
	t.Logf("%d temp files of killed writes left (deleted by a scan once a minute old)", len(leftover))
}
