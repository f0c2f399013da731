package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock/clocktest"
)

// TestRevocationRotatesTheJoinSecret: after a node is revoked, whoever
// kept the token it joined with cannot join again from a fresh data
// directory, is told why, and the inviter's token is a new one, which
// works.
func TestRevocationRotatesTheJoinSecret(t *testing.T) {
	nodes, _ := testCluster(t)
	a, b, c := nodes[0], nodes[1], nodes[2]
	old, err := a.id.Token([]string{a.ProxyAddr()})
	if err != nil {
		t.Fatal(err)
	}
	// b, which does not hold the secret, revokes: a rotates when it hears.
	if err := b.Revoke(c.id.NodeID()); err != nil {
		t.Fatal(err)
	}
	clocktest.WaitFor(t, "a to see c revoked", 2*time.Second, func() bool { return stateOf(a, c.id.NodeID()) == StateRevoked })
	var fresh Token
	clocktest.WaitFor(t, "a's token to change", 2*time.Second, func() bool {
		fresh, err = a.id.Token([]string{a.ProxyAddr()})
		return err == nil && fresh.String() != old.String()
	})
	_, err = Join(context.Background(), t.TempDir(), "c-again", old)
	if !errors.Is(err, ErrTokenRotated) || !strings.Contains(err.Error(), "hearth cluster token") {
		t.Fatalf("joining with the token of before the revocation: %v, want ErrTokenRotated", err)
	}
	if _, err := Join(context.Background(), t.TempDir(), "d", fresh); err != nil {
		t.Fatalf("joining with the new token: %v", err)
	}
}

// TestRotateSecret: a rotation by another process (hearth cluster token
// --rotate while the daemon runs) takes effect at once, and the files
// stay the owner's only.
func TestRotateSecret(t *testing.T) {
	nodes, _ := testCluster(t)
	a := nodes[0]
	old, _ := a.id.Token([]string{a.ProxyAddr()})
	other, err := Load(a.id.Dir) // what the command line loads
	if err != nil {
		t.Fatal(err)
	}
	if err := other.RotateSecret(); err != nil {
		t.Fatal(err)
	}
	if _, err := Join(context.Background(), t.TempDir(), "x", old); !errors.Is(err, ErrTokenRotated) {
		t.Fatalf("old token after rotation: %v", err)
	}
	fresh, _ := a.id.Token([]string{a.ProxyAddr()})
	if fresh.String() == old.String() {
		t.Fatal("the running node still hands out the old token")
	}
	if _, err := Join(context.Background(), t.TempDir(), "y", fresh); err != nil {
		t.Fatalf("new token: %v", err)
	}
	for _, f := range []string{secretFile, retiredFile} {
		st, err := os.Stat(filepath.Join(a.id.Dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, st.Mode(), err)
		}
	}
	if err := nodes[1].id.RotateSecret(); err == nil {
		t.Error("a node without the CA key rotated a secret")
	}
}
