package kvbm

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestStoreIsPrivate: the store holds other users' prompts' KV, so
// whatever directory it is given (hearth up --kv-store-dir) and whichever
// process writes (the daemon or an engine), its directories are 0700 and
// its block files 0600, also when the root existed wider open.
func TestStoreIsPrivate(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "custom-store")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, root, 1<<20)
	if err := s.Space("m").Put(1, 100, payloadFor(1, 100)); err != nil {
		t.Fatal(err)
	}
	e := openTestEngineSpace(t, root, "vllm-m-b16", "")
	if err := e.Store(2, 100); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", p, got, want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 7 { // the root, two spaces, two shards, two blocks
		t.Errorf("walked %d entries, want at least 7", n)
	}
}
