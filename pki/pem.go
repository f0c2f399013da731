package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
)

// PEM block types.
const (
	certBlock = "CERTIFICATE"
	keyBlock  = "PRIVATE KEY" // PKCS#8
)

// NewECDSAKey makes an ECDSA P-256 key, the key type every TLS client
// accepts (the node's CA and its server certificate).
func NewECDSAKey() (crypto.Signer, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: ecdsa key: %w", err)
	}
	return k, nil
}

// NewEd25519Key makes an Ed25519 key (the cluster's CA and nodes).
func NewEd25519Key() (crypto.Signer, error) {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: ed25519 key: %w", err)
	}
	return k, nil
}

// Serial returns a random certificate serial number: positive, at most 127
// bits (RFC 5280 allows 20 octets), so that two certificates of one CA
// never share one.
func Serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126)) // crypto/rand does not fail
	return n.Add(n, big.NewInt(1))
}

// EncodeCert is a DER certificate in PEM.
func EncodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: certBlock, Bytes: der})
}

// EncodeKey is a private key in PKCS#8 PEM.
func EncodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: keyBlock, Bytes: der}), nil
}

// ParseCert reads the first PEM certificate in b.
func ParseCert(b []byte) (*x509.Certificate, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != certBlock {
		return nil, errors.New("pki: no PEM certificate")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return c, nil
}

// ParseKey reads a PKCS#8 PEM private key: Ed25519 or ECDSA, the two kinds
// Hearth has ever written.
func ParseKey(b []byte) (crypto.Signer, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("pki: no PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	switch k := k.(type) {
	case ed25519.PrivateKey:
		return k, nil
	case *ecdsa.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("pki: a %T key: want Ed25519 or ECDSA", k)
}

// ErrKeyMismatch means a private key is not the one its certificate
// names.
var ErrKeyMismatch = errors.New("pki: key does not match the certificate")

// ParsePair reads a certificate and its key and checks that they belong
// together (ErrKeyMismatch when not).
func ParsePair(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	cert, err := ParseCert(certPEM)
	if err != nil {
		return nil, nil, err
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, nil, err
	}
	if err := CheckPair(cert, key); err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// CheckPair returns ErrKeyMismatch unless key is cert's private key.
func CheckPair(cert *x509.Certificate, key crypto.Signer) error {
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return ErrKeyMismatch
	}
	return nil
}
