package store

import (
	"context"
	"path/filepath"
	"testing"
)

func TestOwnerPasswordSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hearth.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.OwnerPassword(ctx); ok || err != nil {
		t.Fatalf("a new database has an owner: ok=%v err=%v", ok, err)
	}
	if err := s.SetOwnerPassword(ctx, ""); err == nil {
		t.Fatal("an empty digest was kept")
	}
	for _, d := range []string{"digest-1", "digest-2"} {
		if err := s.SetOwnerPassword(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveSettings(ctx, Settings{Policy: "kv", Aliases: []Alias{}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if d, ok, err := s.OwnerPassword(ctx); d != "digest-2" || !ok || err != nil {
		t.Fatalf("after reopen: %q %v %v", d, ok, err)
	}
	if st, saved, err := s.Settings(ctx); !saved || err != nil || st.Policy != "kv" {
		t.Fatalf("settings beside the owner's row: %+v %v %v", st, saved, err)
	}
}
