package netguard

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// One client address that holds every connection it can (silent, as a
// slow body or a kept-idle connection is) gets its share of the slots, not
// all of them: another address is still served.
func TestOneAddressCannotTakeEverySlot(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Listen(inner, Config{MaxConns: 8, Logger: quiet()}) // a share of 2
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "served") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	for range 8 { // 127.0.0.1 opens as many connections as there are slots and says nothing
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	other := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	client := &http.Client{
		Transport: &http.Transport{DialContext: other.DialContext},
		Timeout:   20 * time.Second, // bounds a failing test: the other address waits in the backlog forever
	}
	resp, err := client.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatalf("another address was not served while one held the slots: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "served" {
		t.Fatalf("answer %q", body)
	}
}

// An address is crowded from three quarters of its share: from then on its
// connections' reads are cut to CrowdedTimeout (conn.SetReadDeadline).
func TestAddressCrowdedFromThreeQuarters(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Listen(inner, Config{MaxConns: 16, MaxConnsPerAddr: 4, Logger: quiet()})
	defer ln.Close()
	for i := range 4 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		far := time.Now().Add(time.Hour)
		if err := s.SetReadDeadline(far); err != nil {
			t.Fatal(err)
		}
		crowded := i+1 >= 3 // three of four
		if got := ln.(*listener).crowded("127.0.0.1"); got != crowded {
			t.Fatalf("with %d connections: crowded %v, want %v", i+1, got, crowded)
		}
	}
}
