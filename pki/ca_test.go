package pki

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
	"time"
)

// TestNewCA: the CA certificate of either key type is a CA, backdated,
// for certificate and CRL signing, and verifies the leaves it signs but
// no chain through a CA below it.
func TestNewCA(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for name, newKey := range map[string]func() (crypto.Signer, error){"ed25519": NewEd25519Key, "ecdsa": NewECDSAKey} {
		t.Run(name, func(t *testing.T) {
			key, err := newKey()
			if err != nil {
				t.Fatal(err)
			}
			ca, err := NewCA(pkix.Name{CommonName: "test CA"}, key, now, 24*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if !ca.IsCA || !ca.BasicConstraintsValid || !ca.MaxPathLenZero || ca.MaxPathLen != 0 {
				t.Errorf("constraints: IsCA %v valid %v MaxPathLen %d zero %v", ca.IsCA, ca.BasicConstraintsValid, ca.MaxPathLen, ca.MaxPathLenZero)
			}
			if ca.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign {
				t.Errorf("key usage %b, want certificate and CRL signing", ca.KeyUsage)
			}
			if !ca.NotBefore.Equal(now.Add(-Backdate)) || !ca.NotAfter.Equal(now.Add(24*time.Hour)) {
				t.Errorf("valid %v to %v", ca.NotBefore, ca.NotAfter)
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca)
			leaf, _ := sign(t, ca, key, "leaf", false)
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now}); err != nil {
				t.Errorf("a leaf the CA signed does not verify: %v", err)
			}
			sub, subKey := sign(t, ca, key, "intermediate", true)
			inters := x509.NewCertPool()
			inters.AddCert(sub)
			below, _ := sign(t, sub, subKey, "below", false)
			if _, err := below.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inters, CurrentTime: now}); err == nil {
				t.Error("a leaf under a CA below the root verifies; MaxPathLen 0 should refuse it")
			}
		})
	}
}

// sign issues a certificate named cn for a new key, signed by the
// issuer's key: a leaf for server auth, or a CA. It returns the new key.
func sign(t *testing.T, issuer *x509.Certificate, issuerKey crypto.Signer, cn string, isCA bool) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	key, err := NewECDSAKey()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: Serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: issuer.NotBefore, NotAfter: issuer.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, key.Public(), issuerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}
