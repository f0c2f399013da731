package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/hearth-llm/hearth/apikey"
	"github.com/hearth-llm/hearth/clock"
)

// ErrNotFound is returned for an unknown response id.
var ErrNotFound = errors.New("response not found")

// Response is one stored answer.
type Response struct {
	ID        string
	Model     string
	CreatedAt time.Time
	// Conversation is the whole conversation up to and including this
	// answer, in whatever encoding the caller chose.
	Conversation []byte
}

// SQLite keeps responses, API keys and settings in a SQLite database.
type SQLite struct {
	db    *sql.DB
	clock clock.Clock // creation and use times of keys; tests pass a fake

	// live indexes the keys that are not revoked by their secret's
	// SHA-256: every API request asks, and a map answers in nanoseconds
	// where a query takes tens of microseconds. This process is the
	// database's only writer, so it changes only with CreateKey and
	// RevokeKey.
	mu   sync.RWMutex
	live map[[sha256.Size]byte]apikey.Key
}

// Open opens (creating if needed) the database at path; ":memory:" gives a
// private in-memory database. The file and its WAL files are made readable
// by the owner only: they hold key and password digests and conversations.
func Open(ctx context.Context, path string) (*SQLite, error) {
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)"
	if path == ":memory:" {
		dsn = ":memory:"
	} else if err := makePrivate(path); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if path == ":memory:" {
		db.SetMaxOpenConns(1) // each connection would be its own database
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	s := &SQLite{db: db, clock: clock.Real{}}
	if err := s.loadLiveKeys(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// makePrivate creates the database file 0600 before SQLite opens it (SQLite
// gives its -wal and -shm files the main file's mode) and narrows a file,
// or WAL files, left wider open by an older Hearth.
func makePrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// schema creates every table; each statement may run again on a database
// that has it, so opening a database written by an older Hearth adds what
// it lacks and keeps what it holds.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS responses (
		id TEXT PRIMARY KEY,
		model TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		conversation BLOB NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS responses_created ON responses(created_at)`,
	// api_keys keeps a SHA-256 of each secret, never the secret. Revoked
	// keys stay, marked, so that an id is never handed out twice.
	`CREATE TABLE IF NOT EXISTS api_keys (
		id TEXT PRIMARY KEY,
		name TEXT NOT NULL,
		hint TEXT NOT NULL,
		secret_sha256 BLOB NOT NULL UNIQUE,
		created_at INTEGER NOT NULL,
		revoked_at INTEGER
	)`,
	// settings holds one JSON value per setting the user saved.
	`CREATE TABLE IF NOT EXISTS settings (
		name TEXT PRIMARY KEY,
		value TEXT NOT NULL
	)`,
}

// apiKeyColumns were added to api_keys after its first release: a
// database of an older Hearth gets them on open. Keys made before scopes
// existed were made for clients, so they become inference keys.
var apiKeyColumns = []struct{ name, decl string }{
	{"scope", `TEXT NOT NULL DEFAULT 'inference'`},
	{"last_used_at", `INTEGER`},
}

// addColumns adds to table the columns it lacks.
func addColumns(ctx context.Context, tx *sql.Tx, table string, cols []struct{ name, decl string }) error {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, table)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		have[name] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, c := range cols {
		if have[c.name] {
			continue
		}
		if _, err := tx.ExecContext(ctx, `ALTER TABLE `+table+` ADD COLUMN `+c.name+` `+c.decl); err != nil {
			return fmt.Errorf("add %s.%s: %w", table, c.name, err)
		}
	}
	return nil
}

func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: create schema: %w", err)
	}
	defer tx.Rollback()
	for _, stmt := range schema {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("store: create schema: %w", err)
		}
	}
	if err := addColumns(ctx, tx, "api_keys", apiKeyColumns); err != nil {
		return fmt.Errorf("store: create schema: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: create schema: %w", err)
	}
	return nil
}

// Close closes the database.
func (s *SQLite) Close() error { return s.db.Close() }

// PutResponse stores r, replacing a response with the same id.
func (s *SQLite) PutResponse(ctx context.Context, r Response) error {
	if r.ID == "" {
		return errors.New("store: empty response id")
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now()
	}
	_, err := s.db.ExecContext(ctx,
		`INSERT OR REPLACE INTO responses (id, model, created_at, conversation) VALUES (?, ?, ?, ?)`,
		r.ID, r.Model, r.CreatedAt.UnixMilli(), r.Conversation)
	if err != nil {
		return fmt.Errorf("store: put %s: %w", r.ID, err)
	}
	return nil
}

// GetResponse returns the response with id, or an error wrapping ErrNotFound.
func (s *SQLite) GetResponse(ctx context.Context, id string) (Response, error) {
	r := Response{ID: id}
	var ms int64
	err := s.db.QueryRowContext(ctx, `SELECT model, created_at, conversation FROM responses WHERE id = ?`, id).
		Scan(&r.Model, &ms, &r.Conversation)
	if errors.Is(err, sql.ErrNoRows) {
		return Response{}, fmt.Errorf("store: %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Response{}, fmt.Errorf("store: get %s: %w", id, err)
	}
	r.CreatedAt = time.UnixMilli(ms)
	return r, nil
}

// DeleteBefore removes responses created before t and reports how many.
func (s *SQLite) DeleteBefore(ctx context.Context, t time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM responses WHERE created_at < ?`, t.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("store: delete old responses: %w", err)
	}
	return res.RowsAffected()
}
