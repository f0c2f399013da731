package cluster

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// joinPath is where the cluster port takes join requests.
const joinPath = "/cluster/v1/join"

// ErrJoinRefused means the inviter refused the token's secret.
var ErrJoinRefused = errors.New("join refused: the token's secret is wrong or the cluster no longer accepts it")

// ErrTokenRotated means the token's secret was replaced (hearth cluster
// token --rotate, or a node's revocation).
var ErrTokenRotated = errors.New("join refused: this token's secret was replaced (a node was revoked, or the owner ran hearth cluster token --rotate); ask the cluster's owner for the new one: hearth cluster token")

// tokenRotatedMark is the body of the inviter's refusal of a replaced
// secret.
const tokenRotatedMark = "join secret rotated"

// ErrWrongCluster means the node at the token's address does not hold a
// certificate of the CA the token names; nothing was sent to it.
var ErrWrongCluster = errors.New("the node at the token's address is not of the token's cluster")

type joinRequest struct {
	Secret []byte `json:"secret"`
	CSR    []byte `json:"csr"` // DER
	Name   string `json:"name"`
}

type joinResponse struct {
	CA     []byte   `json:"ca"`   // DER
	Cert   []byte   `json:"cert"` // DER
	NodeID string   `json:"node_id"`
	Routes []string `json:"routes"` // the inviter's NATS route URLs
}

// joinHandler answers join requests with a certificate signed by the CA,
// and nothing at all (403, empty body) for a wrong secret, except that a
// secret RotateSecret replaced is told so (tokenRotatedMark).
func (n *Node) joinHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "", http.StatusMethodNotAllowed)
		return
	}
	var req joinRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	id := n.id
	secret, err := id.joinSecret()
	if err != nil {
		n.log.Error("cluster: reading the join secret", "err", err)
	}
	if !id.CanInvite() || err != nil || subtle.ConstantTimeCompare(req.Secret, secret) != 1 {
		n.log.Warn("cluster: join refused", "from", r.RemoteAddr)
		w.WriteHeader(http.StatusForbidden)
		if id.CanInvite() && id.retiredSecret(req.Secret) {
			// The holder knew the secret: telling it the secret changed
			// reveals nothing it did not know.
			_, _ = io.WriteString(w, tokenRotatedMark)
		}
		return
	}
	csr, err := x509.ParseCertificateRequest(req.CSR)
	if err != nil || csr.CheckSignature() != nil {
		http.Error(w, "bad certificate request", http.StatusBadRequest)
		return
	}
	nodeID := newNodeID()
	der, err := signNode(id.CA, id.caKey, csr.PublicKey, nodeID, req.Name)
	if err != nil {
		http.Error(w, "signing failed", http.StatusInternalServerError)
		return
	}
	n.log.Info("cluster: node joined", "node", nodeID, "name", req.Name, "from", r.RemoteAddr)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(joinResponse{CA: id.CA.Raw, Cert: der, NodeID: nodeID, Routes: []string{n.RouteURL()}})
}

// JoinResult is what a successful join brings back.
type JoinResult struct {
	Identity *Identity
	Routes   []string // NATS route URLs to start from
}

// Join contacts the token's addresses in turn, proves the secret over TLS
// pinned to the token's CA fingerprint, and writes the node certificate it
// gets into dir. It sends the secret to no server that fails the pin.
func Join(ctx context.Context, dir, nodeName string, tok Token) (*JoinResult, error) {
	key, csr, err := newJoinKey()
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(joinRequest{Secret: tok.Secret, CSR: csr, Name: nodeName})
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: pinnedTLS(tok.Fingerprint)}}
	defer client.CloseIdleConnections()
	var errs []error
	for _, addr := range tok.Addrs {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+joinPath, bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		resp, err := client.Do(req)
		if err != nil {
			if errors.Is(err, ErrWrongCluster) {
				errs = append(errs, fmt.Errorf("%s: %w", addr, ErrWrongCluster))
			} else {
				errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			}
			continue
		}
		var jr joinResponse
		raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode == http.StatusForbidden {
			if strings.TrimSpace(string(raw)) == tokenRotatedMark {
				return nil, ErrTokenRotated
			}
			return nil, ErrJoinRefused
		}
		if err == nil {
			err = json.Unmarshal(raw, &jr)
		}
		if resp.StatusCode != http.StatusOK || err != nil {
			errs = append(errs, fmt.Errorf("%s: status %d: %v", addr, resp.StatusCode, err))
			continue
		}
		return keepJoinAnswer(dir, jr, key, tok.Fingerprint)
	}
	return nil, fmt.Errorf("cluster: join: %w", errors.Join(errs...))
}

// pinnedTLS trusts a server only if it presents a chain that ends in the
// CA certificate with the given fingerprint.
func pinnedTLS(fp [32]byte) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // replaced by the pin below; the token carries no host name
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			var ca *x509.Certificate
			for _, c := range raw {
				if sha256.Sum256(c) == fp {
					ca, _ = x509.ParseCertificate(c)
				}
			}
			if ca == nil || len(raw) == 0 {
				return ErrWrongCluster
			}
			leaf, err := x509.ParseCertificate(raw[0])
			if err != nil || !servesFor(leaf, ca) {
				return ErrWrongCluster
			}
			return nil
		},
	}
}

// servesFor reports whether leaf is a server certificate that ca signed.
func servesFor(leaf, ca *x509.Certificate) bool {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err == nil
}

// newJoinKey makes a joining node's key and the certificate request that
// carries its public half.
func newJoinKey() (crypto.Signer, []byte, error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: %w", err)
	}
	return key, csr, nil
}

// keepJoinAnswer saves the identity an inviter sent a joiner, if its CA is
// the one the joiner trusts (fp) and the certificate verifies against it;
// otherwise it keeps nothing.
func keepJoinAnswer(dir string, jr joinResponse, key crypto.Signer, fp [32]byte) (*JoinResult, error) {
	if sha256.Sum256(jr.CA) != fp {
		return nil, ErrWrongCluster
	}
	if err := saveNode(dir, jr.CA, jr.Cert, key); err != nil {
		return nil, err
	}
	id, err := Load(dir)
	if err == nil {
		_, err = id.Leaf.Verify(x509.VerifyOptions{Roots: id.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	}
	if err != nil {
		_ = Forget(dir)
		return nil, fmt.Errorf("cluster: the certificate received does not verify: %w", err)
	}
	return &JoinResult{Identity: id, Routes: jr.Routes}, nil
}
