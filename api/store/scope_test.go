package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/apikey"
	"github.com/hearth-llm/hearth/clock"
)

func TestScopedKeys(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hearth.db")
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := openFile(t, path, now)
	inf, infSecret, err := s.CreateKey(ctx, "codex on laptop")
	if err != nil {
		t.Fatal(err)
	}
	adm, admSecret, err := s.CreateScopedKey(ctx, "scripts", apikey.ScopeAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateScopedKey(ctx, "x", "root"); err == nil {
		t.Fatal("a key of an unknown scope was made")
	}
	if inf.Scope != apikey.ScopeInference || adm.Scope != apikey.ScopeAdmin {
		t.Fatalf("scopes %q and %q", inf.Scope, adm.Scope)
	}
	s.Close()
	s = openFile(t, path, now)
	defer s.Close()
	for secret, want := range map[string]string{infSecret: apikey.ScopeInference, admSecret: apikey.ScopeAdmin} {
		k, err := s.CheckKey(ctx, secret)
		if err != nil || k.Scope != want {
			t.Errorf("after reopen: key %v scope %q, want %q (%v)", k.ID, k.Scope, want, err)
		}
	}
	keys, _ := s.Keys(ctx)
	if len(keys) != 2 || keys[0].Scope != apikey.ScopeInference || keys[1].Scope != apikey.ScopeAdmin || keys[0].Name != "codex on laptop" {
		t.Fatalf("Keys: %+v", keys)
	}
}

func TestNoteKeyUsedWritesAtMostOnceAMinute(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hearth.db")
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := openFile(t, path, now)
	defer s.Close()
	k, secret, err := s.CreateKey(ctx, "claude-code")
	if err != nil {
		t.Fatal(err)
	}
	lastUsed := func() time.Time {
		t.Helper()
		var ms sql.NullInt64
		if err := s.db.QueryRowContext(ctx, `SELECT last_used_at FROM api_keys WHERE id = ?`, k.ID).Scan(&ms); err != nil {
			t.Fatal(err)
		}
		if !ms.Valid {
			return time.Time{}
		}
		return time.UnixMilli(ms.Int64).UTC()
	}
	if !lastUsed().IsZero() {
		t.Fatal("a new key has a last use")
	}
	steps := []struct {
		after time.Duration
		want  time.Duration // last_used_at, from the start
	}{
		{0, 0},
		{30 * time.Second, 0},                  // within the minute: not written
		{61 * time.Second, 61 * time.Second},   // a minute on: written
		{90 * time.Second, 61 * time.Second},   // within the new minute
		{125 * time.Second, 125 * time.Second}, // written again
	}
	for _, st := range steps {
		s.clock.(*clock.Fake).Set(now.Add(st.after))
		if err := s.NoteKeyUsed(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		if got := lastUsed(); !got.Equal(now.Add(st.want)) {
			t.Errorf("at +%v: last_used_at %v, want %v", st.after, got, now.Add(st.want))
		}
	}
	if got, _ := s.CheckKey(ctx, secret); !got.LastUsed.Equal(now.Add(125 * time.Second)) {
		t.Errorf("CheckKey's LastUsed %v", got.LastUsed)
	}
	if err := s.NoteKeyUsed(ctx, "key_nope"); !errors.Is(err, ErrNoSuchKey) {
		t.Errorf("unknown key: %v", err)
	}
}

// TestOpenAddsScopeToOldKeys opens a database whose api_keys table
// predates scopes: its keys become inference keys and keep working.
func TestOpenAddsScopeToOldKeys(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hearth.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "sk-hearth-old-secret"
	sum := sha256.Sum256([]byte(secret))
	for _, stmt := range []string{
		`CREATE TABLE api_keys (id TEXT PRIMARY KEY, name TEXT NOT NULL, hint TEXT NOT NULL, secret_sha256 BLOB NOT NULL UNIQUE, created_at INTEGER NOT NULL, revoked_at INTEGER)`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO api_keys (id, name, hint, secret_sha256, created_at) VALUES ('key_old', 'opencode', 'sk-hearth-…cret', ?, 1)`, sum[:]); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for range 2 { // and a second open finds nothing to add
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		k, err := s.CheckKey(ctx, secret)
		if err != nil || k.ID != "key_old" || k.Scope != apikey.ScopeInference || !k.LastUsed.IsZero() {
			t.Fatalf("old key after migration: %+v, %v", k, err)
		}
		s.Close()
	}
}
