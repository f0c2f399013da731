package cluster

import (
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hearth-llm/hearth/atomicfile"
	"github.com/hearth-llm/hearth/pki"
)

// Files under the cluster directory (<data-dir>/cluster).
const (
	caCertFile   = "ca.pem"
	caKeyFile    = "ca-key.pem" // only on the node that created the cluster
	nodeCertFile = "node.pem"
	nodeKeyFile  = "node-key.pem"
	secretFile   = "join-secret"
	retiredFile  = "join-secret-retired"
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
	if err := pki.Recover(dir); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, caCertFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoCluster
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	ca, err := pki.ParseCert(caPEM)
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
		key, err := pki.ParseKey(keyPEM)
		if err == nil {
			err = pki.CheckPair(ca, key)
		}
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
	k, err := pki.NewEd25519Key()
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return k, nil
}

// create is Create with the key generator as a parameter, so that a test
// can make the ECDSA identities earlier versions wrote.
func create(dir, nodeName string, genKey func() (crypto.Signer, error)) (*Identity, error) {
	if err := pki.Recover(dir); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
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
	ca, err := pki.NewCA(pkix.Name{CommonName: "Hearth cluster CA", Organization: []string{"Hearth"}}, caKey, time.Now(), certLifetime)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
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
	caKeyPEM, err := pki.EncodeKey(caKey)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := saveNode(dir, ca.Raw, nodeDER, nodeKey,
		pki.File{Name: caKeyFile, Data: caKeyPEM, Mode: 0o600},
		pki.File{Name: secretFile, Data: secret, Mode: 0o600}); err != nil {
		return nil, err
	}
	return Load(dir)
}

// saveNode writes the CA certificate and this node's certificate and key,
// with the inviter's files (CA key, join secret) when it creates the
// cluster, as one set: a crash leaves all of them or none.
func saveNode(dir string, caDER, nodeDER []byte, nodeKey crypto.Signer, inviter ...pki.File) error {
	keyPEM, err := pki.EncodeKey(nodeKey)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	files := append([]pki.File{
		{Name: caCertFile, Data: pki.EncodeCert(caDER), Mode: 0o600},
		{Name: nodeCertFile, Data: pki.EncodeCert(nodeDER), Mode: 0o600},
		{Name: nodeKeyFile, Data: keyPEM, Mode: 0o600},
	}, inviter...)
	if err := pki.WriteSet(dir, files...); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
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

// writeFile replaces one file under the cluster directory atomically and
// durably (the revocation list, the routes seen).
func writeFile(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, name), data, 0o600); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// signNode issues a node certificate, good for TLS servers and clients
// alike (NATS routes and the proxy dial both ways).
func signNode(ca *x509.Certificate, caKey crypto.Signer, pub crypto.PublicKey, nodeID, nodeName string) ([]byte, error) {
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: pki.Serial(),
		Subject:      pkix.Name{CommonName: nodeID, OrganizationalUnit: []string{nodeName}, Organization: []string{"Hearth"}},
		NotBefore:    now.Add(-pki.Backdate),
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
