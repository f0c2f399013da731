package tlsca

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/pki"
)

// File names inside the directory given to LoadOrCreate.
const (
	CAFile        = "ca.pem"
	CAKeyFile     = "ca-key.pem"
	ServerFile    = "server.pem"
	ServerKeyFile = "server-key.pem"
)

const (
	caLifetime     = 10 * 365 * 24 * time.Hour
	serverLifetime = 397 * 24 * time.Hour // the longest browsers accept
	// renewBefore is how long before expiry a server certificate is issued
	// again, so that a daemon restarted now and then never serves one that
	// has run out.
	renewBefore = 30 * 24 * time.Hour
)

// Authority is a CA whose key is at hand.
type Authority struct {
	dir  string
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

// LoadOrCreate reads the CA kept in dir, or makes one there (the
// directory with mode 0700) when dir has none. name goes into the CA's
// subject, so that a user who trusted it can tell it apart in a trust
// store ("Hearth CA workstation").
func LoadOrCreate(dir, name string, now time.Time) (*Authority, error) {
	if err := pki.Recover(dir); err != nil {
		return nil, fmt.Errorf("tlsca: %w", err)
	}
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		cert, key, err := pki.ParsePair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("tlsca: %s: %w", certPath, err)
		}
		if !cert.IsCA {
			return nil, fmt.Errorf("tlsca: %s is not a CA certificate", certPath)
		}
		return &Authority{dir: dir, cert: cert, key: key, pem: certPEM}, nil
	case errors.Is(certErr, os.ErrNotExist) && errors.Is(keyErr, os.ErrNotExist):
	case certErr != nil && !errors.Is(certErr, os.ErrNotExist):
		return nil, fmt.Errorf("tlsca: %w", certErr)
	case keyErr != nil && !errors.Is(keyErr, os.ErrNotExist):
		return nil, fmt.Errorf("tlsca: %w", keyErr)
	default:
		// Half a CA (a file removed by hand: the two are written as one
		// set): making a new one would silently break every client that
		// trusts the old; the user decides.
		return nil, fmt.Errorf("tlsca: %s and %s must both exist or both be absent; remove the one left to make a new CA", certPath, keyPath)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tlsca: %w", err)
	}
	key, err := pki.NewECDSAKey()
	if err != nil {
		return nil, fmt.Errorf("tlsca: CA key: %w", err)
	}
	subject := pkix.Name{CommonName: strings.TrimSpace("Hearth CA " + name), Organization: []string{"Hearth"}}
	cert, err := pki.NewCA(subject, key, now, caLifetime)
	if err != nil {
		return nil, fmt.Errorf("tlsca: %w", err)
	}
	certPEM = pki.EncodeCert(cert.Raw)
	if err := writePair(dir, CAFile, certPEM, CAKeyFile, key); err != nil {
		return nil, err
	}
	return &Authority{dir: dir, cert: cert, key: key, pem: certPEM}, nil
}

// CertPath is the CA certificate's file, what clients are told to trust.
func (a *Authority) CertPath() string { return filepath.Join(a.dir, CAFile) }

// CertPEM is the CA certificate in PEM.
func (a *Authority) CertPEM() []byte { return bytes.Clone(a.pem) }

// Certificate is the CA certificate.
func (a *Authority) Certificate() *x509.Certificate { return a.cert }

// Fingerprint is the SHA-256 of the CA certificate, as colon-separated hex
// bytes (what browsers and `openssl x509 -fingerprint -sha256` show).
func (a *Authority) Fingerprint() string { return Fingerprint(a.cert) }

// Fingerprint formats the SHA-256 of a certificate's DER bytes.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	var b strings.Builder
	for i, x := range sum {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02X", x)
	}
	return b.String()
}

// Names are what a server certificate must cover.
type Names struct {
	DNS []string
	IPs []net.IP
}

// normalized sorts and deduplicates, so that two lists naming the same
// things compare equal.
func (n Names) normalized() Names {
	var out Names
	for _, d := range n.DNS {
		d = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(d), "."))
		if d != "" && !slices.Contains(out.DNS, d) {
			out.DNS = append(out.DNS, d)
		}
	}
	for _, ip := range n.IPs {
		if ip == nil {
			continue
		}
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		if !slices.ContainsFunc(out.IPs, ip.Equal) {
			out.IPs = append(out.IPs, ip)
		}
	}
	slices.Sort(out.DNS)
	slices.SortFunc(out.IPs, func(a, b net.IP) int { return bytes.Compare(a.To16(), b.To16()) })
	return out
}

// LocalNames lists what a node's clients may call it: localhost, the host
// name and HOSTNAME.local (mDNS), the loopback addresses and addrs (the
// LAN addresses).
func LocalNames(hostname string, addrs []net.IP) Names {
	n := Names{DNS: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}
	if h := strings.TrimSuffix(strings.TrimSpace(hostname), "."); h != "" {
		short, _, _ := strings.Cut(h, ".")
		n.DNS = append(n.DNS, h, short, short+".local")
	}
	for _, ip := range addrs {
		if ip.IsLinkLocalUnicast() && ip.To4() == nil {
			continue // fe80:: needs a zone, which no certificate can name
		}
		n.IPs = append(n.IPs, ip)
	}
	return n.normalized()
}

// ServerCertificate returns the server certificate kept next to the CA
// when it was issued by this CA, covers names and is not near expiry;
// otherwise it issues one, keeps it and returns it. The chain served holds
// the CA too, which clients that already trust it ignore.
func (a *Authority) ServerCertificate(names Names, now time.Time) (tls.Certificate, error) {
	names = names.normalized()
	if len(names.DNS) == 0 && len(names.IPs) == 0 {
		return tls.Certificate{}, errors.New("tlsca: a server certificate needs at least one name")
	}
	if err := pki.Recover(a.dir); err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsca: %w", err)
	}
	certPath, keyPath := filepath.Join(a.dir, ServerFile), filepath.Join(a.dir, ServerKeyFile)
	if certPEM, err := os.ReadFile(certPath); err == nil {
		if keyPEM, err := os.ReadFile(keyPath); err == nil {
			if cert, key, err := pki.ParsePair(certPEM, keyPEM); err == nil && a.stillGood(cert, names, now) {
				return tls.Certificate{Certificate: [][]byte{cert.Raw, a.cert.Raw}, PrivateKey: key, Leaf: cert}, nil
			}
		}
	}
	key, err := pki.NewECDSAKey()
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsca: server key: %w", err)
	}
	cn := "localhost"
	if len(names.DNS) > 0 {
		cn = names.DNS[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: pki.Serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"Hearth"}},
		NotBefore:    now.Add(-pki.Backdate),
		NotAfter:     now.Add(serverLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     names.DNS,
		IPAddresses:  names.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsca: server certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsca: server certificate: %w", err)
	}
	if err := writePair(a.dir, ServerFile, pki.EncodeCert(der), ServerKeyFile, key); err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: key, Leaf: cert}, nil
}

// stillGood reports whether a kept server certificate may be served again.
func (a *Authority) stillGood(cert *x509.Certificate, names Names, now time.Time) bool {
	if cert.CheckSignatureFrom(a.cert) != nil || now.Add(renewBefore).After(cert.NotAfter) || now.Before(cert.NotBefore) {
		return false
	}
	have := Names{DNS: cert.DNSNames, IPs: cert.IPAddresses}.normalized()
	return slices.Equal(have.DNS, names.DNS) && slices.EqualFunc(have.IPs, names.IPs, net.IP.Equal)
}

// LoadKeyPair reads a certificate (with its chain) and key the user
// provides, and checks that they belong together.
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsca: %w", err)
	}
	return c, nil
}

// ServerConfig is a TLS configuration serving cert: TLS 1.2 and later,
// HTTP/1.1 only (the API server speaks nothing else).
func ServerConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	}
}

// writePair keeps a certificate and its key as one set: after a crash
// the directory holds both old files or both new ones.
func writePair(dir, certFile string, certPEM []byte, keyFile string, key crypto.Signer) error {
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return fmt.Errorf("tlsca: %w", err)
	}
	if err := pki.WriteSet(dir, pki.File{Name: keyFile, Data: keyPEM, Mode: 0o600}, pki.File{Name: certFile, Data: certPEM, Mode: 0o644}); err != nil {
		return fmt.Errorf("tlsca: %w", err)
	}
	return nil
}
