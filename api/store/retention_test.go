package store

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// TestRetentionPrunesByAgeAndSize: stored conversations older than MaxAge
// go at start and then every Every of the clock, and the oldest go first
// while they weigh more than MaxBytes together.
func TestRetentionPrunesByAgeAndSize(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hearth.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	put := func(id string, at time.Time, size int) {
		t.Helper()
		if err := s.PutResponse(ctx, Response{ID: id, Model: "m", CreatedAt: at, Conversation: make([]byte, size)}); err != nil {
			t.Fatal(err)
		}
	}
	has := func(id string) bool {
		_, err := s.GetResponse(ctx, id)
		return err == nil
	}
	waitGone := func(id string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for has(id) {
			if time.Now().After(deadline) {
				t.Fatalf("%s still stored", id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	put("old", start.Add(-8*24*time.Hour), 100)  // beyond 7 days at start
	put("day6", start.Add(-6*24*time.Hour), 100) // beyond them a day later
	put("recent", start.Add(-time.Hour), 100)

	done := make(chan error, 1)
	go func() {
		done <- s.RunRetention(ctx, Retention{MaxAge: 7 * 24 * time.Hour, MaxBytes: 950 << 10, Every: time.Hour}, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	waitGone("old") // at start
	if !has("day6") || !has("recent") {
		t.Fatal("a conversation younger than MaxAge went at start")
	}
	clk.Advance(25 * time.Hour)
	waitGone("day6")
	if !has("recent") {
		t.Fatal("a conversation of an hour went")
	}

	// Beyond MaxBytes: the oldest go until the rest fits.
	now := clk.Now()
	for i := range 12 {
		put("big"+strconv.Itoa(i), now.Add(time.Duration(i)*time.Second), 100<<10)
	}
	clk.Advance(time.Hour)
	waitGone("recent")
	waitGone("big2")
	for i := 3; i < 12; i++ {
		if !has("big" + strconv.Itoa(i)) {
			t.Errorf("big%d went, though the newest fit in MaxBytes", i)
		}
	}
	if n, bytes, err := s.ResponseStats(ctx); err != nil || n != 9 || bytes > 950<<10 {
		t.Errorf("after pruning: %d responses, %d bytes, %v; want 9 within 950 KiB", n, bytes, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("RunRetention: %v", err)
	}
}
