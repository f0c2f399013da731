package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// Files under the cluster directory (<data-dir>/cluster).
const (
	caCertFile   = "ca.pem"
	caKeyFile    = "ca-key.pem" // only on the node that created the cluster
	nodeCertFile = "node.pem"
	nodeKeyFile  = "node-key.pem"
	secretFile   = "join-secret"
	revokedFile  = "revoked.json"
	routesFile   = "routes.json" // peers' route URLs seen, to start from
)

// certLifetime is how long node and CA certificates are valid. Rotation is
// not implemented; a long lifetime keeps a LAN cluster working.
const certLifetime = 10 * 365 * 24 * time.Hour

// ErrNoCluster means the directory holds no cluster identity yet.
var ErrNoCluster = errors.New("this node belongs to no cluster")

// Identity is this node's membership of a cluster: the cluster CA, the
// node's own certificate and, on the node that created the cluster, the
// CA's key and the join secret.
type Identity struct {
	Dir    string
	CA     *x509.Certificate
	caKey  crypto.Signer // nil unless this node created the cluster
	secret []byte        // nil unless caKey is set
	Cert   tls.Certificate
	Leaf   *x509.Certificate
}

// NodeID is the id the CA gave this node (its certificate's common name).
func (id *Identity) NodeID() string { return id.Leaf.Subject.CommonName }

// Serial is this node's certificate serial, the key of revocation.
func (id *Identity) Serial() string { return id.Leaf.SerialNumber.Text(16) }

// CanInvite reports whether this node holds the CA key, so that it can
// issue tokens and sign joiners' certificates.
func (id *Identity) CanInvite() bool { return id.caKey != nil }

// Fingerprint is the SHA-256 of the CA certificate, which a token pins.
func (id *Identity) Fingerprint() [32]byte { return sha256.Sum256(id.CA.Raw) }

// ClusterID names the cluster in mDNS records and NATS: a hash of the CA
// certificate, never of the secret.
func (id *Identity) ClusterID() string { return ClusterIDOf(id.Fingerprint()) }

// ClusterIDOf is the cluster id for a CA fingerprint.
func ClusterIDOf(fp [32]byte) string { return hex.EncodeToString(fp[:6]) }

// Pool is a pool holding only the cluster CA.
func (id *Identity) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(id.CA)
	return p
}

// Load reads the identity kept in dir; ErrNoCluster when there is none.
func Load(dir string) (*Identity, error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, caCertFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoCluster
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	ca, err := parseCertPEM(caPEM)
	if err != nil {
		return nil, fmt.Errorf("cluster: ca: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, nodeCertFile), filepath.Join(dir, nodeKeyFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoCluster
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: node certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("cluster: node certificate: %w", err)
	}
	cert.Leaf = leaf
	id := &Identity{Dir: dir, CA: ca, Cert: cert, Leaf: leaf}
	if keyPEM, err := os.ReadFile(filepath.Join(dir, caKeyFile)); err == nil {
		key, err := parseKeyPEM(keyPEM)
		if err != nil {
			return nil, fmt.Errorf("cluster: ca key: %w", err)
		}
		secret, err := os.ReadFile(filepath.Join(dir, secretFile))
		if err != nil {
			return nil, fmt.Errorf("cluster: join secret: %w", err)
		}
		id.caKey, id.secret = key, secret
	}
	return id, nil
}

// Create makes a new cluster in dir: a CA (Ed25519), a join secret and
// this node's certificate (Ed25519). It refuses to overwrite an existing
// identity.
func Create(dir, nodeName string) (*Identity, error) {
	return create(dir, nodeName, newKey)
}

// newKey makes a node or CA key: Ed25519, which crypto/tls signs with in
// TLS 1.3 (and so the embedded NATS server's routes, which use crypto/tls).
func newKey() (crypto.Signer, error) {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return k, nil
}

// create is Create with the key generator as a parameter, so that a test
// can make the ECDSA identities earlier versions wrote.
func create(dir, nodeName string, genKey func() (crypto.Signer, error)) (*Identity, error) {
	if _, err := os.Stat(filepath.Join(dir, caCertFile)); err == nil {
		return nil, fmt.Errorf("cluster: %s already holds a cluster", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	caKey, err := genKey()
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Hearth cluster CA", Organization: []string{"Hearth"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("cluster: ca: %w", err)
	}
	ca, _ := x509.ParseCertificate(der)
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	nodeKey, err := genKey()
	if err != nil {
		return nil, err
	}
	nodeDER, err := signNode(ca, caKey, nodeKey.Public(), newNodeID(), nodeName)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(caKey)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := writeFiles(dir, map[string][]byte{
		caKeyFile:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		secretFile: secret,
	}); err != nil {
		return nil, err
	}
	if err := saveNode(dir, der, nodeDER, nodeKey); err != nil {
		return nil, err
	}
	return Load(dir)
}

// saveNode writes the CA certificate and this node's certificate and key.
func saveNode(dir string, caDER, nodeDER []byte, nodeKey crypto.Signer) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(nodeKey)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return writeFiles(dir, map[string][]byte{
		caCertFile:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		nodeCertFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: nodeDER}),
		nodeKeyFile:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	})
}

// Forget removes this node's certificate and key (hearth cluster leave):
// the CA stays, so a later join to another cluster starts clean only after
// the directory is removed.
func Forget(dir string) error {
	for _, f := range []string{nodeCertFile, nodeKeyFile, caCertFile, caKeyFile, secretFile, routesFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	return nil
}

func writeFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	for name, data := range files {
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	return nil
}

// signNode issues a node certificate, good for TLS servers and clients
// alike (NATS routes and the proxy dial both ways).
func signNode(ca *x509.Certificate, caKey crypto.Signer, pub crypto.PublicKey, nodeID, nodeName string) ([]byte, error) {
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: nodeID, OrganizationalUnit: []string{nodeName}, Organization: []string{"Hearth"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"hearth-node-" + nodeID},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		return nil, fmt.Errorf("cluster: sign node: %w", err)
	}
	return der, nil
}

func newNodeID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func randomSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return s.Add(s, big.NewInt(1)), nil
}

func parseCertPEM(b []byte) (*x509.Certificate, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(blk.Bytes)
}

// parseKeyPEM reads a PKCS#8 private key: Ed25519 as written since the CA
// became Ed25519, or ECDSA as earlier versions wrote, so that their
// identities still load (and their CA still signs new, Ed25519 nodes).
func parseKeyPEM(b []byte) (crypto.Signer, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	switch k := k.(type) {
	case ed25519.PrivateKey:
		return k, nil
	case *ecdsa.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("a %T key: want Ed25519 or ECDSA", k)
}
