package cluster

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
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
	if _, err := parseKeyPEM(keyPEM); err != nil {
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

func TestParseKeyPEMRefusesOtherKeys(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("not pem"), []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")} {
		if _, err := parseKeyPEM(b); err == nil {
			t.Errorf("parseKeyPEM(%q) accepted", b)
		}
	}
}
