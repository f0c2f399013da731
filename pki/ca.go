package pki

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"time"
)

// Backdate is how long before its making a certificate is valid from:
// the clocks of clients and peers run a little behind.
const Backdate = time.Hour

// NewCA makes the self-signed certificate of a certificate authority for
// key, valid from Backdate before now for lifetime: it signs end-entity
// certificates only (MaxPathLen 0, no intermediate CA below it) and its
// key usage is certificate and CRL signing, as the CA/Browser Forum's
// baseline asks of a root. Both of Hearth's CAs (tlsca's and the
// cluster's) are made here; each chooses its subject, key and lifetime.
func NewCA(subject pkix.Name, key crypto.Signer, now time.Time, lifetime time.Duration) (*x509.Certificate, error) {
	tmpl := &x509.Certificate{
		SerialNumber:          Serial(),
		Subject:               subject,
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	return cert, nil
}
