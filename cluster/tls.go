package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// errRevoked refuses a peer whose certificate is on the revocation list.
var errRevoked = errors.New("cluster: peer certificate revoked")

// servingCert is this node's certificate with the CA appended, so that a
// joiner can check the chain against the fingerprint in its token.
func (id *Identity) servingCert() tls.Certificate {
	c := id.Cert
	c.Certificate = append(append([][]byte(nil), id.Cert.Certificate[0]), id.CA.Raw)
	return c
}

// verifyPeer checks a peer's chain against the cluster CA (without a host
// name: nodes are named by their certificates, not by DNS) and refuses a
// revoked serial. wantNode, when not empty, is the node id the peer must be.
func (n *Node) verifyPeer(raw [][]byte, wantNode string, usage x509.ExtKeyUsage) error {
	if len(raw) == 0 {
		return errors.New("cluster: peer sent no certificate")
	}
	leaf, err := x509.ParseCertificate(raw[0])
	if err != nil {
		return fmt.Errorf("cluster: peer certificate: %w", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: n.pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return fmt.Errorf("cluster: peer certificate: %w", err)
	}
	if n.revoked.serialRevoked(leaf.SerialNumber.Text(16)) {
		return errRevoked
	}
	if wantNode != "" && leaf.Subject.CommonName != wantNode {
		return fmt.Errorf("cluster: peer is node %s, want %s", leaf.Subject.CommonName, wantNode)
	}
	return nil
}

// mutualTLS is the configuration of node-to-node connections, both ends:
// each side must present a certificate of the CA that is not revoked.
// wantNode pins the server's node id on connections this node dials.
func (n *Node) mutualTLS(wantNode string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{n.id.servingCert()},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    n.pool,
		// Server names are not checked: the chain and the node id are,
		// in VerifyConnection, for dialled and accepted connections alike.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			raw := make([][]byte, len(cs.PeerCertificates))
			for i, c := range cs.PeerCertificates {
				raw[i] = c.Raw
			}
			usage := x509.ExtKeyUsageServerAuth
			if cs.DidResume || wantNode == "" {
				usage = x509.ExtKeyUsageAny
			}
			return n.verifyPeer(raw, wantNode, usage)
		},
	}
}

// clusterPortTLS serves joins (no client certificate: the joiner has none
// yet) and the engine proxy (a client certificate required per request) on
// one port.
func (n *Node) clusterPortTLS() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{n.id.servingCert()},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    n.pool,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) > 0 && n.revoked.serialRevoked(cs.PeerCertificates[0].SerialNumber.Text(16)) {
				return errRevoked
			}
			return nil
		},
	}
}
