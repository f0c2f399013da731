package cluster

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"
)

// TestWakeSendsTheMagicPacket: the packet a listener receives is six 0xFF
// bytes and the MAC sixteen times.
func TestWakeSendsTheMagicPacket(t *testing.T) {
	ln, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	mac, err := ParseWakeMAC("a8-a1-59-00-00-01")
	if err != nil {
		t.Fatal(err)
	}
	if err := Wake(context.Background(), mac, ln.LocalAddr().String()); err != nil {
		t.Fatal(err)
	}
	_ = ln.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	n, _, err := ln.ReadFrom(buf)
	if err != nil {
		t.Fatalf("no packet seen: %v", err)
	}
	want := bytes.Repeat([]byte{0xff}, 6)
	for range 16 {
		want = append(want, 0xa8, 0xa1, 0x59, 0x00, 0x00, 0x01)
	}
	if !bytes.Equal(buf[:n], want) {
		t.Errorf("packet %x, want %x", buf[:n], want)
	}
}

func TestParseWakeMAC(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"a8:a1:59:00:00:01", true},
		{"A8-A1-59-00-00-01", true},
		{"a8:a1:59:00:00", false},
		{"00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01", false}, // InfiniBand
		{"rig-b", false},
	} {
		if _, err := ParseWakeMAC(tc.in); (err == nil) != tc.ok {
			t.Errorf("ParseWakeMAC(%q): %v, want ok %v", tc.in, err, tc.ok)
		}
	}
}
