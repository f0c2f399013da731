package cluster

import (
	"bytes"
	"context"
	"net"
	"os"
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

// TestWakeBroadcastInANamespace: the magic packet sent to the LAN's
// directed broadcast, as --wake-addr names it, is seen by a listener on
// the Wake-on-LAN port of that LAN. The test runs itself again in a
// network namespace of its own, on one end of a veth pair, so that the
// broadcast leaves nothing of the machine's; it skips without root.
func TestWakeBroadcastInANamespace(t *testing.T) {
	const ifc = "lan0"
	if os.Getenv(netnsChildEnv) == "" {
		runInOwnNetns(t, ifc, "10.79.0.1/24")
		return
	}
	ln, err := net.ListenPacket("udp4", ":9")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	mac, _ := ParseWakeMAC("a8:a1:59:00:00:02")
	if err := Wake(context.Background(), mac, "10.79.0.255:9"); err != nil {
		t.Fatal(err)
	}
	_ = ln.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	n, from, err := ln.ReadFrom(buf)
	if err != nil {
		t.Fatalf("no packet seen on the LAN: %v", err)
	}
	if !bytes.Equal(buf[:n], MagicPacket(mac)) {
		t.Errorf("packet %x from %s, want the magic packet", buf[:n], from)
	}
	t.Logf("magic packet of %d bytes seen from %s", n, from)
}
