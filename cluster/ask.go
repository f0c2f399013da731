package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Join by request: a node without a token asks a node holding the CA key
// to let it in, and the owner accepts it on the inviter after comparing a
// short code shown on both machines.
//
// The joiner trusts the inviter's CA on first use, so the code is what
// defeats a man in the middle: it is derived from the CA fingerprint the
// joiner saw, the joiner's public key, the request id the inviter chose and
// a nonce of the joiner's. The joiner commits to its nonce (sends its
// SHA-256) before it learns the request id and reveals it only after: so
// neither a middleman posing as the inviter (who picks the id) nor one
// posing as the joiner (who picks the nonce) can grind its half until the
// two codes agree; it gets one guess in a million per request.

// askPath takes join requests; askPath/{id} is where the joiner waits for
// the owner's answer (long polls).
const askPath = "/cluster/v1/ask"

// Limits of the inviter's pending requests, kept in memory only.
const (
	maxPendingAsks = 16               // undecided requests at once
	askTTL         = 10 * time.Minute // a request not decided by then expires
	// revealTTL drops a request whose nonce was not revealed: a real
	// joiner reveals it at once.
	revealTTL = time.Minute
	// askHold is how long a wait is held before the inviter answers
	// "still pending" and the joiner asks again.
	askHold = 25 * time.Second
	// maxAsksPerPrefix undecided requests from one network (askPrefix),
	// so that a range of addresses cannot take every slot.
	maxAsksPerPrefix = 4
	// askPerAddr requests per askWindow from one source address.
	askPerAddr  = 3
	askWindow   = time.Minute
	maxAskAddrs = 1024 // source addresses remembered for the rate limit
	maxAskBody  = 16 << 10
	maxNameLen  = 64
	askIDBytes  = 6
	askNonceLen = 32
)

var (
	// ErrNotInviter means the node asked does not hold the CA key.
	ErrNotInviter = errors.New("this node does not hold the cluster's CA key: ask the node that created the cluster")
	// ErrJoinRejected means the owner rejected the request.
	ErrJoinRejected = errors.New("the owner rejected the join request")
	// ErrJoinExpired means the request was not accepted in time (or the
	// inviter restarted and forgot it).
	ErrJoinExpired = errors.New("the join request expired before the owner accepted it")
	// ErrNoJoinRequest means no pending request has that id.
	ErrNoJoinRequest = errors.New("no pending join request with that id")
	// ErrTooManyAsks means the inviter holds as many pending requests as
	// it takes, or this address asked too often.
	ErrTooManyAsks = errors.New("the node takes no more join requests now")
)

// JoinRequest is a pending request as the owner sees it: the joiner's
// name, the address it asked from and the code it shows.
type JoinRequest struct {
	ID, Name, Address, Code string
	Received                time.Time
}

type askRequest struct {
	Name   string `json:"name"`
	CSR    []byte `json:"csr"`    // DER, signed by the joiner's key
	Commit []byte `json:"commit"` // SHA-256 of the nonce revealed by the first wait
}

type askResponse struct {
	ID   string `json:"id"`
	Node string `json:"node"` // the inviter's name, for the joiner's log line
}

type waitRequest struct {
	Nonce []byte `json:"nonce"`
}

type askError struct {
	Error string `json:"error"`
	State string `json:"state,omitempty"`
}

// parseAskRequest reads a join request from outside: a name fit for a log
// line and a console, a commitment, and a certificate request signed by an
// Ed25519 or ECDSA key.
func parseAskRequest(body []byte) (askRequest, *x509.CertificateRequest, error) {
	var req askRequest
	if len(body) > maxAskBody {
		return req, nil, errors.New("request too large")
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return req, nil, fmt.Errorf("request: %w", err)
	}
	if err := validName(req.Name); err != nil {
		return req, nil, err
	}
	if len(req.Commit) != sha256.Size {
		return req, nil, errors.New("commit: want 32 bytes")
	}
	csr, err := x509.ParseCertificateRequest(req.CSR)
	if err != nil {
		return req, nil, fmt.Errorf("certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return req, nil, fmt.Errorf("certificate request: %w", err)
	}
	switch csr.PublicKeyAlgorithm {
	case x509.Ed25519, x509.ECDSA:
	default:
		return req, nil, fmt.Errorf("certificate request: a %v key: want Ed25519 or ECDSA", csr.PublicKeyAlgorithm)
	}
	return req, csr, nil
}

// validName accepts a node name of 1 to 64 printable characters.
func validName(s string) error {
	if s == "" || utf8.RuneCountInString(s) > maxNameLen || !utf8.ValidString(s) {
		return fmt.Errorf("name: want 1 to %d characters of UTF-8", maxNameLen)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("name: character %U is not printable", r)
		}
	}
	return nil
}

// validAskID accepts the ids the inviter makes: 12 lower-case hex digits.
func validAskID(s string) bool {
	if len(s) != 2*askIDBytes {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// joinCode is the short code both sides show: six digits, as 123-456,
// from SHA-256 over the CA fingerprint, the joiner's public key (PKIX
// DER), the request id and the joiner's nonce.
func joinCode(fp [32]byte, pub []byte, id string, nonce []byte) string {
	h := sha256.New()
	h.Write(fp[:])
	h.Write(pub)
	h.Write([]byte(id))
	h.Write(nonce)
	n := binary.BigEndian.Uint64(h.Sum(nil)) % 1_000_000
	return fmt.Sprintf("%03d-%03d", n/1000, n%1000)
}

type askState int

const (
	askPending askState = iota
	askAccepted
	askRejected
)

// pendingAsk is one request on the inviter. Nothing is signed before the
// owner accepts it.
type pendingAsk struct {
	req     JoinRequest // Code is empty until the nonce is revealed
	csr     *x509.CertificateRequest
	pub     []byte // PKIX DER of the joiner's key
	commit  []byte
	nonce   []byte
	state   askState
	answer  joinResponse
	decided chan struct{} // closed when accepted or rejected
}

func (p *pendingAsk) expiresAt() time.Time {
	if p.nonce == nil {
		return p.req.Received.Add(revealTTL)
	}
	return p.req.Received.Add(askTTL)
}

// asks are the inviter's pending requests and the per-address counts of
// the rate limit.
type asks struct {
	mu      sync.Mutex
	pending map[string]*pendingAsk
	byAddr  map[string][]time.Time
}

// prune drops expired requests and the rate limit's old entries.
func (a *asks) prune(now time.Time) {
	for id, p := range a.pending {
		if !now.Before(p.expiresAt()) {
			delete(a.pending, id)
		}
	}
	for addr, times := range a.byAddr {
		kept := times[:0]
		for _, t := range times {
			if now.Sub(t) < askWindow {
				kept = append(kept, t)
			}
		}
		if len(kept) == 0 {
			delete(a.byAddr, addr)
		} else {
			a.byAddr[addr] = kept
		}
	}
}

// askPrefix is the network a source address counts against: its /24 for
// IPv4, its /64 for IPv6 (one host's usual share); an address that does
// not parse is its own.
func askPrefix(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	ip = ip.Unmap()
	bits := 64
	if ip.Is4() {
		bits = 24
	}
	p, _ := ip.Prefix(bits)
	return p.String()
}

// add takes a new request from addr, or refuses it (ErrTooManyAsks).
func (a *asks) add(now time.Time, addr string, req askRequest, csr *x509.CertificateRequest) (string, error) {
	pub, err := x509.MarshalPKIXPublicKey(csr.PublicKey)
	if err != nil {
		return "", fmt.Errorf("certificate request: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == nil {
		a.pending, a.byAddr = map[string]*pendingAsk{}, map[string][]time.Time{}
	}
	a.prune(now)
	if len(a.byAddr[addr]) >= askPerAddr {
		return "", fmt.Errorf("%w: %d requests from %s in the last minute", ErrTooManyAsks, askPerAddr, addr)
	}
	if _, known := a.byAddr[addr]; !known && len(a.byAddr) >= maxAskAddrs {
		return "", fmt.Errorf("%w: too many addresses asking", ErrTooManyAsks)
	}
	undecided, fromPrefix := 0, 0
	prefix := askPrefix(addr)
	for _, p := range a.pending {
		if p.state == askPending {
			undecided++
			if askPrefix(p.req.Address) == prefix {
				fromPrefix++
			}
		}
	}
	if fromPrefix >= maxAsksPerPrefix {
		return "", fmt.Errorf("%w: %d requests are pending from %s: the owner decides or clears them first", ErrTooManyAsks, fromPrefix, prefix)
	}
	if undecided >= maxPendingAsks {
		return "", fmt.Errorf("%w: %d requests are pending", ErrTooManyAsks, undecided)
	}
	a.byAddr[addr] = append(a.byAddr[addr], now)
	var id string
	for id == "" || a.pending[id] != nil {
		b := make([]byte, askIDBytes)
		_, _ = rand.Read(b)
		id = hex.EncodeToString(b)
	}
	a.pending[id] = &pendingAsk{
		req: JoinRequest{ID: id, Name: req.Name, Address: addr, Received: now},
		csr: csr, pub: pub, commit: req.Commit, decided: make(chan struct{}),
	}
	return id, nil
}

// askHandler takes a join request: it only records it; the owner decides.
func (n *Node) askHandler(w http.ResponseWriter, r *http.Request) {
	if !n.id.CanInvite() {
		writeAskError(w, http.StatusForbidden, ErrNotInviter.Error(), "")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxAskBody+1))
	if err != nil {
		writeAskError(w, http.StatusBadRequest, err.Error(), "")
		return
	}
	req, csr, err := parseAskRequest(body)
	if err != nil {
		writeAskError(w, http.StatusBadRequest, err.Error(), "")
		return
	}
	addr := sourceHost(r.RemoteAddr)
	id, err := n.asks.add(n.clock.Now(), addr, req, csr)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, ErrTooManyAsks) {
			status = http.StatusTooManyRequests
		}
		n.log.Warn("cluster: join request refused", "from", addr, "name", req.Name, "error", err)
		writeAskError(w, status, err.Error(), "")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(askResponse{ID: id, Node: n.cfg.Name})
}

// waitHandler reveals the joiner's nonce (first call) and holds the call
// until the owner decides, the request expires, or askHold passes.
func (n *Node) waitHandler(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var wr waitRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 4<<10)).Decode(&wr); err != nil || len(wr.Nonce) != askNonceLen || !validAskID(id) {
		writeAskError(w, http.StatusBadRequest, "bad wait request", "")
		return
	}
	held := false
	for {
		status, answer, wait, until := n.askStatus(id, wr.Nonce, r.RemoteAddr)
		if status != 0 || held {
			if status == 0 {
				status, answer = http.StatusAccepted, askError{State: "pending"}
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(answer)
			return
		}
		held = true
		select {
		case <-wait:
		case <-n.clock.After(until):
		case <-r.Context().Done():
			return
		case <-n.stop:
			writeAskError(w, http.StatusServiceUnavailable, "the node is stopping", "")
			return
		}
	}
}

// askStatus answers a wait at once (status not 0) or says what to wait
// on: the decision, or for at most the duration returned.
func (n *Node) askStatus(id string, nonce []byte, remote string) (int, any, <-chan struct{}, time.Duration) {
	now := n.clock.Now()
	a := &n.asks
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prune(now)
	p := a.pending[id]
	if p == nil {
		return http.StatusGone, askError{Error: ErrJoinExpired.Error(), State: "expired"}, nil, 0
	}
	if p.nonce == nil {
		if sum := sha256.Sum256(nonce); subtle.ConstantTimeCompare(sum[:], p.commit) != 1 {
			delete(a.pending, id)
			n.log.Warn("cluster: join request dropped: its nonce does not match its commitment", "id", id, "from", sourceHost(remote))
			return http.StatusBadRequest, askError{Error: "the nonce does not match the commitment"}, nil, 0
		}
		p.nonce = append([]byte(nil), nonce...)
		p.req.Code = joinCode(n.id.Fingerprint(), p.pub, id, p.nonce)
		n.log.Warn("cluster: a node asks to join: compare its code, then accept or reject it (hearth cluster accept|reject ID)",
			"id", id, "name", p.req.Name, "from", p.req.Address, "code", p.req.Code)
	} else if subtle.ConstantTimeCompare(nonce, p.nonce) != 1 {
		return http.StatusGone, askError{Error: ErrJoinExpired.Error(), State: "expired"}, nil, 0
	}
	// A decided request stays until it expires, so that a joiner whose
	// answer was lost on the way gets it again.
	switch p.state {
	case askAccepted:
		return http.StatusOK, p.answer, nil, 0
	case askRejected:
		return http.StatusForbidden, askError{Error: ErrJoinRejected.Error(), State: "rejected"}, nil, 0
	}
	return 0, nil, p.decided, min(askHold, p.expiresAt().Sub(now))
}

// JoinRequests lists the requests waiting for the owner, oldest first:
// only those whose code is known (the joiner revealed its nonce).
func (n *Node) JoinRequests() []JoinRequest {
	a := &n.asks
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prune(n.clock.Now())
	out := []JoinRequest{}
	for _, p := range a.pending {
		if p.state == askPending && p.req.Code != "" {
			out = append(out, p.req)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Received.Equal(out[j].Received) {
			return out[i].Received.Before(out[j].Received)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// AcceptJoin signs the joiner's certificate; its waiting call gets it with
// the CA and this node's route, as a token join does.
func (n *Node) AcceptJoin(id string) error {
	if !n.id.CanInvite() {
		return ErrNotInviter
	}
	return n.decide(id, func(p *pendingAsk) error {
		nodeID := newNodeID()
		der, err := signNode(n.id.CA, n.id.caKey, p.csr.PublicKey, nodeID, p.req.Name)
		if err != nil {
			return err
		}
		p.state, p.answer = askAccepted, joinResponse{CA: n.id.CA.Raw, Cert: der, NodeID: nodeID, Routes: []string{n.RouteURL()}}
		n.log.Info("cluster: join request accepted", "id", id, "name", p.req.Name, "node", nodeID, "from", p.req.Address)
		return nil
	})
}

// RejectJoin refuses a request; its joiner is told so and keeps nothing.
func (n *Node) RejectJoin(id string) error {
	if !n.id.CanInvite() {
		return ErrNotInviter
	}
	return n.decide(id, func(p *pendingAsk) error {
		p.state = askRejected
		n.log.Info("cluster: join request rejected", "id", id, "name", p.req.Name, "from", p.req.Address)
		return nil
	})
}

func (n *Node) decide(id string, f func(*pendingAsk) error) error {
	a := &n.asks
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prune(n.clock.Now())
	p := a.pending[id]
	if p == nil || p.state != askPending || p.req.Code == "" {
		return fmt.Errorf("%w: %q", ErrNoJoinRequest, id)
	}
	if err := f(p); err != nil {
		return err
	}
	close(p.decided)
	return nil
}

func writeAskError(w http.ResponseWriter, status int, msg, state string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(askError{Error: msg, State: state})
}

func sourceHost(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return remote
	}
	return host
}

// AskConfig configures AskJoin.
type AskConfig struct {
	Dir  string // where the identity is written once accepted
	Name string // this node's name, shown to the owner
	Addr string // host:port of the cluster port of a node holding the CA key
	// OnCode is called once the inviter holds the request, with the code
	// the owner must see next to this node's name and the inviter's name.
	OnCode func(code, inviter string)
	// DialContext, when set, opens the connections (a test picks the
	// source address with it).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

// AskJoin asks the node at cfg.Addr to let this node in and waits for the
// owner's answer. It trusts the CA the node presents on first use (the
// chain must hold a self-signed CA that signed the node's certificate) and
// every later connection must present the same CA. Only when accepted does
// it write anything into cfg.Dir; ctx bounds the wait.
func AskJoin(ctx context.Context, cfg AskConfig) (*JoinResult, error) {
	if err := validName(cfg.Name); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	key, csr, err := newJoinKey()
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	nonce := make([]byte, askNonceLen)
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	commit := sha256.Sum256(nonce)
	pin := &firstCA{}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: pin.config(), DialContext: cfg.DialContext}}
	defer client.CloseIdleConnections()

	body, _ := json.Marshal(askRequest{Name: cfg.Name, CSR: csr, Commit: commit[:]})
	status, answer, err := askPost(ctx, client, "https://"+cfg.Addr+askPath, body, 15*time.Second)
	if err != nil {
		return nil, fmt.Errorf("cluster: ask %s: %w", cfg.Addr, err)
	}
	switch status {
	case http.StatusOK:
	case http.StatusForbidden:
		return nil, fmt.Errorf("cluster: ask %s: %w", cfg.Addr, ErrNotInviter)
	case http.StatusTooManyRequests:
		return nil, fmt.Errorf("cluster: ask %s: %w (%s)", cfg.Addr, ErrTooManyAsks, errorText(answer))
	default:
		return nil, fmt.Errorf("cluster: ask %s: status %d: %s", cfg.Addr, status, errorText(answer))
	}
	var ar askResponse
	if err := json.Unmarshal(answer, &ar); err != nil || !validAskID(ar.ID) {
		return nil, fmt.Errorf("cluster: ask %s: a malformed answer", cfg.Addr)
	}
	fp, ok := pin.fingerprint()
	if !ok {
		return nil, fmt.Errorf("cluster: ask %s: no CA was seen", cfg.Addr)
	}
	if cfg.OnCode != nil {
		cfg.OnCode(joinCode(fp, pub, ar.ID, nonce), ar.Node)
	}

	body, _ = json.Marshal(waitRequest{Nonce: nonce})
	url := "https://" + cfg.Addr + askPath + "/" + ar.ID
	failures := 0
	for {
		status, answer, err := askPost(ctx, client, url, body, askHold+15*time.Second)
		if err != nil {
			// The inviter may be restarting (then the request is gone
			// and the next answer says so) or the network hiccups.
			if ctx.Err() != nil || errors.Is(err, errOtherCA) {
				return nil, fmt.Errorf("cluster: wait for the owner: %w", err)
			}
			if failures++; failures > 5 {
				return nil, fmt.Errorf("cluster: wait for the owner: %w", err)
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("cluster: wait for the owner: %w", ctx.Err())
			case <-time.After(time.Duration(failures) * time.Second):
			}
			continue
		}
		failures = 0
		switch status {
		case http.StatusAccepted:
			continue
		case http.StatusForbidden:
			return nil, fmt.Errorf("cluster: %w", ErrJoinRejected)
		case http.StatusGone:
			return nil, fmt.Errorf("cluster: %w", ErrJoinExpired)
		case http.StatusOK:
		default:
			return nil, fmt.Errorf("cluster: wait for the owner: status %d: %s", status, errorText(answer))
		}
		var jr joinResponse
		if err := json.Unmarshal(answer, &jr); err != nil {
			return nil, fmt.Errorf("cluster: the inviter's answer: %w", err)
		}
		return keepJoinAnswer(cfg.Dir, jr, key, fp)
	}
}

// askPost POSTs a JSON body and returns the status and body of the answer.
func askPost(ctx context.Context, client *http.Client, url string, body []byte, timeout time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

func errorText(body []byte) string {
	var e askError
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	return string(bytes.TrimSpace(body))
}

// errOtherCA means a later connection to the inviter presented another CA
// than the first.
var errOtherCA = errors.New("the node presented another CA than on the first connection")

// firstCA trusts the CA of the first chain it sees (trust on first use;
// the short code checks it) and only that CA afterwards.
type firstCA struct {
	mu sync.Mutex
	fp *[32]byte
}

func (p *firstCA) config() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // replaced by the check below and the code the owner compares
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			ca, err := caOfChain(raw)
			if err != nil {
				return err
			}
			fp := sha256.Sum256(ca.Raw)
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.fp == nil {
				p.fp = &fp
			} else if *p.fp != fp {
				return errOtherCA
			}
			return nil
		},
	}
}

func (p *firstCA) fingerprint() ([32]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fp == nil {
		return [32]byte{}, false
	}
	return *p.fp, true
}

// caOfChain finds, in a server's chain, a self-signed CA certificate that
// signed the leaf (for server use).
func caOfChain(raw [][]byte) (*x509.Certificate, error) {
	if len(raw) < 2 {
		return nil, errors.New("cluster: the node sent no CA certificate with its own")
	}
	leaf, err := x509.ParseCertificate(raw[0])
	if err != nil {
		return nil, fmt.Errorf("cluster: node certificate: %w", err)
	}
	for _, b := range raw[1:] {
		ca, err := x509.ParseCertificate(b)
		if err != nil || !ca.IsCA || ca.CheckSignatureFrom(ca) != nil {
			continue
		}
		if servesFor(leaf, ca) {
			return ca, nil
		}
	}
	return nil, errors.New("cluster: the node's chain holds no self-signed CA that signed its certificate")
}
