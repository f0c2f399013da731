package netguard

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/netguard/netguardtest"
)

// serveHTTP serves h on a loopback port the way Hearth's servers are set
// up, and returns its address and what the server has logged so far (a
// handler's panic, which net/http recovers and logs, among it).
func serveHTTP(t *testing.T, h http.Handler) (string, func() string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logged netguardtest.SyncBuffer
	srv := Server(&http.Server{Handler: h, ErrorLog: log.New(&logged, "", 0)})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), logged.String
}

func post(path, body string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: proxy\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
}

// readAnswer reads one response from a client's connection, body and all.
func readAnswer(br *bufio.Reader) (int, string, error) {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b), err
}

// unreachable is an upstream the proxy cannot connect to: RoundTrip fails
// without reading the request's body, as http.Transport's does when the
// dial fails.
type unreachable struct{ next http.RoundTripper }

func (u unreachable) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/unreachable" || u.next == nil {
		return nil, errors.New("connection refused")
	}
	return u.next.RoundTrip(r)
}

func testProxy(upstream string, transport http.RoundTripper) *httputil.ReverseProxy {
	target, _ := url.Parse(upstream)
	return &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: transport,
		ErrorLog:  log.New(io.Discard, "", 0),
	}
}

// TestFullDuplexHandlerLeavingTheBodyKeepsTheConnection: a full-duplex
// proxy whose upstream cannot be reached answers 502 without anyone having
// read the request's body. net/http then reads that body itself after the
// handler returned, past the point where it stops a background read of
// the connection; the body's end starts one, and the server's own read of
// the next request on the connection panics with "invalid concurrent
// Body.Read call" (golang/go#68560): the connection drops, and with it the
// client's next request.
func TestFullDuplexHandlerLeavingTheBodyKeepsTheConnection(t *testing.T) {
	addr, logged := serveHTTP(t, FullDuplex(testProxy("http://upstream.invalid", unreachable{})))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	for i := range 3 {
		// The next request comes once the server reads the connection
		// for it, as it does from a client that waits a moment.
		time.Sleep(10 * time.Millisecond)
		if _, err := io.WriteString(c, post("/unreachable", "hello")); err != nil {
			t.Fatalf("request %d: %v (server: %s)", i, err, logged())
		}
		if code, _, err := readAnswer(br); err != nil || code != http.StatusBadGateway {
			t.Fatalf("request %d on one connection: %d %v (server: %s)", i, code, err, logged())
		}
	}
	if s := logged(); s != "" {
		t.Fatalf("the server logged: %s", s)
	}
}

const duplexChildEnv = "HEARTH_TEST_DUPLEX_CHILD"

// TestFullDuplexProxyReadsNoBodyAfterItsAnswer: the client sends two
// requests at once, on one connection; the first one's upstream cannot be
// reached, the second one's answers after reading the body. net/http reads
// the first body after the proxy returned and leaves a background read of
// the connection running (see above); the second request is already in
// the server's buffer, so nothing reads the connection until the proxy's
// transport, on its writeLoop goroutine, reads the second body: that read
// panics with "invalid concurrent Body.Read call", on a goroutine of
// http.Transport, where nothing recovers it, and the process dies. The
// test runs it in a child process, to see the death.
func TestFullDuplexProxyReadsNoBodyAfterItsAnswer(t *testing.T) {
	if os.Getenv(duplexChildEnv) != "" {
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "got %s", b)
		}))
		defer upstream.Close()
		addr, logged := serveHTTP(t, FullDuplex(testProxy(upstream.URL, unreachable{next: http.DefaultTransport})))
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, post("/unreachable", "hello")+post("/", "world")); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		if code, _, err := readAnswer(br); err != nil || code != http.StatusBadGateway {
			t.Fatalf("first answer: %d %v (server: %s)", code, err, logged())
		}
		if code, body, err := readAnswer(br); err != nil || code != http.StatusOK || body != "got world" {
			t.Fatalf("second answer: %d %q %v (server: %s)", code, body, err, logged())
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFullDuplexProxyReadsNoBodyAfterItsAnswer$", "-test.count=1")
	cmd.Env = append(os.Environ(), duplexChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child process: %v\n%s", err, out)
	}
}

// watchedBody records the reads of a request's body that are in progress
// and those that start after the handler has returned.
type watchedBody struct {
	io.ReadCloser
	inRead   atomic.Int32
	returned atomic.Bool
	late     atomic.Int32
	read     chan struct{} // a read has returned data
	once     sync.Once
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.inRead.Add(1)
	defer b.inRead.Add(-1)
	if b.returned.Load() {
		b.late.Add(1)
	}
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.once.Do(func() { close(b.read) })
	}
	return n, err
}

// TestFullDuplexReturnsOnlyOnceNoBodyReadIsInFlight: a handler that leaves
// a goroutine reading its request's body (as a reverse proxy leaves its
// transport's) returns at once; the client sends the rest of the body a
// moment later. FullDuplex returns only once the read in progress has
// returned, and no read reaches the body after it.
func TestFullDuplexReturnsOnlyOnceNoBodyReadIsInFlight(t *testing.T) {
	var (
		mu      sync.Mutex
		watched []*watchedBody
	)
	returned := make(chan error, 1)
	copied := make(chan struct{}) // the goroutine reading the body ended
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := &watchedBody{ReadCloser: r.Body, read: make(chan struct{})}
		mu.Lock()
		watched = append(watched, b)
		mu.Unlock()
		r.Body = b
		FullDuplex(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			go func() {
				defer close(copied)
				io.Copy(io.Discard, r.Body)
			}()
			<-b.read // the goroutine's next read waits for the rest
			w.WriteHeader(http.StatusAccepted)
		})).ServeHTTP(w, r)
		var err error
		if n := b.inRead.Load(); n > 0 {
			err = fmt.Errorf("the handler returned with %d reads of its body in progress", n)
		}
		b.returned.Store(true)
		returned <- err
	})
	addr, logged := serveHTTP(t, outer)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	req := post("/", "first half, second half")
	cut := strings.Index(req, "second")
	if _, err := io.WriteString(c, req[:cut]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := io.WriteString(c, req[cut:]); err != nil {
		t.Fatal(err)
	}
	if code, _, err := readAnswer(bufio.NewReader(c)); err != nil || code != http.StatusAccepted {
		t.Fatalf("answer: %d %v (server: %s)", code, err, logged())
	}
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	// The goroutine left reading the body is the only reader: once it
	// ended, no read can come late.
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
		t.Fatal("the goroutine reading the body never ended")
	}
	mu.Lock()
	defer mu.Unlock()
	if n := watched[0].late.Load(); n > 0 {
		t.Fatalf("%d reads reached the body after the handler returned", n)
	}
}

// TestFullDuplexBodyLeftLargeEndsTheConnection: a full-duplex handler
// behind BodyDeadline answers without reading a body of which more than
// net/http's 256 KiB are still to come. net/http gives up on that body
// and must not read the connection again: what follows there is the
// body's rest, not a request. It learns that from the body it handed the
// handler, which it finds in the request after the handler returned; were
// a wrapper left there, it would take the body's bytes for the next
// request and serve a request the client never sent.
func TestFullDuplexBodyLeftLargeEndsTheConnection(t *testing.T) {
	var (
		mu     sync.Mutex
		served []string
	)
	addr, logged := serveHTTP(t, BodyDeadline(FullDuplex(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served = append(served, r.URL.Path)
		mu.Unlock()
		io.WriteString(w, "ok")
	})), time.Minute))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	inBody := "GET /smuggled HTTP/1.1\r\nHost: proxy\r\n\r\n"
	head := fmt.Sprintf("POST /upload HTTP/1.1\r\nHost: proxy\r\nContent-Length: %d\r\n\r\n", 1<<20)
	if _, err := io.WriteString(c, head+inBody); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	if code, _, err := readAnswer(br); err != nil || code != http.StatusOK {
		t.Fatalf("answer: %d %v (server: %s)", code, err, logged())
	}
	if code, body, err := readAnswer(br); err == nil {
		t.Fatalf("a second answer, to a request in the first one's body: %d %q", code, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(served) != 1 {
		t.Fatalf("served %q", served)
	}
}
