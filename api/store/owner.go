package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// settingOwnerPassword is the settings row of the console owner's
// password digest. The digest is the console's (salted and slow); the
// store keeps it as given.
const settingOwnerPassword = "owner_password"

// OwnerPassword returns the console owner's password digest; ok is false
// while none was set.
func (s *SQLite) OwnerPassword(ctx context.Context) (digest string, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = ?`, settingOwnerPassword).Scan(&digest)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("store: read owner password: %w", err)
	}
	return digest, true, nil
}

// SetOwnerPassword keeps the console owner's password digest.
func (s *SQLite) SetOwnerPassword(ctx context.Context, digest string) error {
	if digest == "" {
		return errors.New("store: empty owner password digest")
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = excluded.value`, settingOwnerPassword, digest)
	if err != nil {
		return fmt.Errorf("store: set owner password: %w", err)
	}
	return nil
}
