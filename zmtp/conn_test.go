package zmtp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

func TestAddress(t *testing.T) {
	for _, tc := range []struct {
		endpoint, network, addr string
		err                     bool
	}{
		{"tcp://10.0.0.5:5557", "tcp", "10.0.0.5:5557", false},
		{"ipc:///tmp/kv.sock", "unix", "/tmp/kv.sock", false},
		{"inproc://kv", "", "", true},
		{"10.0.0.5:5557", "", "", true},
	} {
		network, addr, err := Address(tc.endpoint)
		if network != tc.network || addr != tc.addr || (err != nil) != tc.err {
			t.Errorf("%s: %q %q %v", tc.endpoint, network, addr, err)
		}
	}
}

// TestDialOverIPC: a subscriber reaches a zmq4 publisher on a Unix socket,
// as vLLM publishes when given an ipc:// endpoint.
func TestDialOverIPC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep := "ipc://" + filepath.Join(t.TempDir(), "kv.sock")
	pub := zmq4.NewPub(ctx)
	defer pub.Close()
	if err := pub.Listen(ep); err != nil {
		t.Fatal(err)
	}
	sub, err := Dial(ctx, ep, zmq4.Sub)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.Send([]byte{1}); err != nil {
		t.Fatal(err)
	}
	got := make(chan [][]byte, 1)
	go func() {
		frames, _ := sub.Recv()
		got <- frames
	}()
	// The publisher learns of the subscription asynchronously: publish
	// until the subscriber has a message.
	for {
		if err := pub.Send(zmq4.NewMsgFrom([]byte("kv"), []byte("batch"))); err != nil {
			t.Fatal(err)
		}
		select {
		case frames := <-got:
			if len(frames) != 2 || string(frames[1]) != "batch" {
				t.Fatalf("received %q", frames)
			}
			return
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("nothing received")
		}
	}
}

// TestDialSilentPeer: a peer that accepts the connection but never
// answers the handshake does not hold the dial past its context: the dial
// ends when the context does, not at its own timeout.
func TestDialSilentPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		// The dialer's greeting shows it is in the handshake; end the
		// dial's context there.
		var b [1]byte
		if _, err := c.Read(b[:]); err == nil {
			cancel()
		}
		<-done
	}()
	_, err = Dial(ctx, "tcp://"+ln.Addr().String(), zmq4.Sub)
	if err == nil {
		t.Fatal("the dial succeeded against a silent peer")
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Fatalf("the dial ran to its own timeout, not its context's end: %v", err)
	}
	if !strings.Contains(err.Error(), "tcp://") {
		t.Errorf("error %q does not name the endpoint", err)
	}
}

// rawPeer accepts one connection, completes the handshake as a PUB socket
// and hands the test the raw connection, to write frames as it likes.
func rawPeer(t *testing.T) (string, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		t.Cleanup(func() { c.Close() })
		if _, err := zmq4.Open(c, null.Security(), zmq4.Pub, zmq4.SocketIdentity(""), true, nil); err != nil {
			c.Close()
			return
		}
		conns <- c
	}()
	return "tcp://" + ln.Addr().String(), conns
}

func frame(flags byte, body []byte) []byte {
	if len(body) > 255 {
		flags |= flagLong
		return append(binary.BigEndian.AppendUint64([]byte{flags}, uint64(len(body))), body...)
	}
	return append([]byte{flags, byte(len(body))}, body...)
}

// TestRecv: messages written frame by frame come out whole, a long frame
// among them; a PING is answered with a PONG that echoes its context and
// is not returned; the frames of one message are not disturbed by
// reading it.
func TestRecv(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep, conns := rawPeer(t)
	c, err := Dial(ctx, ep, zmq4.Sub)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer := <-conns

	long := bytes.Repeat([]byte("x"), 70000)
	var w []byte
	w = append(w, frame(flagMore, []byte("kv"))...)
	w = append(w, frame(flagMore, []byte{0, 0, 0, 0, 0, 0, 0, 7})...)
	w = append(w, frame(0, long)...)
	w = append(w, frame(flagCommand, append([]byte("\x04PING\x00\x0a"), "ctx1"...))...)
	w = append(w, frame(0, []byte("one"))...)
	go func() { _, _ = peer.Write(w) }()

	frames, err := c.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 3 || string(frames[0]) != "kv" || binary.BigEndian.Uint64(frames[1]) != 7 || !bytes.Equal(frames[2], long) {
		t.Fatalf("first message: %d frames, %q %q, %d bytes", len(frames), frames[0], frames[1], len(frames[len(frames)-1]))
	}
	frames, err = c.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 1 || string(frames[0]) != "one" {
		t.Fatalf("second message: %q", frames)
	}

	// The PONG: a command frame, "PONG", the ping's context.
	_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(peer)
	hdr := make([]byte, 2)
	if _, err := r.Read(hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, hdr[1])
	if _, err := r.Read(body); err != nil {
		t.Fatal(err)
	}
	if hdr[0] != flagCommand || string(body) != "\x04PONGctx1" {
		t.Fatalf("answer to the ping: flags %#x, %q", hdr[0], body)
	}
}

// TestRecvMalformed: a peer that lies about sizes or sets reserved bits
// gets an error, not an allocation of what it claims.
func TestRecvMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    []byte
	}{
		{"reserved flags", []byte{0x08, 1, 'x'}},
		{"huge frame", binary.BigEndian.AppendUint64([]byte{flagLong}, 1<<62)},
		{"message over the limit", append(frame(flagMore, bytes.Repeat([]byte("x"), MaxMessage/2+1)), binary.BigEndian.AppendUint64([]byte{flagLong}, MaxMessage/2)...)},
		{"multipart command", frame(flagCommand|flagMore, []byte("\x04PING\x00\x00"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Conn{r: bufio.NewReader(bytes.NewReader(tc.w))}
			_, err := c.read()
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("read: %v, want ErrMalformed", err)
			}
		})
	}
}

// TestRecvReusesBuffer: once its buffer fits, reading a message costs no
// allocation.
func TestRecvReusesBuffer(t *testing.T) {
	msg := append(frame(flagMore, []byte("kv")), frame(0, bytes.Repeat([]byte("b"), 3000))...)
	src := bytes.NewReader(nil)
	c := &Conn{r: bufio.NewReaderSize(src, 64<<10)}
	allocs := testing.AllocsPerRun(100, func() {
		src.Reset(msg)
		c.r.Reset(src)
		if _, err := c.read(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("%v allocations per message", allocs)
	}
}

// FuzzRead: whatever a peer sends, reading neither panics nor returns
// frames beyond MaxMessage, and the frames are the message's bodies in
// order.
func FuzzRead(f *testing.F) {
	f.Add(append(frame(flagMore, []byte("kv")), frame(0, []byte("payload"))...))
	f.Add(frame(flagCommand, []byte("\x04PING\x00\x00ctx")))
	f.Add(binary.BigEndian.AppendUint64([]byte{flagLong}, 3))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &Conn{r: bufio.NewReader(bytes.NewReader(b))}
		for range 8 {
			if _, err := c.read(); err != nil {
				return
			}
			total := 0
			for _, fr := range c.frames {
				total += len(fr)
			}
			if total > MaxMessage || total != len(c.buf) || len(c.frames) == 0 {
				t.Fatalf("%d frames, %d bytes, buffer %d", len(c.frames), total, len(c.buf))
			}
		}
	})
}
