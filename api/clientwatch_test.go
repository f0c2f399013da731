package api

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestClientWatcher(t *testing.T) {
	cw := newClientWatcher(time.Second)
	_, staying := tcpPair(t)
	leavingClient, leaving := tcpPair(t)
	_, draining := tcpPair(t)

	stayCtx, stayWatch := cw.watch(staying)
	leaveCtx, _ := cw.watch(leaving)
	drainCtx, drainWatch := cw.watch(draining)
	drainWatch.stopAfter(time.Second)

	now := time.Now()
	cw.check(now)
	for name, ctx := range map[string]context.Context{"staying": stayCtx, "leaving": leaveCtx, "draining": drainCtx} {
		if ctx.Err() != nil {
			t.Errorf("%s: cancelled while its client is there: %v", name, context.Cause(ctx))
		}
	}

	leavingClient.Close()
	// Once the close has reached the other end, the peek sees the end of
	// the stream.
	waitPeerClosed(t, leaving)
	cw.check(now)
	if cause := context.Cause(leaveCtx); !errors.Is(cause, errClientGone) {
		t.Errorf("leaving: cause %v, want errClientGone", cause)
	}

	cw.check(now.Add(3 * time.Second)) // past the drain's time
	if cause := context.Cause(drainCtx); !errors.Is(cause, context.Canceled) {
		t.Errorf("draining: cause %v after its time, want cancelled", cause)
	}
	if stayCtx.Err() != nil {
		t.Errorf("staying: cancelled: %v", context.Cause(stayCtx))
	}

	stayWatch.stop()
	if stayCtx.Err() == nil {
		t.Error("stop left the context running")
	}
	cw.mu.Lock()
	left := len(cw.watches)
	cw.mu.Unlock()
	if left != 1 { // the leaving one stays until its request stops it
		t.Errorf("%d watches left, want 1", left)
	}
}
