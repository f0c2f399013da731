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

	"github.com/hearth-llm/hearth/apikey"
)

// ErrNoSuchKey is returned for a secret or id that names no live key.
var ErrNoSuchKey = errors.New("no such API key")

// usedResolution is how often a key's last use is written: at most once a
// minute per key, so that a busy client does not turn every request into
// a write.
const usedResolution = time.Minute

// secretPrefix starts every secret, so that a leaked one is recognisable
// in logs and by secret scanners.
const secretPrefix = "sk-hearth-"

// CreateKey makes an inference key named name (CreateScopedKey).
func (s *SQLite) CreateKey(ctx context.Context, name string) (apikey.Key, string, error) {
	return s.CreateScopedKey(ctx, name, apikey.ScopeInference)
}

// CreateScopedKey makes a key named name with a scope. Its secret, 32
// random bytes after "sk-hearth-", is returned only here: the database
// keeps its SHA-256.
func (s *SQLite) CreateScopedKey(ctx context.Context, name, scope string) (apikey.Key, string, error) {
	if !apikey.ValidScope(scope) {
		return apikey.Key{}, "", fmt.Errorf("store: create key: unknown scope %q", scope)
	}
	var secretBytes [32]byte
	var idBytes [8]byte
	rand.Read(secretBytes[:]) // never fails (crypto/rand)
	rand.Read(idBytes[:])
	secret := secretPrefix + base64.RawURLEncoding.EncodeToString(secretBytes[:])
	sum := sha256.Sum256([]byte(secret))
	k := apikey.Key{
		ID:      "key_" + hex.EncodeToString(idBytes[:]),
		Name:    name,
		Hint:    secretPrefix + "…" + secret[len(secret)-4:],
		Scope:   scope,
		Created: time.UnixMilli(s.clock.Now().UnixMilli()), // what a reload gives back
	}
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO api_keys (id, name, hint, secret_sha256, created_at, scope) VALUES (?, ?, ?, ?, ?, ?)`,
		k.ID, k.Name, k.Hint, sum[:], k.Created.UnixMilli(), k.Scope)
	if err != nil {
		return apikey.Key{}, "", fmt.Errorf("store: create key: %w", err)
	}
	s.mu.Lock()
	s.live[sum] = k
	s.mu.Unlock()
	return k, secret, nil
}

// loadLiveKeys fills the index of live keys from the database.
func (s *SQLite) loadLiveKeys(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx,
		`SELECT id, name, hint, created_at, secret_sha256, scope, last_used_at FROM api_keys WHERE revoked_at IS NULL`)
	if err != nil {
		return fmt.Errorf("store: load keys: %w", err)
	}
	defer rows.Close()
	live := make(map[[sha256.Size]byte]apikey.Key)
	for rows.Next() {
		var (
			k    apikey.Key
			ms   int64
			sum  []byte
			used sql.NullInt64
		)
		if err := rows.Scan(&k.ID, &k.Name, &k.Hint, &ms, &sum, &k.Scope, &used); err != nil {
			return fmt.Errorf("store: load keys: %w", err)
		}
		if len(sum) != sha256.Size {
			return fmt.Errorf("store: load keys: key %s has a %d-byte hash", k.ID, len(sum))
		}
		k.Created = time.UnixMilli(ms)
		if used.Valid {
			k.LastUsed = time.UnixMilli(used.Int64)
		}
		live[[sha256.Size]byte(sum)] = k
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: load keys: %w", err)
	}
	s.mu.Lock()
	s.live = live
	s.mu.Unlock()
	return nil
}

// Keys lists the keys that are not revoked, oldest first.
func (s *SQLite) Keys(ctx context.Context) ([]apikey.Key, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT id, name, hint, created_at, scope, last_used_at FROM api_keys WHERE revoked_at IS NULL ORDER BY created_at, rowid`)
	if err != nil {
		return nil, fmt.Errorf("store: list keys: %w", err)
	}
	defer rows.Close()
	var out []apikey.Key
	for rows.Next() {
		var k apikey.Key
		var ms int64
		var used sql.NullInt64
		if err := rows.Scan(&k.ID, &k.Name, &k.Hint, &ms, &k.Scope, &used); err != nil {
			return nil, fmt.Errorf("store: list keys: %w", err)
		}
		k.Created = time.UnixMilli(ms)
		if used.Valid {
			k.LastUsed = time.UnixMilli(used.Int64)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list keys: %w", err)
	}
	return out, nil
}

// HasKeys reports whether a key that is not revoked exists; the gateway
// asks on every request.
func (s *SQLite) HasKeys(ctx context.Context) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.live) > 0, nil
}

// RevokeKey revokes the key with id; its secret stops working at once.
// An unknown or already revoked id gives an error wrapping ErrNoSuchKey.
func (s *SQLite) RevokeKey(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx,
		`UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, s.clock.Now().UnixMilli(), id)
	if err != nil {
		return fmt.Errorf("store: revoke key %q: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: revoke key %q: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("store: revoke key %q: %w", id, ErrNoSuchKey)
	}
	s.mu.Lock()
	for sum, k := range s.live {
		if k.ID == id {
			delete(s.live, sum)
		}
	}
	s.mu.Unlock()
	return nil
}

// CheckKey returns the live key whose secret is secret, or an error
// wrapping ErrNoSuchKey. The lookup is by the secret's SHA-256, so its
// timing tells nothing about the secrets kept.
func (s *SQLite) CheckKey(ctx context.Context, secret string) (apikey.Key, error) {
	if secret == "" {
		return apikey.Key{}, ErrNoSuchKey
	}
	sum := sha256.Sum256([]byte(secret))
	s.mu.RLock()
	k, ok := s.live[sum]
	s.mu.RUnlock()
	if !ok {
		return apikey.Key{}, ErrNoSuchKey
	}
	return k, nil
}

// NoteKeyUsed records that the live key with id opened a request now. The
// database is written at most once a minute per key; the time kept is that
// of the write.
func (s *SQLite) NoteKeyUsed(ctx context.Context, id string) error {
	now := time.UnixMilli(s.clock.Now().UnixMilli())
	s.mu.Lock()
	found := false
	for h, k := range s.live {
		if k.ID == id {
			if now.Sub(k.LastUsed) < usedResolution {
				s.mu.Unlock()
				return nil
			}
			found = true
			k.LastUsed = now
			s.live[h] = k // claimed: concurrent requests of this key skip the write
			break
		}
	}
	s.mu.Unlock()
	if !found {
		return fmt.Errorf("store: note key %q used: %w", id, ErrNoSuchKey)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE api_keys SET last_used_at = ? WHERE id = ?`, now.UnixMilli(), id); err != nil {
		return fmt.Errorf("store: note key %q used: %w", id, err)
	}
	return nil
}
