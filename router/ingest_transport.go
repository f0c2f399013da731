package router

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// The router speaks ZMTP to an engine over one connection per socket,
// with zmq4's protocol (handshake, framing, commands) read and written on
// the goroutine that uses it. A zmq4 socket would run a reader goroutine
// per connection and hand every message over a channel: a wake-up of a
// second goroutine for each event batch, which a busy engine sends for
// every request, at the moment its first token is on its way. The router
// dials one engine endpoint at a time and reconnects on its own clock, so
// nothing else of a socket is needed.

// zmqReadBuffer holds a few hundred typical event batches. zmq4 reads each
// frame's header and body with a read call of its own, three system calls
// for a one-part frame, and a KV-event message has three parts; read
// through a buffer, a burst of events costs one.
const zmqReadBuffer = 64 << 10

// zmqDialTimeout bounds the TCP connect and the ZMTP handshake.
const zmqDialTimeout = 10 * time.Second

// zmqConn is a ZMTP connection that closes when its context ends.
type zmqConn struct {
	*zmq4.Conn
	stop func() bool
}

// dialZMQ connects to a tcp:// or ipc:// endpoint as a socket of type typ
// and performs the ZMTP handshake (NULL security). Ending ctx closes the
// connection, which ends any read or write in progress.
func dialZMQ(ctx context.Context, endpoint string, typ zmq4.SocketType) (*zmqConn, error) {
	network, addr, err := zmqAddress(endpoint)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: zmqDialTimeout}
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(zmqDialTimeout))
	zc, err := zmq4.Open(&bufferedConn{Conn: nc, r: bufio.NewReaderSize(nc, zmqReadBuffer)}, null.Security(), typ, zmq4.SocketIdentity(""), false, nil)
	if err != nil {
		stop()
		nc.Close()
		return nil, fmt.Errorf("%s: %w", endpoint, err)
	}
	_ = nc.SetDeadline(time.Time{})
	return &zmqConn{Conn: zc, stop: stop}, nil
}

func (c *zmqConn) Close() error {
	c.stop()
	return c.Conn.Close()
}

// zmqAddress is the network and address to dial for a ZMQ endpoint.
func zmqAddress(endpoint string) (network, addr string, err error) {
	scheme, addr, _ := strings.Cut(endpoint, "://")
	switch scheme {
	case "tcp":
		return "tcp", addr, nil
	case "ipc":
		return "unix", addr, nil
	}
	return "", "", fmt.Errorf("%q: only tcp:// and ipc:// engines can be reached from the router's process", endpoint)
}

// bufferedConn is a connection whose reads go through a buffer.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
