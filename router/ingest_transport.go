package router

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// bufferedTCP names the zmq4 transport the router dials tcp:// endpoints
// with. zmq4 reads each frame's header and body with a read call of its
// own, three system calls for a one-part frame; a KV-event message has
// three parts. Under a busy engine that was a fifth of the gateway's CPU.
// This transport is TCP with a buffered reader under zmq4, so a burst of
// events costs one read.
const bufferedTCP = "hearth+tcp"

// zmqReadBuffer holds a few hundred typical event batches.
const zmqReadBuffer = 64 << 10

func init() {
	if err := zmq4.RegisterTransport(bufferedTCP, bufferedTransport{}); err != nil {
		panic(err) // registered twice: a programming error
	}
}

// dialEndpoint is the endpoint a socket dials for endpoint: tcp:// goes
// through bufferedTCP, anything else as given.
func dialEndpoint(endpoint string) string {
	if rest, ok := strings.CutPrefix(endpoint, "tcp://"); ok {
		return bufferedTCP + "://" + rest
	}
	return endpoint
}

type bufferedTransport struct{}

func (bufferedTransport) Dial(ctx context.Context, dialer transport.Dialer, addr string) (net.Conn, error) {
	c, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &bufferedConn{Conn: c, r: bufio.NewReaderSize(c, zmqReadBuffer)}, nil
}

func (bufferedTransport) Listen(context.Context, string) (net.Listener, error) {
	return nil, errors.New("router: the buffered transport only dials")
}

func (bufferedTransport) Addr(ep string) (string, error) {
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, port), nil
}

// bufferedConn is a connection whose reads go through a buffer.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
