package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// engineClient speaks HTTP/1.1 to the engines from the calling goroutine.
// net/http's client hands each request to a writer goroutine and each
// response back from a reader goroutine, two switches on the way to the
// first token and two goroutines for every open stream; here the goroutine
// that asks writes the request and reads the answer. net/http still does
// the protocol: Request.Write, ReadResponse and its chunked body.
//
// Connections are kept per engine address, most recently used first, and
// reused once an answer was read to its end. Only plain http:// engines
// are supported: they run on the machine or the LAN.
type engineClient struct {
	dialer  net.Dialer
	maxIdle int // per address

	mu   sync.Mutex
	idle map[string][]*engineConn
}

func newEngineClient() *engineClient {
	return &engineClient{
		dialer:  net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		maxIdle: 1024, // one per open stream: a closed one costs the next request a dial
		idle:    make(map[string][]*engineConn),
	}
}

type engineConn struct {
	net.Conn
	br        *bufio.Reader
	idleSince time.Time // when it was last put back
}

// trustIdle is how long a kept connection is reused without looking
// whether the engine closed it.
const trustIdle = time.Second

// readAhead returns what was read from the connection and not yet taken.
func (c *engineConn) readAhead() []byte {
	b, _ := c.br.Peek(c.br.Buffered())
	return b
}

// requestWriters buffer a request while it is written; a connection needs
// one only then.
var requestWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}

// do sends req and returns the engine's response once its header has
// arrived. The body reads from the connection; closing the body gives the
// connection back when it was read to its end. Ending ctx closes the
// connection, which unblocks whatever waits on it.
func (c *engineClient) do(ctx context.Context, req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		return nil, fmt.Errorf("engine URL %s: only http:// is supported", req.URL)
	}
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	for attempt := 0; ; attempt++ {
		conn, reused, err := c.conn(ctx, addr)
		if err != nil {
			return nil, err
		}
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		resp, err := roundTrip(conn, req)
		if err == nil {
			resp.Body = &engineBody{ReadCloser: resp.Body, c: c, conn: conn, addr: addr, stop: stop, keep: !resp.Close}
			return resp, nil
		}
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		// A kept connection the engine closed while it sat idle fails
		// before any answer; a fresh one is tried once, when the body can
		// be sent again.
		if !reused || attempt > 0 || req.GetBody == nil {
			return nil, err
		}
		if req.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
}

func roundTrip(conn *engineConn, req *http.Request) (*http.Response, error) {
	bw := requestWriters.Get().(*bufio.Writer)
	bw.Reset(conn)
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	requestWriters.Put(bw)
	if err != nil {
		return nil, err
	}
	return http.ReadResponse(conn.br, req)
}

// conn returns a kept connection to addr, or dials one.
func (c *engineClient) conn(ctx context.Context, addr string) (conn *engineConn, reused bool, err error) {
	for {
		c.mu.Lock()
		if idle := c.idle[addr]; len(idle) > 0 {
			conn = idle[len(idle)-1]
			c.idle[addr] = idle[:len(idle)-1]
		}
		c.mu.Unlock()
		if conn == nil {
			break
		}
		// Engines close connections that sit idle (vLLM after 5 s);
		// one closed by now is seen without a round trip. One back from
		// its last answer for less than a second is taken as it is: the
		// look costs every request of an agent's loop a system call, and
		// do retries the rare one that closed all the same.
		if time.Since(conn.idleSince) < trustIdle || !peerClosed(conn.Conn) {
			return conn, true, nil
		}
		conn.Close()
		conn = nil
	}
	nc, err := c.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	return &engineConn{Conn: nc, br: bufio.NewReaderSize(nc, 4<<10)}, false, nil
}

// put keeps conn for the next request to addr.
func (c *engineClient) put(addr string, conn *engineConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.idle[addr]) >= c.maxIdle {
		conn.Close()
		return
	}
	conn.idleSince = time.Now()
	c.idle[addr] = append(c.idle[addr], conn)
}

// closeIdle closes every kept connection.
func (c *engineClient) closeIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for addr, conns := range c.idle {
		for _, conn := range conns {
			conn.Close()
		}
		delete(c.idle, addr)
	}
}

// engineBody is a response body that gives its connection back when it was
// read to its end, and closes it otherwise.
type engineBody struct {
	io.ReadCloser
	c      *engineClient
	conn   *engineConn
	addr   string
	stop   func() bool // stops the context's closing of conn
	keep   bool        // the engine did not ask to close
	atEOF  bool
	closed bool
}

func (b *engineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.atEOF = true
	}
	return n, err
}

func (b *engineBody) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	// stop reports false when the context already closed the connection.
	if b.stop() && b.atEOF && b.keep {
		b.c.put(b.addr, b.conn)
		return nil
	}
	return b.conn.Close()
}
