package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenKeepsFilesPrivate: the database holds key and password digests
// and conversations, so it and its WAL files are readable by the owner
// only, whether Open creates them or finds them wider open.
func TestOpenKeepsFilesPrivate(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		prepare func(path string) error
	}{
		{"new", func(string) error { return nil }},
		{"existing 0644", func(path string) error {
			s, err := Open(ctx, path)
			if err != nil {
				return err
			}
			if err := s.Close(); err != nil {
				return err
			}
			for _, suffix := range []string{"", "-wal", "-shm"} {
				if err := os.WriteFile(path+suffix, nil, 0o644); err != nil && suffix == "" {
					return err
				}
				if err := os.Chmod(path+suffix, 0o644); err != nil && !os.IsNotExist(err) {
					return err
				}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hearth.db")
			if err := tc.prepare(path); err != nil {
				t.Fatal(err)
			}
			s, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.PutResponse(ctx, Response{ID: "r", Model: "m", Conversation: []byte("secret")}); err != nil {
				t.Fatal(err)
			}
			for _, suffix := range []string{"", "-wal", "-shm"} {
				fi, err := os.Stat(path + suffix)
				if err != nil {
					t.Fatal(err)
				}
				if mode := fi.Mode().Perm(); mode != 0o600 {
					t.Errorf("%s: mode %o, want 600", filepath.Base(path+suffix), mode)
				}
			}
		})
	}
}
