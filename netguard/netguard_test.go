package netguard

import (
	"io"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestAcceptWaitsForAFreeSlot(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Listen(inner, Config{MaxConns: 2, MaxConnsPerAddr: -1, Logger: quiet()})
	defer ln.Close()
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	a, _ := ln.Accept()
	b, _ := ln.Accept()
	third := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		third <- c
	}()
	select {
	case <-third:
		t.Fatal("a third connection was accepted with two open and a cap of two")
	case <-time.After(200 * time.Millisecond):
	}
	a.Close()
	select {
	case c := <-third:
		c.Close()
	case <-time.After(2 * time.Second):
		t.Fatal("closing a connection did not free its slot")
	}
	b.Close()
}

// failing returns EMFILE a few times before it accepts.
type failing struct {
	net.Listener
	fails int
}

func (f *failing) Accept() (net.Conn, error) {
	if f.fails > 0 {
		f.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return f.Listener.Accept()
}

func TestAcceptRetriesWhenOutOfDescriptors(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Listen(&failing{Listener: inner, fails: 3}, Config{MaxConns: 4, Logger: quiet()})
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := ln.Accept()
	if err != nil {
		t.Fatalf("Accept gave up: %v", err)
	}
	got.Close()
}

func TestCloseEndsAWaitingAccept(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Listen(inner, Config{MaxConns: 1, Logger: quiet()})
	errc := make(chan error, 1)
	go func() { _, err := ln.Accept(); errc <- err }()
	time.Sleep(50 * time.Millisecond)
	ln.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("Accept returned a connection from a closed listener")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Accept kept waiting after Close")
	}
}
