package store

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// Defaults of Retention: a week of conversations, 256 MiB of them, looked
// at every ten minutes. A client continues a conversation within minutes
// or hours; older ones only fill the disk.
const (
	DefaultResponseMaxAge   = 7 * 24 * time.Hour
	DefaultResponseMaxBytes = 256 << 20
	DefaultPruneEvery       = 10 * time.Minute
)

// Retention bounds the stored Responses-API conversations; a zero field
// takes its default.
type Retention struct {
	MaxAge   time.Duration // older conversations go
	MaxBytes int64         // the oldest go while all weigh more
	Every    time.Duration // how often to look
}

func (r Retention) withDefaults() Retention {
	r.MaxAge = cmp.Or(r.MaxAge, DefaultResponseMaxAge)
	r.MaxBytes = cmp.Or(r.MaxBytes, DefaultResponseMaxBytes)
	r.Every = cmp.Or(r.Every, DefaultPruneEvery)
	return r
}

// RunRetention prunes the stored responses by r at once and then every
// r.Every of clk until ctx ends. A failed pass is logged and the next one
// tries again.
func (s *SQLite) RunRetention(ctx context.Context, r Retention, clk clock.Clock, log *slog.Logger) error {
	r = r.withDefaults()
	tick, stop := clk.NewTicker(r.Every)
	defer stop()
	for {
		n, err := s.PruneResponses(ctx, clk.Now().Add(-r.MaxAge), r.MaxBytes)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			log.Warn("store: pruning stored conversations failed", "error", err)
		case n > 0:
			log.Info("store: pruned stored conversations", "removed", n, "max_age", r.MaxAge, "max_bytes", r.MaxBytes)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		}
	}
}

// responseBytes is what a stored response weighs in PruneResponses and
// ResponseStats: its conversation, id and model.
const responseBytes = `length(conversation) + length(id) + length(model)`

// PruneResponses removes the responses created before t, then the oldest
// while the rest weigh more than maxBytes, and reports how many went.
func (s *SQLite) PruneResponses(ctx context.Context, before time.Time, maxBytes int64) (int64, error) {
	old, err := s.DeleteBefore(ctx, before)
	if err != nil {
		return 0, err
	}
	res, err := s.db.ExecContext(ctx, `DELETE FROM responses WHERE id IN (
		SELECT id FROM (
			SELECT id, SUM(`+responseBytes+`) OVER (ORDER BY created_at DESC, id DESC) AS newer
			FROM responses
		) WHERE newer > ?
	)`, maxBytes)
	if err != nil {
		return old, fmt.Errorf("store: prune responses by size: %w", err)
	}
	n, err := res.RowsAffected()
	return old + n, err
}

// ResponseStats reports how many responses are stored and what they weigh.
func (s *SQLite) ResponseStats(ctx context.Context) (count, bytes int64, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(`+responseBytes+`), 0) FROM responses`).Scan(&count, &bytes)
	if err != nil {
		return 0, 0, fmt.Errorf("store: response stats: %w", err)
	}
	return count, bytes, nil
}
