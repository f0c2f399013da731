package atomicfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestWriteReplacesWithMode: a new file and a replaced one get the mode
// asked for (not the umask's, not the old file's) and nothing else stays
// in the directory.
func TestWriteReplacesWithMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key.pem")
	for _, step := range []struct {
		data string
		mode fs.FileMode
	}{
		{"first", 0o644},
		{"second, longer than the first", 0o600},
		{"3", 0o640},
	} {
		if err := Write(path, []byte(step.data), step.mode); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != step.data || fi.Mode().Perm() != step.mode {
			t.Errorf("after writing %q with %v: read %q with %v", step.data, step.mode, got, fi.Mode().Perm())
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only key.pem: %v", len(entries), entries)
	}
}

// TestWriteFailureLeavesNoTemporaryFile: when the rename fails (the path
// is a directory that is not empty) Write says so, and neither the
// temporary file nor a change to what was there is left behind.
func TestWriteFailureLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "taken")
	if err := os.MkdirAll(filepath.Join(path, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("data"), 0o600); err == nil {
		t.Fatal("Write over a directory succeeded")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || !entries[0].IsDir() {
		t.Errorf("directory holds %v, want only the directory taken", entries)
	}
	if err := Write(filepath.Join(dir, "missing", "file"), nil, 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Write into a missing directory: %v, want fs.ErrNotExist", err)
	}
}

// TestReadersSeeOldOrNew: a reader racing a series of writes reads one
// whole version each time, never a truncated or half-written one, which an
// in-place write would show.
func TestReadersSeeOldOrNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	versions := [][]byte{bytes.Repeat([]byte("a"), 64<<10), bytes.Repeat([]byte("b"), 96<<10)}
	if err := Write(path, versions[0], 0o644); err != nil {
		t.Fatal(err)
	}
	const writes = 100
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := range writes {
			if err := Write(path, versions[i%2], 0o644); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	reads := 0
	for {
		select {
		case <-done:
			wg.Wait()
			t.Logf("%d reads during %d writes", reads, writes)
			return
		default:
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, versions[0]) && !bytes.Equal(got, versions[1]) {
			t.Fatalf("read %d bytes that are neither version", len(got))
		}
		reads++
	}
}
