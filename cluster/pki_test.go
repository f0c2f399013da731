package cluster

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/pki"
)

// A new cluster's CA and every node's key are Ed25519, the joiner's too.
func TestKeysAreEd25519(t *testing.T) {
	id, err := Create(t.TempDir(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if id.CA.PublicKeyAlgorithm != x509.Ed25519 || id.CA.SignatureAlgorithm != x509.PureEd25519 || id.Leaf.PublicKeyAlgorithm != x509.Ed25519 {
		t.Fatalf("CA key %v signed %v, node key %v: want Ed25519", id.CA.PublicKeyAlgorithm, id.CA.SignatureAlgorithm, id.Leaf.PublicKeyAlgorithm)
	}
	a, _ := testNode(t, id, "a", nil)
	tok, _ := id.Token([]string{a.ProxyAddr()})
	res, err := Join(context.Background(), t.TempDir(), "b", tok)
	if err != nil {
		t.Fatal(err)
	}
	if leaf := res.Identity.Leaf; leaf.PublicKeyAlgorithm != x509.Ed25519 || leaf.SignatureAlgorithm != x509.PureEd25519 {
		t.Fatalf("joined node's certificate: key %v, signed %v", leaf.PublicKeyAlgorithm, leaf.SignatureAlgorithm)
	}
	keyPEM, err := os.ReadFile(filepath.Join(res.Identity.Dir, nodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pki.ParseKey(keyPEM); err != nil {
		t.Fatalf("the joined node's key does not parse back: %v", err)
	}
}

// An identity written by an earlier version (ECDSA P-256 CA and node keys,
// PKCS#8) still loads, still invites, and its CA signs a new, Ed25519
// joiner with which it forms NATS routes over mutual TLS.
func TestEarlierECDSAIdentityStillWorks(t *testing.T) {
	dir := t.TempDir()
	ecKey := func() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }
	if _, err := create(dir, "old", ecKey); err != nil {
		t.Fatal(err)
	}
	id, err := Load(dir)
	if err != nil {
		t.Fatalf("an ECDSA identity does not load: %v", err)
	}
	if !id.CanInvite() || id.CA.PublicKeyAlgorithm != x509.ECDSA || id.Leaf.PublicKeyAlgorithm != x509.ECDSA {
		t.Fatalf("loaded: can invite %v, CA %v, node %v", id.CanInvite(), id.CA.PublicKeyAlgorithm, id.Leaf.PublicKeyAlgorithm)
	}
	old, _ := testNode(t, id, "old", nil)
	tok, _ := id.Token([]string{old.ProxyAddr()})
	res, err := Join(context.Background(), t.TempDir(), "new", tok)
	if err != nil {
		t.Fatal(err)
	}
	if res.Identity.Leaf.PublicKeyAlgorithm != x509.Ed25519 || res.Identity.Leaf.SignatureAlgorithm != x509.ECDSAWithSHA256 {
		t.Fatalf("new node under the old CA: key %v, signed %v", res.Identity.Leaf.PublicKeyAlgorithm, res.Identity.Leaf.SignatureAlgorithm)
	}
	nw, _ := testNode(t, res.Identity, "new", res.Routes)
	waitAllUp(t, 10*time.Second, nil, old, nw)
	if old.NumRoutes() == 0 || nw.NumRoutes() == 0 {
		t.Fatalf("routes: old %d, new %d", old.NumRoutes(), nw.NumRoutes())
	}
}

// A CA key that is not the CA certificate's (a set torn by hand: the
// writes themselves put files in place as one set) is refused, not used
// to sign certificates no node would trust.
func TestLoadRefusesAnotherCAKey(t *testing.T) {
	dir := t.TempDir()
	if _, err := Create(dir, "a"); err != nil {
		t.Fatal(err)
	}
	other, err := Create(t.TempDir(), "b")
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(other.Dir, caKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, caKeyFile), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); !errors.Is(err, pki.ErrKeyMismatch) {
		t.Fatalf("Load with another cluster's CA key: %v, want ErrKeyMismatch", err)
	}
}
