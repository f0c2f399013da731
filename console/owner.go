package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
)

// OwnerStore keeps the console owner's password digest (an opaque string
// the console makes and reads back). The console asks once at start and
// then only writes.
type OwnerStore interface {
	// OwnerPassword returns the digest; ok is false while none is set.
	OwnerPassword(ctx context.Context) (digest string, ok bool, err error)
	// SetOwnerPassword keeps digest.
	SetOwnerPassword(ctx context.Context, digest string) error
}

var errOwnerExists = errors.New("console: the owner's password is already set")

// ownerState is the owner's password digest in memory, and the setup
// token while none is set. The token is checked by its SHA-256; its text
// is kept only so that the daemon can print it.
type ownerState struct {
	mu       sync.Mutex
	store    OwnerStore
	digest   string
	token    string
	tokenSum [sha256.Size]byte
}

func (o *ownerState) load(ctx context.Context, store OwnerStore) error {
	digest, ok, err := store.OwnerPassword(ctx)
	if err != nil {
		return fmt.Errorf("console: read the owner's password: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.store = store
	if ok {
		if _, err := parsePasswordDigest(digest); err != nil {
			return fmt.Errorf("console: the stored owner's password: %w", err)
		}
		o.digest = digest
		return nil
	}
	var b [24]byte
	rand.Read(b[:]) // never fails
	o.token = base64.RawURLEncoding.EncodeToString(b[:])
	o.tokenSum = sha256.Sum256([]byte(o.token))
	return nil
}

// enabled reports whether the console has an owner store at all.
func (o *ownerState) enabled() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.store != nil
}

func (o *ownerState) isSet() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.digest != ""
}

func (o *ownerState) passwordDigest() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.digest
}

func (o *ownerState) setupToken() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.digest != "" {
		return ""
	}
	return o.token
}

func (o *ownerState) checkToken(token string) bool {
	sum := sha256.Sum256([]byte(token))
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.store != nil && o.digest == "" && o.token != "" && subtle.ConstantTimeCompare(sum[:], o.tokenSum[:]) == 1
}

// set keeps the first password; a second setup loses the race.
func (o *ownerState) set(ctx context.Context, digest string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.digest != "" {
		return errOwnerExists
	}
	if err := o.store.SetOwnerPassword(ctx, digest); err != nil {
		return err
	}
	o.digest, o.token, o.tokenSum = digest, "", [sha256.Size]byte{}
	return nil
}
