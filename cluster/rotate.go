package cluster

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The join secret can be replaced (RotateSecret): by hand, and by the
// inviter whenever it learns of a revoked node, since whoever took that
// node's token could otherwise join again from a fresh data directory.
// The secret is read from its file at each use, so that a rotation by
// another process (hearth cluster token --rotate beside a running daemon)
// holds at once. The SHA-256 of each replaced secret is kept, one per
// line, so that an old token is told why it is refused.

// joinSecret is the current join secret; nil for a node that cannot
// invite.
func (id *Identity) joinSecret() ([]byte, error) {
	if !id.CanInvite() || id.Dir == "" {
		return id.secret, nil
	}
	b, err := os.ReadFile(filepath.Join(id.Dir, secretFile))
	if err != nil {
		return nil, fmt.Errorf("cluster: join secret: %w", err)
	}
	return b, nil
}

// RotateSecret replaces the join secret: tokens made before are refused
// (ErrTokenRotated at the joiner) and Token hands out new ones. Nodes in
// the cluster are not affected. Only the node holding the CA key has a
// secret to rotate.
func (id *Identity) RotateSecret() error {
	if !id.CanInvite() {
		return errors.New("cluster: only the node that created the cluster holds the join secret")
	}
	old, err := id.joinSecret()
	if err != nil {
		return err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	retired, _ := os.ReadFile(filepath.Join(id.Dir, retiredFile))
	line := secretDigest(old) + "\n"
	if err := writeFile(id.Dir, retiredFile, append(retired, line...)); err != nil {
		return err
	}
	if err := writeFile(id.Dir, secretFile, secret); err != nil {
		return err
	}
	if id.Dir == "" {
		id.secret = secret
	}
	return nil
}

// retiredSecret reports a secret that RotateSecret replaced.
func (id *Identity) retiredSecret(secret []byte) bool {
	b, err := os.ReadFile(filepath.Join(id.Dir, retiredFile))
	if err != nil || len(secret) == 0 {
		return false
	}
	want := secretDigest(secret)
	for _, line := range strings.Split(string(b), "\n") {
		if line == want {
			return true
		}
	}
	return false
}

func secretDigest(secret []byte) string {
	sum := sha256.Sum256(secret)
	return hex.EncodeToString(sum[:])
}
