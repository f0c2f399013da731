package cluster

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// tokenPrefix starts every join token, so that a pasted token of another
// kind is told apart at once.
const tokenPrefix = "hearth1-"

// maxTokenAddrs bounds the addresses a token may carry.
const maxTokenAddrs = 16

// Token is what a node needs to join: where to reach a node that can sign
// its certificate, the fingerprint of the cluster CA (so that it talks only
// to that cluster) and the secret that proves it was invited.
type Token struct {
	Addrs       []string // host:port of the inviter's cluster port
	Fingerprint [32]byte // SHA-256 of the CA certificate
	Secret      []byte   // 32 bytes
}

// ErrBadToken means a token could not be parsed.
var ErrBadToken = errors.New("not a Hearth join token")

// String encodes the token: the prefix, then base64url of version 1, the
// fingerprint, the secret and the addresses separated by commas.
func (t Token) String() string {
	b := make([]byte, 0, 1+32+32+64)
	b = append(b, 1)
	b = append(b, t.Fingerprint[:]...)
	b = append(b, t.Secret...)
	b = append(b, strings.Join(t.Addrs, ",")...)
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// ParseToken decodes a token written by Token.String.
func ParseToken(s string) (Token, error) {
	s = strings.TrimSpace(s)
	body, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		return Token{}, fmt.Errorf("%w: it does not start with %q", ErrBadToken, tokenPrefix)
	}
	b, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return Token{}, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	if len(b) < 1+32+32+1 || b[0] != 1 {
		return Token{}, fmt.Errorf("%w: wrong length or version", ErrBadToken)
	}
	var t Token
	copy(t.Fingerprint[:], b[1:33])
	t.Secret = append([]byte(nil), b[33:65]...)
	for _, a := range strings.Split(string(b[65:]), ",") {
		if !validAddr(a) {
			return Token{}, fmt.Errorf("%w: address %q", ErrBadToken, a)
		}
		t.Addrs = append(t.Addrs, a)
	}
	if len(t.Addrs) > maxTokenAddrs {
		return Token{}, fmt.Errorf("%w: %d addresses", ErrBadToken, len(t.Addrs))
	}
	return t, nil
}

// validAddr accepts host:port with an IP address or a DNS name for host
// and a port number.
func validAddr(a string) bool {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return false
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return false
	}
	if net.ParseIP(host) != nil {
		return true
	}
	if host == "" || len(host) > 253 {
		return false
	}
	for _, c := range host {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Token returns the join token for this cluster with the given addresses
// of this node's cluster port. Only the node holding the CA key can invite.
func (id *Identity) Token(addrs []string) (Token, error) {
	if !id.CanInvite() {
		return Token{}, errors.New("cluster: only the node that created the cluster holds the CA key and can invite")
	}
	if len(addrs) == 0 {
		return Token{}, errors.New("cluster: no address to put in the token")
	}
	secret, err := id.joinSecret()
	if err != nil {
		return Token{}, err
	}
	return Token{Addrs: addrs, Fingerprint: id.Fingerprint(), Secret: secret}, nil
}
