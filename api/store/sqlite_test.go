package store

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestSQLiteRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"memory", func(*testing.T) string { return ":memory:" }},
		{"file", func(t *testing.T) string { return filepath.Join(t.TempDir(), "responses.db") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(ctx, tc.path(t))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			created := time.UnixMilli(1_790_000_000_000)
			want := Response{ID: "resp_1", Model: "m", CreatedAt: created, Conversation: []byte(`[{"role":"user"}]`)}
			if err := s.PutResponse(ctx, want); err != nil {
				t.Fatal(err)
			}
			got, err := s.GetResponse(ctx, "resp_1")
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != want.ID || got.Model != want.Model || !got.CreatedAt.Equal(created) || !bytes.Equal(got.Conversation, want.Conversation) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
			want.Conversation = []byte(`[]`)
			if err := s.PutResponse(ctx, want); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.GetResponse(ctx, "resp_1"); string(got.Conversation) != "[]" {
				t.Fatalf("replace: conversation %q", got.Conversation)
			}
			if _, err := s.GetResponse(ctx, "resp_missing"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("missing id: err %v, want ErrNotFound", err)
			}
		})
	}
}

func TestSQLiteSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutResponse(ctx, Response{ID: "a", Model: "m", Conversation: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.GetResponse(ctx, "a"); err != nil || string(got.Conversation) != "x" {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
}

func TestSQLiteDeleteBefore(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := time.UnixMilli(1_000_000)
	for i, id := range []string{"old", "new"} {
		if err := s.PutResponse(ctx, Response{ID: id, Model: "m", CreatedAt: base.Add(time.Duration(i) * time.Hour), Conversation: []byte("c")}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.DeleteBefore(ctx, base.Add(30*time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("deleted %d, %v; want 1", n, err)
	}
	if _, err := s.GetResponse(ctx, "old"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("old still there: %v", err)
	}
	if _, err := s.GetResponse(ctx, "new"); err != nil {
		t.Fatalf("new gone: %v", err)
	}
}

func TestSQLiteRejectsEmptyID(t *testing.T) {
	s, err := Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutResponse(context.Background(), Response{}); err == nil {
		t.Fatal("empty id accepted")
	}
}
