package netguard

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"
)

const (
	// HeaderTimeout is how long a client may take, from connecting (TLS
	// handshake included) or from the first byte of a request on a kept
	// connection, to send the request's headers.
	HeaderTimeout = 10 * time.Second
	// IdleTimeout is how long a kept connection may wait for its next
	// request.
	IdleTimeout = 60 * time.Second
	// maxBackoff is the longest wait between accepts that failed.
	maxBackoff = time.Second
	// CrowdedTimeout is the longest any read of a connection may wait
	// while its client address holds three quarters of its share, or the
	// listener three quarters of its connections: kept connections then
	// give their slots back sooner.
	CrowdedTimeout = 5 * time.Second
)

// Config says how a listener is guarded.
type Config struct {
	// MaxConns caps the connections open at once; 0 means MaxConns(4, 4096).
	MaxConns int
	// MaxConnsPerAddr caps the connections one client address (an IP)
	// holds at once, so that one client cannot take every slot: a
	// connection beyond it is closed as soon as it is accepted. 0 means a
	// quarter of MaxConns (at least 1); negative, no cap.
	MaxConnsPerAddr int
	// Logger is told when accepting fails; nil = slog.Default().
	Logger *slog.Logger
}

// Listen guards ln; closing the result closes ln.
func Listen(ln net.Listener, cfg Config) net.Listener {
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = MaxConns(4, 4096)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxConnsPerAddr == 0 {
		cfg.MaxConnsPerAddr = max(cfg.MaxConns/4, 1)
	}
	return &listener{Listener: ln, log: cfg.Logger, slots: make(chan struct{}, cfg.MaxConns), done: make(chan struct{}),
		perAddr: cfg.MaxConnsPerAddr, byAddr: make(map[string]int)}
}

type listener struct {
	net.Listener
	log       *slog.Logger
	slots     chan struct{} // one per open connection
	done      chan struct{}
	closeOnce sync.Once
	lastLog   time.Time // of a failed accept; only Accept's goroutine uses it

	perAddr int // <0: no cap
	mu      sync.Mutex
	byAddr  map[string]int // open connections by client IP
}

// addrOf is the client address a connection counts against: its IP.
func addrOf(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return c.RemoteAddr().String()
}

// take counts a connection from addr, or reports that addr holds its cap.
func (l *listener) take(addr string) bool {
	if l.perAddr < 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAddr[addr] >= l.perAddr {
		return false
	}
	l.byAddr[addr]++
	return true
}

func (l *listener) give(addr string) {
	if l.perAddr < 0 {
		return
	}
	l.mu.Lock()
	if l.byAddr[addr]--; l.byAddr[addr] <= 0 {
		delete(l.byAddr, addr)
	}
	l.mu.Unlock()
}

// crowded reports whether addr holds three quarters of its cap, or the
// listener three quarters of its slots.
func (l *listener) crowded(addr string) bool {
	if 4*len(l.slots) >= 3*cap(l.slots) {
		return true
	}
	if l.perAddr < 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return 4*l.byAddr[addr] >= 3*l.perAddr
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	backoff := 5 * time.Millisecond
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			addr := addrOf(c)
			if !l.take(addr) {
				// Closed at once: this address holds its share. Its
				// slot serves the next client.
				c.Close()
				continue
			}
			return &conn{Conn: c, l: l, addr: addr, release: func() { l.give(addr); <-l.slots }}, nil
		}
		if !temporary(err) {
			<-l.slots
			return nil, err
		}
		if now := time.Now(); now.Sub(l.lastLog) > 10*time.Second {
			l.lastLog = now
			l.log.Warn("accepting a connection failed; retrying", "addr", l.Addr().String(), "error", err)
		}
		select {
		case <-time.After(backoff):
		case <-l.done:
			<-l.slots
			return nil, net.ErrClosed
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (l *listener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// temporary reports whether an accept error passes: out of descriptors or
// memory, or a connection that was reset before it was accepted.
func temporary(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// conn gives its slot back when closed, and shortens its reads while its
// listener or its address is crowded.
type conn struct {
	net.Conn
	l       *listener
	addr    string
	once    sync.Once
	release func()
}

// SetReadDeadline sets t, or CrowdedTimeout from now when that is sooner
// and the connection's address or listener is crowded: the idle wait of a
// kept connection, and a slow request, end sooner then. No deadline stays
// none (an answer being streamed).
func (c *conn) SetReadDeadline(t time.Time) error {
	if !t.IsZero() && c.l.crowded(c.addr) {
		if soon := time.Now().Add(CrowdedTimeout); soon.Before(t) {
			t = soon
		}
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// SyscallConn lets the gateway peek at the connection to notice a client
// that went away (api's clientWatcher).
func (c *conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// Unwrap returns the guarded connection.
func (c *conn) Unwrap() net.Conn { return c.Conn }
