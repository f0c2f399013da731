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
)

// Config says how a listener is guarded.
type Config struct {
	// MaxConns caps the connections open at once; 0 means MaxConns(4, 4096).
	MaxConns int
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
	return &listener{Listener: ln, log: cfg.Logger, slots: make(chan struct{}, cfg.MaxConns), done: make(chan struct{})}
}

type listener struct {
	net.Listener
	log       *slog.Logger
	slots     chan struct{} // one per open connection
	done      chan struct{}
	closeOnce sync.Once
	lastLog   time.Time // of a failed accept; only Accept's goroutine uses it
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
			return &conn{Conn: c, release: func() { <-l.slots }}, nil
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

// conn gives its slot back when closed.
type conn struct {
	net.Conn
	once    sync.Once
	release func()
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
