package router

import (
	"context"
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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
// answers the handshake does not hold the dial past its context.
func TestDialZMQSilentPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			<-done
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = dialZMQ(ctx, "tcp://"+ln.Addr().String(), zmq4.Sub)
	if err == nil || time.Since(start) > 3*time.Second {
		t.Fatalf("dial returned %v after %v", err, time.Since(start))
	}
	if !strings.Contains(err.Error(), "tcp://") {
		t.Errorf("error %q does not name the endpoint", err)
	}
}
