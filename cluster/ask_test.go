package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/clock/clocktest"
	"github.com/hearth-llm/hearth/router"
)

func newFakeClock() *clock.Fake { return clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)) }

type askOutcome struct {
	res *JoinResult
	err error
}

// askAsync runs AskJoin on a goroutine: the code it shows arrives on
// codes, its end on done.
func askAsync(t *testing.T, cfg AskConfig) (codes chan string, done chan askOutcome) {
	t.Helper()
	codes, done = make(chan string, 1), make(chan askOutcome, 1)
	cfg.OnCode = func(code, _ string) { codes <- code }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	go func() {
		res, err := AskJoin(ctx, cfg)
		done <- askOutcome{res, err}
	}()
	return codes, done
}

// pendingRequest waits for the one request the owner of n sees.
func pendingRequest(t *testing.T, n *Node) JoinRequest {
	t.Helper()
	var req JoinRequest
	clocktest.WaitFor(t, "the request to reach the owner", 10*time.Second, func() bool {
		reqs := n.JoinRequests()
		if len(reqs) == 1 {
			req = reqs[0]
		}
		return len(reqs) == 1
	})
	return req
}

func outcome(t *testing.T, done chan askOutcome) askOutcome {
	t.Helper()
	select {
	case o := <-done:
		return o
	case <-time.After(30 * time.Second):
		t.Fatal("AskJoin did not end")
		return askOutcome{}
	}
}

func emptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("the joiner kept %d files in %s", len(entries), dir)
	}
	if _, err := Load(dir); !errors.Is(err, ErrNoCluster) {
		t.Fatalf("the joiner holds an identity: %v", err)
	}
}

var codeShape = regexp.MustCompile(`^[0-9]{3}-[0-9]{3}$`)

// A node asks a over real TLS, the owner sees the code the joiner shows
// and accepts; the new node then forms NATS routes with a and with c,
// which joined with a token, as a token join does.
func TestAskJoinAccepted(t *testing.T) {
	idA, err := Create(t.TempDir(), "a")
	if err != nil {
		t.Fatal(err)
	}
	a, routerA := testNode(t, idA, "a", nil)
	dirB := t.TempDir()
	codes, done := askAsync(t, AskConfig{Dir: dirB, Name: "b", Addr: a.ProxyAddr()})
	req := pendingRequest(t, a)
	code := <-codes
	if req.Code != code || !codeShape.MatchString(code) {
		t.Fatalf("owner sees code %q, joiner shows %q", req.Code, code)
	}
	if req.Name != "b" || req.Address != "127.0.0.1" || !validAskID(req.ID) || req.Received.IsZero() {
		t.Fatalf("request as the owner sees it: %+v", req)
	}
	if _, err := Load(dirB); !errors.Is(err, ErrNoCluster) {
		t.Fatalf("the joiner wrote an identity before the owner accepted: %v", err)
	}
	if err := a.AcceptJoin(req.ID); err != nil {
		t.Fatal(err)
	}
	o := outcome(t, done)
	if o.err != nil {
		t.Fatalf("AskJoin: %v", o.err)
	}
	idB := o.res.Identity
	if idB.ClusterID() != idA.ClusterID() || idB.CanInvite() || idB.Leaf.PublicKeyAlgorithm != x509.Ed25519 || idB.Leaf.Subject.OrganizationalUnit[0] != "b" {
		t.Fatalf("joined: cluster %s (want %s), can invite %v, key %v, name %v", idB.ClusterID(), idA.ClusterID(), idB.CanInvite(), idB.Leaf.PublicKeyAlgorithm, idB.Leaf.Subject.OrganizationalUnit)
	}
	if len(o.res.Routes) != 1 || o.res.Routes[0] != a.RouteURL() {
		t.Fatalf("routes %v, want a's %s", o.res.Routes, a.RouteURL())
	}
	if len(a.JoinRequests()) != 0 {
		t.Fatalf("an accepted request is still listed: %+v", a.JoinRequests())
	}
	if err := a.AcceptJoin(req.ID); !errors.Is(err, ErrNoJoinRequest) {
		t.Fatalf("accepting twice: %v", err)
	}
	b, _ := testNode(t, idB, "b", o.res.Routes)
	tok, _ := idA.Token([]string{a.ProxyAddr()})
	resC, err := Join(context.Background(), t.TempDir(), "c", tok)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := testNode(t, resC.Identity, "c", resC.Routes)
	waitAllUp(t, 10*time.Second, nil, a, b, c)
	if b.NumRoutes() == 0 {
		t.Fatal("b holds no NATS route")
	}
	// b's engine becomes a worker of a's router, through b's proxy.
	if _, err := b.AddLocalEngine(LocalEngine{Worker: router.WorkerInfo{Name: "b/gpu0", BaseURL: "http://127.0.0.1:1", Model: "m", CapacityBlocks: 100}}); err != nil {
		t.Fatal(err)
	}
	workerURL(t, routerA, "b/gpu0")
}

// A rejected joiner is told so and keeps nothing on disk.
func TestAskJoinRejected(t *testing.T) {
	idA, err := Create(t.TempDir(), "a")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := testNode(t, idA, "a", nil)
	dir := t.TempDir()
	_, done := askAsync(t, AskConfig{Dir: dir, Name: "x", Addr: a.ProxyAddr()})
	req := pendingRequest(t, a)
	if err := a.RejectJoin(req.ID); err != nil {
		t.Fatal(err)
	}
	if o := outcome(t, done); !errors.Is(o.err, ErrJoinRejected) {
		t.Fatalf("AskJoin after a rejection: %v", o.err)
	}
	emptyDir(t, dir)
	if err := a.AcceptJoin(req.ID); !errors.Is(err, ErrNoJoinRequest) {
		t.Fatalf("accepting a rejected request: %v", err)
	}
	if len(a.JoinRequests()) != 0 {
		t.Fatalf("a rejected request is still listed: %+v", a.JoinRequests())
	}
}

// A request the owner leaves alone expires after ten minutes of the
// inviter's clock; its joiner says so and keeps nothing.
func TestAskJoinExpires(t *testing.T) {
	idA, err := Create(t.TempDir(), "a")
	if err != nil {
		t.Fatal(err)
	}
	clk := newFakeClock()
	a, err := New(Config{Identity: idA, Name: "a", ClusterListen: "127.0.0.1:0", RouteListen: "127.0.0.1:0", Logger: quietLog(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	dir := t.TempDir()
	_, done := askAsync(t, AskConfig{Dir: dir, Name: "x", Addr: a.ProxyAddr()})
	req := pendingRequest(t, a)
	// Past one hold: the joiner is told "pending" and asks again; the
	// request is still there.
	clk.Advance(askHold + time.Second)
	time.Sleep(200 * time.Millisecond)
	if reqs := a.JoinRequests(); len(reqs) != 1 || reqs[0].ID != req.ID {
		t.Fatalf("after %v: %+v", askHold, reqs)
	}
	select {
	case o := <-done:
		t.Fatalf("AskJoin ended before the request expired: %v", o.err)
	default:
	}
	var o askOutcome
	for o.err == nil && o.res == nil {
		// Again and again: the held wait may arm its timer after a move.
		clk.Advance(askTTL)
		select {
		case o = <-done:
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !errors.Is(o.err, ErrJoinExpired) {
		t.Fatalf("AskJoin of an expired request: %v", o.err)
	}
	emptyDir(t, dir)
	if len(a.JoinRequests()) != 0 {
		t.Fatal("an expired request is still listed")
	}
	if err := a.AcceptJoin(req.ID); !errors.Is(err, ErrNoJoinRequest) {
		t.Fatalf("accepting an expired request: %v", err)
	}
}

// A man in the middle answering on the inviter's address with another CA
// relays the joiner's request unchanged: the owner sees a code other than
// the joiner's. Were the owner to accept it anyway, the joiner refuses the
// certificate of a CA other than the one it saw.
func TestAskJoinManInTheMiddleShowsAnotherCode(t *testing.T) {
	idA, err := Create(t.TempDir(), "a")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := testNode(t, idA, "a", nil)
	idM, err := Create(t.TempDir(), "mallory")
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse("https://" + a.ProxyAddr())
	relay := httputil.NewSingleHostReverseProxy(target)
	relay.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{idM.servingCert()}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: relay}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	dir := t.TempDir()
	codes, done := askAsync(t, AskConfig{Dir: dir, Name: "x", Addr: ln.Addr().String()})
	req := pendingRequest(t, a)
	shown := <-codes
	if req.Code == shown {
		t.Fatalf("through a man in the middle the owner sees the joiner's code %s", shown)
	}
	if err := a.AcceptJoin(req.ID); err != nil {
		t.Fatal(err)
	}
	if o := outcome(t, done); !errors.Is(o.err, ErrWrongCluster) {
		t.Fatalf("AskJoin through a man in the middle, accepted by a careless owner: %v", o.err)
	}
	emptyDir(t, dir)
}

// A node without the CA key refuses requests, and its owner has none to
// accept.
func TestAskJoinNeedsTheCAKey(t *testing.T) {
	nodes, _ := testCluster(t)
	b := nodes[1]
	dir := t.TempDir()
	_, err := AskJoin(context.Background(), AskConfig{Dir: dir, Name: "x", Addr: b.ProxyAddr()})
	if !errors.Is(err, ErrNotInviter) {
		t.Fatalf("asking a node without the CA key: %v", err)
	}
	emptyDir(t, dir)
	if reqs := b.JoinRequests(); len(reqs) != 0 {
		t.Fatalf("b lists requests: %+v", reqs)
	}
	if err := b.AcceptJoin("0123456789ab"); !errors.Is(err, ErrNotInviter) {
		t.Fatalf("b accepts: %v", err)
	}
}

// askBody is a valid request, as AskJoin sends it.
func askBody(t testing.TB, name string) []byte {
	key, err := newKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	commit := sha256.Sum256(make([]byte, askNonceLen))
	b, _ := json.Marshal(askRequest{Name: name, CSR: csr, Commit: commit[:]})
	return b
}

// postAsk posts a request from the given source address.
func postAsk(t *testing.T, addr, from string, body []byte) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		DialContext:     (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext,
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Post("https://"+addr+askPath, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("from %s: %v", from, err)
	}
	defer resp.Body.Close()
	var e askError
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error
}

// At most 16 requests wait at once, and one address asks at most three
// times a minute.
func TestAskJoinLimits(t *testing.T) {
	idA, err := Create(t.TempDir(), "a")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := testNode(t, idA, "a", nil)
	if c, err := net.Dial("tcp", a.ProxyAddr()); err != nil {
		t.Fatal(err)
	} else {
		c.Close()
	}
	if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Skipf("skipping: the source addresses 127.0.0.2 and up are not usable here (%v)", err)
	} else {
		ln.Close()
	}
	body := askBody(t, "x")
	for i := range maxPendingAsks {
		// Each from a network of its own (maxAsksPerPrefix).
		if status, msg := postAsk(t, a.ProxyAddr(), fmt.Sprintf("127.0.%d.2", 2+i), body); status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i+1, status, msg)
		}
	}
	status, msg := postAsk(t, a.ProxyAddr(), "127.0.100.2", body)
	if status != http.StatusTooManyRequests || !strings.Contains(msg, "16 requests are pending") {
		t.Fatalf("request 17: %d %q, want 429 and 16 pending", status, msg)
	}

	idB, err := Create(t.TempDir(), "b")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := testNode(t, idB, "b", nil)
	for i := range askPerAddr {
		if status, msg := postAsk(t, b.ProxyAddr(), "127.0.0.1", body); status != http.StatusOK {
			t.Fatalf("request %d from one address: %d %s", i+1, status, msg)
		}
	}
	status, msg = postAsk(t, b.ProxyAddr(), "127.0.0.1", body)
	if status != http.StatusTooManyRequests || !strings.Contains(msg, "in the last minute") {
		t.Fatalf("request %d from one address: %d %q, want 429", askPerAddr+1, status, msg)
	}
	if status, msg := postAsk(t, b.ProxyAddr(), "127.0.0.2", body); status != http.StatusOK {
		t.Fatalf("another address: %d %s", status, msg)
	}
	// Requests whose nonce was never revealed are not shown to the owner.
	if reqs := b.JoinRequests(); len(reqs) != 0 {
		t.Fatalf("unrevealed requests listed: %+v", reqs)
	}
	if status, msg := postAsk(t, b.ProxyAddr(), "127.0.0.3", []byte(`{"name":"x"}`)); status != http.StatusBadRequest {
		t.Fatalf("a malformed request: %d %s", status, msg)
	}
}

func TestCAOfChain(t *testing.T) {
	idA, err := Create(t.TempDir(), "a")
	if err != nil {
		t.Fatal(err)
	}
	idM, err := Create(t.TempDir(), "m")
	if err != nil {
		t.Fatal(err)
	}
	leaf := idA.Cert.Certificate[0]
	cases := []struct {
		name  string
		chain [][]byte
		ok    bool
	}{
		{"leaf and its CA", [][]byte{leaf, idA.CA.Raw}, true},
		{"leaf alone", [][]byte{leaf}, false},
		{"leaf and another CA", [][]byte{leaf, idM.CA.Raw}, false},
		{"leaf and a leaf", [][]byte{leaf, idM.Cert.Certificate[0]}, false},
		{"garbage", [][]byte{[]byte("x"), idA.CA.Raw}, false},
	}
	for _, c := range cases {
		ca, err := caOfChain(c.chain)
		if (err == nil) != c.ok || (c.ok && !ca.Equal(idA.CA)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestJoinCode(t *testing.T) {
	var fp [32]byte
	nonce := make([]byte, askNonceLen)
	base := joinCode(fp, []byte("key"), "0123456789ab", nonce)
	if !codeShape.MatchString(base) {
		t.Fatalf("code %q", base)
	}
	fp2 := fp
	fp2[0] = 1
	nonce2 := append([]byte(nil), nonce...)
	nonce2[0] = 1
	for name, c := range map[string]string{
		"another CA":    joinCode(fp2, []byte("key"), "0123456789ab", nonce),
		"another key":   joinCode(fp, []byte("kez"), "0123456789ab", nonce),
		"another id":    joinCode(fp, []byte("key"), "0123456789ac", nonce),
		"another nonce": joinCode(fp, []byte("key"), "0123456789ab", nonce2),
	} {
		if c == base {
			t.Errorf("%s gives the same code %s", name, c)
		}
	}
}

// FuzzAskRequest feeds the inviter's parsers what a stranger on the LAN
// may send: a request body and a request id.
func FuzzAskRequest(f *testing.F) {
	f.Add(askBody(f, "node-b"), "0123456789ab")
	f.Add([]byte(`{"name":"b","csr":"AAAA","commit":"AAAA"}`), "0123456789AB")
	f.Add([]byte(`{"name":"\u0000"}`), "../../x")
	f.Fuzz(func(t *testing.T, body []byte, id string) {
		req, csr, err := parseAskRequest(body)
		if err == nil {
			if validName(req.Name) != nil || len(req.Commit) != sha256.Size || csr == nil || csr.CheckSignature() != nil {
				t.Fatalf("accepted a bad request: %+v", req)
			}
			if _, err := x509.MarshalPKIXPublicKey(csr.PublicKey); err != nil {
				t.Fatalf("accepted a key that does not marshal: %v", err)
			}
		}
		if validAskID(id) && (len(id) != 2*askIDBytes || strings.ToLower(id) != id || strings.Trim(id, "0123456789abcdef") != "") {
			t.Fatalf("accepted id %q", id)
		}
	})
}

// TestAskJoinLimitsPerPrefix: one network (a /24, a /64) holds at most
// maxAsksPerPrefix undecided requests, however many addresses it asks
// from, so a range of addresses cannot fill every slot and keep a real
// joiner out; another network still asks.
func TestAskJoinLimitsPerPrefix(t *testing.T) {
	t.Parallel()
	_, csr, err := parseAskRequest(askBody(t, "x"))
	if err != nil {
		t.Fatal(err)
	}
	var a asks
	now := time.Unix(1_700_000_000, 0)
	for _, network := range []string{"10.0.0.%d", "2001:db8:0:1::%d"} {
		for i := range maxAsksPerPrefix {
			if _, err := a.add(now, fmt.Sprintf(network, 2+i), askRequest{Name: "x"}, csr); err != nil {
				t.Fatalf("%s: request %d: %v", network, i+1, err)
			}
		}
		_, err := a.add(now, fmt.Sprintf(network, 99), askRequest{Name: "x"}, csr)
		if !errors.Is(err, ErrTooManyAsks) || !strings.Contains(err.Error(), "pending from") {
			t.Fatalf("%s: request %d from the same network: %v, want ErrTooManyAsks", network, maxAsksPerPrefix+1, err)
		}
	}
	if _, err := a.add(now, "10.0.1.2", askRequest{Name: "real"}, csr); err != nil {
		t.Fatalf("a joiner from another network: %v", err)
	}
}
