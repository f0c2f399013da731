package router

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

func TestZMQAddress(t *testing.T) {
	for _, tc := range []struct {
		endpoint, network, addr string
		err                     bool
	}{
		{"tcp://10.0.0.5:5557", "tcp", "10.0.0.5:5557", false},
		{"ipc:///tmp/kv.sock", "unix", "/tmp/kv.sock", false},
		{"inproc://kv", "", "", true},
		{"10.0.0.5:5557", "", "", true},
	} {
		network, addr, err := zmqAddress(tc.endpoint)
		if network != tc.network || addr != tc.addr || (err != nil) != tc.err {
			t.Errorf("%s: %q %q %v", tc.endpoint, network, addr, err)
		}
	}
}

// TestDialZMQOverIPC: a subscriber reaches a publisher on a Unix socket,
// as vLLM publishes when given an ipc:// endpoint.
func TestDialZMQOverIPC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep := "ipc://" + filepath.Join(t.TempDir(), "kv.sock")
	pub := zmq4.NewPub(ctx)
	defer pub.Close()
	if err := pub.Listen(ep); err != nil {
		t.Fatal(err)
	}
	sub, err := dialZMQ(ctx, ep, zmq4.Sub)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.SendMsg(zmq4.NewMsg([]byte{1})); err != nil {
		t.Fatal(err)
	}
	got := make(chan zmq4.Msg, 1)
	go func() {
		msg, _ := sub.RecvMsg()
		got <- msg
	}()
	// The publisher learns of the subscription asynchronously: publish
	// until the subscriber has a message.
	for {
		if err := pub.Send(zmq4.NewMsgFrom([]byte("kv"), []byte("batch"))); err != nil {
			t.Fatal(err)
		}
		select {
		case msg := <-got:
			if len(msg.Frames) != 2 || string(msg.Frames[1]) != "batch" {
				t.Fatalf("received %q", msg.Frames)
			}
			return
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("nothing received")
		}
	}
}

// TestDialZMQSilentPeer: a peer that accepts the connection but never
// answers the handshake does not hold the dial past its context: the dial
// ends when the context does, not at its own timeout.
func TestDialZMQSilentPeer(t *testing.T) {
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
	_, err = dialZMQ(ctx, "tcp://"+ln.Addr().String(), zmq4.Sub)
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
