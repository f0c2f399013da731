package store

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// openFile opens a database file in dir with a fixed clock.
func openFile(t *testing.T, path string, now time.Time) *SQLite {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.clock = clock.NewFake(now)
	return s
}

func keyIDs(t *testing.T, s *SQLite) []string {
	t.Helper()
	keys, err := s.Keys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range keys {
		ids = append(ids, k.ID)
	}
	return ids
}

func TestKeysSurviveReopenAndRevoke(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hearth.db")
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := openFile(t, path, t0)
	if has, err := s.HasKeys(ctx); has || err != nil {
		t.Fatalf("empty database: HasKeys = %v, %v", has, err)
	}
	laptop, laptopSecret, err := s.CreateKey(ctx, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	s.clock.(*clock.Fake).Advance(time.Minute)
	ci, ciSecret, err := s.CreateKey(ctx, "ci")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(laptopSecret, "sk-hearth-") || len(laptopSecret) < 50 || laptopSecret == ciSecret {
		t.Fatalf("secrets %q and %q: want two distinct sk-hearth- secrets of 32 random bytes", laptopSecret, ciSecret)
	}
	if laptop.ID == ci.ID || laptop.Name != "laptop" || !laptop.Created.Equal(t0) ||
		laptop.Hint != "sk-hearth-…"+laptopSecret[len(laptopSecret)-4:] {
		t.Fatalf("key %+v", laptop)
	}
	s.Close()

	// A restart: the same file opened again.
	s = openFile(t, path, t0.Add(time.Hour))
	defer s.Close()
	if got, want := keyIDs(t, s), []string{laptop.ID, ci.ID}; !slices.Equal(got, want) {
		t.Fatalf("after reopen: keys %v, want %v (oldest first)", got, want)
	}
	for _, tc := range []struct {
		name, secret string
		want         string // key id; "" = ErrNoSuchKey
	}{
		{"the first secret", laptopSecret, laptop.ID},
		{"the second secret", ciSecret, ci.ID},
		{"an unknown secret", "sk-hearth-nope", ""},
		{"a secret's hint", laptop.Hint, ""},
		{"empty", "", ""},
	} {
		t.Run("check "+tc.name, func(t *testing.T) {
			k, err := s.CheckKey(ctx, tc.secret)
			if tc.want == "" {
				if !errors.Is(err, ErrNoSuchKey) {
					t.Errorf("CheckKey: %+v, %v; want ErrNoSuchKey", k, err)
				}
				return
			}
			if err != nil || k.ID != tc.want {
				t.Errorf("CheckKey: %+v, %v; want key %s", k, err, tc.want)
			}
		})
	}

	if err := s.RevokeKey(ctx, laptop.ID); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, id string
	}{
		{"twice", laptop.ID},
		{"an unknown id", "key_0000"},
	} {
		if err := s.RevokeKey(ctx, tc.id); !errors.Is(err, ErrNoSuchKey) {
			t.Errorf("revoke %s: %v, want ErrNoSuchKey", tc.name, err)
		}
	}
	if _, err := s.CheckKey(ctx, laptopSecret); !errors.Is(err, ErrNoSuchKey) {
		t.Errorf("revoked secret: %v, want ErrNoSuchKey", err)
	}
	s.Close()
	s = openFile(t, path, t0.Add(2*time.Hour))
	if got := keyIDs(t, s); !slices.Equal(got, []string{ci.ID}) {
		t.Errorf("after revoke and reopen: keys %v, want only %s", got, ci.ID)
	}
	if _, err := s.CheckKey(ctx, laptopSecret); !errors.Is(err, ErrNoSuchKey) {
		t.Errorf("revoked secret after reopen: %v, want ErrNoSuchKey", err)
	}
	if err := s.RevokeKey(ctx, ci.ID); err != nil {
		t.Fatal(err)
	}
	if has, err := s.HasKeys(ctx); has || err != nil {
		t.Errorf("all revoked: HasKeys = %v, %v; want false", has, err)
	}
}

// TestKeysStoreOnlyADigest: the secret itself is nowhere in the database.
func TestKeysStoreOnlyADigest(t *testing.T) {
	ctx := context.Background()
	s := openFile(t, filepath.Join(t.TempDir(), "hearth.db"), time.Now())
	defer s.Close()
	_, secret, err := s.CreateKey(ctx, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, name, hint, hex(secret_sha256) FROM api_keys`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, name, hint, sum string
		if err := rows.Scan(&id, &name, &hint, &sum); err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{id, name, hint, sum} {
			if strings.Contains(v, secret[len("sk-hearth-"):len("sk-hearth-")+8]) {
				t.Errorf("column value %q holds part of the secret", v)
			}
		}
		if len(sum) != 64 {
			t.Errorf("digest %q, want 32 bytes", sum)
		}
	}
}

// TestOpenIsIdempotent: opening a database that already has every table,
// or one from before keys and settings existed, keeps what it holds.
func TestOpenIsIdempotent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hearth.db")
	old, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.PutResponse(ctx, Response{ID: "resp_1", Model: "m", Conversation: []byte("c")}); err != nil {
		t.Fatal(err)
	}
	// The database as an older Hearth left it: responses only.
	for _, table := range []string{"api_keys", "settings"} {
		if _, err := old.db.ExecContext(ctx, "DROP TABLE "+table); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()
	for i := range 2 {
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("open %d: %v", i+1, err)
		}
		if _, err := s.GetResponse(ctx, "resp_1"); err != nil {
			t.Errorf("open %d: stored response lost: %v", i+1, err)
		}
		if _, _, err := s.CreateKey(ctx, "k"); err != nil {
			t.Errorf("open %d: create key: %v", i+1, err)
		}
		if got := len(keyIDs(t, s)); got != i+1 {
			t.Errorf("open %d: %d keys, want %d", i+1, got, i+1)
		}
		s.Close()
	}
}

// TestKeysSurviveReopen: the live keys a reopened database answers for are
// the ones that were created and not revoked.
func TestKeysSurviveReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hearth.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	kept, keptSecret, err := s.CreateKey(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	gone, goneSecret, err := s.CreateKey(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeKey(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if has, err := s.HasKeys(ctx); !has || err != nil {
		t.Errorf("HasKeys = %v, %v after reopening", has, err)
	}
	if k, err := s.CheckKey(ctx, keptSecret); err != nil || k != kept {
		t.Errorf("kept key: %+v, %v; want %+v", k, err, kept)
	}
	if _, err := s.CheckKey(ctx, goneSecret); !errors.Is(err, ErrNoSuchKey) {
		t.Errorf("revoked key: %v, want ErrNoSuchKey", err)
	}
}
