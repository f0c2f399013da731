package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/hearth-llm/hearth/apikey"
	"github.com/hearth-llm/hearth/clock"
)

// MemoryStore is a KeyStore and SettingsStore kept in memory, for tests and
// for running without a database. It keeps only a SHA-256 of each secret.
type MemoryStore struct {
	clock clock.Clock

	mu       sync.Mutex
	keys     []memKey
	nextID   int
	settings Settings
	owner    string
}

type memKey struct {
	apikey.Key
	sum [sha256.Size]byte
}

var (
	_ KeyStore      = (*MemoryStore)(nil)
	_ SettingsStore = (*MemoryStore)(nil)
	_ OwnerStore    = (*MemoryStore)(nil)
)

// OwnerPassword returns the owner's password digest, if one was set.
func (m *MemoryStore) OwnerPassword(context.Context) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owner, m.owner != "", nil
}

// SetOwnerPassword keeps the owner's password digest.
func (m *MemoryStore) SetOwnerPassword(_ context.Context, digest string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.owner = digest
	return nil
}

// NewMemoryStore returns a store holding initial settings. Saved settings
// must name a policy from Policies (when it is not empty) and alias
// targets from Models (when it is not empty). A nil clk means real time.
func NewMemoryStore(initial Settings, clk clock.Clock) *MemoryStore {
	return &MemoryStore{clock: clock.Or(clk), settings: cloneSettings(initial)}
}

// CreateKey makes an inference key whose secret is "sk-hearth-" and 32
// random bytes.
func (m *MemoryStore) CreateKey(ctx context.Context, name string) (apikey.Key, string, error) {
	return m.CreateScopedKey(ctx, name, apikey.ScopeInference)
}

// CreateScopedKey makes a key with a scope.
func (m *MemoryStore) CreateScopedKey(_ context.Context, name, scope string) (apikey.Key, string, error) {
	if !apikey.ValidScope(scope) {
		return apikey.Key{}, "", fmt.Errorf("unknown scope %q", scope)
	}
	var b [32]byte
	rand.Read(b[:])
	secret := "sk-hearth-" + base64.RawURLEncoding.EncodeToString(b[:])
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nextID++
	k := memKey{
		Key: apikey.Key{
			ID:      fmt.Sprintf("k%d", m.nextID),
			Name:    name,
			Hint:    "sk-hearth-…" + secret[len(secret)-4:],
			Scope:   scope,
			Created: m.clock.Now(),
		},
		sum: sha256.Sum256([]byte(secret)),
	}
	m.keys = append(m.keys, k)
	return k.Key, secret, nil
}

// Keys lists the keys, oldest first.
func (m *MemoryStore) Keys(context.Context) ([]apikey.Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]apikey.Key, len(m.keys))
	for i, k := range m.keys {
		out[i] = k.Key
	}
	return out, nil
}

// RevokeKey deletes a key.
func (m *MemoryStore) RevokeKey(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.IndexFunc(m.keys, func(k memKey) bool { return k.ID == id })
	if i < 0 {
		return fmt.Errorf("revoke %q: %w", id, ErrNoSuchKey)
	}
	m.keys = slices.Delete(m.keys, i, i+1)
	return nil
}

// CheckKey finds the key of a secret, comparing digests in constant time.
func (m *MemoryStore) CheckKey(_ context.Context, secret string) (apikey.Key, error) {
	sum := sha256.Sum256([]byte(secret))
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range m.keys {
		if subtle.ConstantTimeCompare(sum[:], k.sum[:]) == 1 {
			return k.Key, nil
		}
	}
	return apikey.Key{}, ErrNoSuchKey
}

// Settings returns a copy of the settings.
func (m *MemoryStore) Settings(context.Context) (Settings, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return cloneSettings(m.settings), nil
}

// SaveSettings checks s against the known policies and models and keeps
// its policy and aliases.
func (m *MemoryStore) SaveSettings(_ context.Context, s Settings) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.settings.Policies) > 0 && !slices.Contains(m.settings.Policies, s.Policy) {
		return fmt.Errorf("%w: unknown routing policy %q", ErrInvalidSettings, s.Policy)
	}
	for _, a := range s.Aliases {
		if len(m.settings.Models) > 0 && !slices.Contains(m.settings.Models, a.To) {
			return fmt.Errorf("%w: alias %q points at %q, which is not served (served: %s)",
				ErrInvalidSettings, a.From, a.To, strings.Join(m.settings.Models, ", "))
		}
	}
	m.settings.Policy = s.Policy
	m.settings.Aliases = slices.Clone(s.Aliases)
	return nil
}

func cloneSettings(s Settings) Settings {
	s.Policies = slices.Clone(s.Policies)
	s.Models = slices.Clone(s.Models)
	s.Aliases = slices.Clone(s.Aliases)
	return s
}
