package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// ErrNoSuchKey is returned for a secret or id that names no live key.
var ErrNoSuchKey = errors.New("no such API key")

// APIKey describes a stored key without its secret.
type APIKey struct {
	ID      string
	Name    string
	Hint    string // "sk-hearth-…a1b2": enough to tell keys apart
	Created time.Time
}

// secretPrefix starts every secret, so that a leaked one is recognisable
// in logs and by secret scanners.
const secretPrefix = "sk-hearth-"

// CreateKey makes a key named name. Its secret, 32 random bytes after
// "sk-hearth-", is returned only here: the database keeps its SHA-256.
func (s *SQLite) CreateKey(ctx context.Context, name string) (APIKey, string, error) {
	var secretBytes [32]byte
	var idBytes [8]byte
	rand.Read(secretBytes[:]) // never fails (crypto/rand)
	rand.Read(idBytes[:])
	secret := secretPrefix + base64.RawURLEncoding.EncodeToString(secretBytes[:])
	sum := sha256.Sum256([]byte(secret))
	k := APIKey{
		ID:      "key_" + hex.EncodeToString(idBytes[:]),
		Name:    name,
		Hint:    secretPrefix + "…" + secret[len(secret)-4:],
		Created: time.UnixMilli(s.now().UnixMilli()), // what a reload gives back
	}
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO api_keys (id, name, hint, secret_sha256, created_at) VALUES (?, ?, ?, ?, ?)`,
		k.ID, k.Name, k.Hint, sum[:], k.Created.UnixMilli())
	if err != nil {
		return APIKey{}, "", fmt.Errorf("store: create key: %w", err)
	}
	return k, secret, nil
}

// Keys lists the keys that are not revoked, oldest first.
func (s *SQLite) Keys(ctx context.Context) ([]APIKey, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT id, name, hint, created_at FROM api_keys WHERE revoked_at IS NULL ORDER BY created_at, rowid`)
	if err != nil {
		return nil, fmt.Errorf("store: list keys: %w", err)
	}
	defer rows.Close()
	var out []APIKey
	for rows.Next() {
		var k APIKey
		var ms int64
		if err := rows.Scan(&k.ID, &k.Name, &k.Hint, &ms); err != nil {
			return nil, fmt.Errorf("store: list keys: %w", err)
		}
		k.Created = time.UnixMilli(ms)
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list keys: %w", err)
	}
	return out, nil
}

// HasKeys reports whether a key that is not revoked exists; it is what
// the gateway asks on every request, so it reads one row at most.
func (s *SQLite) HasKeys(ctx context.Context) (bool, error) {
	var has bool
	err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM api_keys WHERE revoked_at IS NULL)`).Scan(&has)
	if err != nil {
		return false, fmt.Errorf("store: count keys: %w", err)
	}
	return has, nil
}

// RevokeKey revokes the key with id; its secret stops working at once.
// An unknown or already revoked id gives an error wrapping ErrNoSuchKey.
func (s *SQLite) RevokeKey(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx,
		`UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, s.now().UnixMilli(), id)
	if err != nil {
		return fmt.Errorf("store: revoke key %q: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: revoke key %q: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("store: revoke key %q: %w", id, ErrNoSuchKey)
	}
	return nil
}

// CheckKey returns the live key whose secret is secret, or an error
// wrapping ErrNoSuchKey. The lookup is by the secret's SHA-256, so its
// timing tells nothing about the secrets kept.
func (s *SQLite) CheckKey(ctx context.Context, secret string) (APIKey, error) {
	if secret == "" {
		return APIKey{}, ErrNoSuchKey
	}
	sum := sha256.Sum256([]byte(secret))
	var k APIKey
	var ms int64
	err := s.db.QueryRowContext(ctx,
		`SELECT id, name, hint, created_at FROM api_keys WHERE secret_sha256 = ? AND revoked_at IS NULL`, sum[:]).
		Scan(&k.ID, &k.Name, &k.Hint, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return APIKey{}, ErrNoSuchKey
	}
	if err != nil {
		return APIKey{}, fmt.Errorf("store: check key: %w", err)
	}
	k.Created = time.UnixMilli(ms)
	return k, nil
}
