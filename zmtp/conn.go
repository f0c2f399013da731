package zmtp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// ReadBuffer holds a few hundred typical KV event batches: a burst of them
// is read with one system call.
const ReadBuffer = 64 << 10

// DialTimeout bounds the TCP connect and the ZMTP handshake.
const DialTimeout = 10 * time.Second

// MaxMessage bounds the size of one message, all frames together. A
// KV event batch is a few kilobytes; a replay reply holds one batch.
const MaxMessage = 64 << 20

// keepBuffer is the largest read buffer a Conn keeps between messages; a
// larger message's buffer is let go once the next message is read.
const keepBuffer = 1 << 20

// ErrMalformed is wrapped by the errors of messages that break ZMTP's
// framing.
var ErrMalformed = errors.New("zmtp: malformed frame")

// Frame flags (ZMTP 3, "Framing").
const (
	flagMore    = 1 << 0
	flagLong    = 1 << 1
	flagCommand = 1 << 2
)

// Conn is one ZMTP connection. It is not safe for concurrent use, except
// that Close may be called at any time.
type Conn struct {
	zc   *zmq4.Conn
	r    *bufio.Reader
	stop func() bool

	hdr    [8]byte  // a long frame's size, read here so as not to allocate
	buf    []byte   // the last message's bodies, back to back
	ends   []int    // where each frame of the last message ends in buf
	frames [][]byte // the last message's frames, into buf
}

// Dial connects to a tcp:// or ipc:// endpoint as a socket of type typ
// and performs the ZMTP handshake (NULL security). Ending ctx closes the
// connection.
func Dial(ctx context.Context, endpoint string, typ zmq4.SocketType) (*Conn, error) {
	network, addr, err := Address(endpoint)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: DialTimeout}
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(DialTimeout))
	r := bufio.NewReaderSize(nc, ReadBuffer)
	zc, err := zmq4.Open(&bufferedConn{Conn: nc, r: r}, null.Security(), typ, zmq4.SocketIdentity(""), false, nil)
	if err != nil {
		stop()
		nc.Close()
		return nil, fmt.Errorf("%s: %w", endpoint, err)
	}
	_ = nc.SetDeadline(time.Time{})
	return &Conn{zc: zc, r: r, stop: stop}, nil
}

// Send writes one message of the given frames.
func (c *Conn) Send(frames ...[]byte) error {
	return c.zc.SendMsg(zmq4.NewMsgFrom(frames...))
}

// Recv reads the next message. Its frames point into a buffer that the
// next Recv reuses: a caller that keeps them past that copies them.
func (c *Conn) Recv() ([][]byte, error) {
	for {
		cmd, err := c.read()
		if err != nil {
			return nil, err
		}
		if !cmd {
			return c.frames, nil
		}
		if ctx, ok := pingContext(c.frames[0]); ok {
			if err := c.zc.SendCmd(zmq4.CmdPong, ctx); err != nil {
				return nil, err
			}
		}
	}
}

// read reads one message into c.buf and c.frames and reports whether it
// is a command.
func (c *Conn) read() (cmd bool, err error) {
	if cap(c.buf) > keepBuffer {
		c.buf = nil
	}
	c.buf, c.ends = c.buf[:0], c.ends[:0]
	for more := true; more; {
		flags, err := c.r.ReadByte()
		if err != nil {
			return false, err
		}
		if flags&^(flagMore|flagLong|flagCommand) != 0 {
			return false, fmt.Errorf("%w: flags %#x", ErrMalformed, flags)
		}
		more = flags&flagMore != 0
		if flags&flagCommand != 0 {
			if more || len(c.ends) > 0 {
				return false, fmt.Errorf("%w: a command in a multipart message", ErrMalformed)
			}
			cmd = true
		}
		var size uint64
		if flags&flagLong != 0 {
			if _, err := io.ReadFull(c.r, c.hdr[:]); err != nil {
				return false, err
			}
			size = binary.BigEndian.Uint64(c.hdr[:])
		} else {
			b, err := c.r.ReadByte()
			if err != nil {
				return false, err
			}
			size = uint64(b)
		}
		if size > uint64(MaxMessage-len(c.buf)) {
			return false, fmt.Errorf("%w: a message of more than %d bytes", ErrMalformed, MaxMessage)
		}
		n := len(c.buf)
		c.buf = slices.Grow(c.buf, int(size))[:n+int(size)]
		if _, err := io.ReadFull(c.r, c.buf[n:]); err != nil {
			return false, err
		}
		c.ends = append(c.ends, len(c.buf))
	}
	c.frames = c.frames[:0]
	start := 0
	for _, end := range c.ends {
		c.frames = append(c.frames, c.buf[start:end:end])
		start = end
	}
	return cmd, nil
}

// pingContext returns the context of a PING command's body (ZMTP 3.1: the
// name, a 16-bit TTL, the context), which the PONG echoes.
func pingContext(body []byte) ([]byte, bool) {
	name := "\x04" + zmq4.CmdPing
	if !bytes.HasPrefix(body, []byte(name)) || len(body) < len(name)+2 {
		return nil, false
	}
	return body[len(name)+2:], true
}

// Close closes the connection.
func (c *Conn) Close() error {
	c.stop()
	return c.zc.Close()
}

// Address is the network and address to dial for a ZMQ endpoint.
func Address(endpoint string) (network, addr string, err error) {
	scheme, addr, _ := strings.Cut(endpoint, "://")
	switch scheme {
	case "tcp":
		return "tcp", addr, nil
	case "ipc":
		return "unix", addr, nil
	}
	return "", "", fmt.Errorf("%q: only tcp:// and ipc:// endpoints can be reached from this process", endpoint)
}

// bufferedConn is a connection whose reads go through a buffer: zmq4's
// handshake reads it, and Conn goes on reading the same buffer.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
