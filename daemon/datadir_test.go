package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPrepareDataDirIsPrivate: the data directory (the database, the CA's
// key, the cluster identity) is the owner's alone, also when an older
// Hearth or the user made it wider open.
func TestPrepareDataDirIsPrivate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before os.FileMode // 0: the directory does not exist yet
	}{
		{"new", 0},
		{"existing 0755", 0o755},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "hearth")
			if tc.before != 0 {
				if err := os.Mkdir(dir, tc.before); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, tc.before); err != nil {
					t.Fatal(err)
				}
			}
			if err := DataDir(dir).prepare(); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if mode := fi.Mode().Perm(); mode != 0o700 {
				t.Errorf("data dir mode %o, want 700", mode)
			}
		})
	}
}
