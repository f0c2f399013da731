package daemon

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/api/store"
	"github.com/hearth-llm/hearth/apikey"
	"github.com/hearth-llm/hearth/console"
)

// keyStore is the console's view of the API keys: those kept in the
// database and those given on the command line.
type keyStore struct {
	db     *store.SQLite
	static []string
}

var (
	_ console.KeyStore    = (*keyStore)(nil)
	_ api.KeyChecker      = apiKeys{}
	_ api.AdminKeyChecker = apiKeys{}
)

// staticKeyID marks a login with a command-line key; no stored key has it.
const staticKeyID = "cli"

// CreateKey copies name first: the console hands over strings that point
// into fasthttp's reused request buffers, and keeps the key it gets back.
func (k *keyStore) CreateKey(ctx context.Context, name string) (apikey.Key, string, error) {
	return k.CreateScopedKey(ctx, name, apikey.ScopeInference)
}

func (k *keyStore) CreateScopedKey(ctx context.Context, name, scope string) (apikey.Key, string, error) {
	key, secret, err := k.db.CreateScopedKey(ctx, strings.Clone(name), strings.Clone(scope))
	if err != nil {
		return apikey.Key{}, "", err
	}
	return key, secret, nil
}

func (k *keyStore) Keys(ctx context.Context) ([]apikey.Key, error) { return k.db.Keys(ctx) }

func (k *keyStore) RevokeKey(ctx context.Context, id string) error {
	err := k.db.RevokeKey(ctx, id)
	if errors.Is(err, store.ErrNoSuchKey) {
		return fmt.Errorf("revoke %q: %w", id, console.ErrNoSuchKey)
	}
	return err
}

func (k *keyStore) CheckKey(ctx context.Context, secret string) (apikey.Key, error) {
	for _, s := range k.static {
		if subtle.ConstantTimeCompare([]byte(secret), []byte(s)) == 1 {
			// The operator's own keys: they open everything.
			return apikey.Key{ID: staticKeyID, Name: "--api-key", Scope: apikey.ScopeAdmin}, nil
		}
	}
	key, err := k.db.CheckKey(ctx, secret)
	if errors.Is(err, store.ErrNoSuchKey) {
		return apikey.Key{}, console.ErrNoSuchKey
	}
	if err != nil {
		return apikey.Key{}, err
	}
	return key, nil
}

// apiKeys lets the gateway check the keys: those of the command line and
// those created in the console. It is the one place that says whether the
// API needs a key.
type apiKeys struct{ keys *keyStore }

func (a apiKeys) HasKeys(ctx context.Context) (bool, error) {
	if len(a.keys.static) > 0 {
		return true, nil
	}
	return a.keys.db.HasKeys(ctx)
}

// CheckKey accepts any live key on /v1 and notes its use (written at
// most once a minute per key, for the console's "last used").
func (a apiKeys) CheckKey(ctx context.Context, secret string) error {
	k, err := a.keys.CheckKey(ctx, secret)
	if err != nil {
		return err
	}
	if k.ID != staticKeyID {
		if err := a.keys.db.NoteKeyUsed(ctx, k.ID); err != nil && !errors.Is(err, store.ErrNoSuchKey) {
			return err
		}
	}
	return nil
}

// IsAdminKey tells the gateway which keys open /metrics from the network.
func (a apiKeys) IsAdminKey(ctx context.Context, secret string) bool {
	k, err := a.keys.CheckKey(ctx, secret)
	return err == nil && k.Scope == apikey.ScopeAdmin
}

// required reports whether the API needs a key right now; when the
// database cannot tell, it does.
func (a apiKeys) required(ctx context.Context) bool {
	has, err := a.HasKeys(ctx)
	return err != nil || has
}

// keylessClients tells the console which clients the gateway served
// without a key. gw is set once the gateway is built, after the console it
// mounts; until then there are none.
type keylessClients struct{ gw *api.Gateway }

var _ console.KeylessClients = (*keylessClients)(nil)

func (k *keylessClients) ClientsWithoutKey(_ context.Context, since time.Time) ([]console.KeylessClient, error) {
	if k.gw == nil {
		return nil, nil
	}
	seen := k.gw.ClientsWithoutKey(since)
	out := make([]console.KeylessClient, len(seen))
	for i, c := range seen {
		out[i] = console.KeylessClient{Client: c.Client, LastSeen: c.LastSeen}
	}
	return out, nil
}
