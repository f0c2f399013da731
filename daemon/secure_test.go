package daemon

import (
	"net"
	"os"
	"testing"
)

func TestCheckExposureKeys(t *testing.T) {
	lan := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8000}
	cases := []struct {
		name   string
		addr   net.Addr
		flags  []string
		stored bool
		ok     bool
	}{
		{"loopback without keys", loop, nil, false, true},
		{"LAN without keys", lan, nil, false, false},
		{"LAN with a key on the command line", lan, []string{"k"}, false, true},
		{"LAN with a key kept in the database", lan, nil, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkExposureKeys(Config{APIKeys: tc.flags}, tc.addr, tc.stored)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok = %v", err, tc.ok)
			}
		})
	}
}

func TestAdvertisedAddr(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Skipf("no host name here: %v", err)
	}
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8080}, net.JoinHostPort(host, "8080")},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, net.JoinHostPort(host, "8080")},
		{&net.TCPAddr{IP: net.IPv4(192, 168, 1, 5), Port: 8080}, "192.168.1.5:8080"},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8000}, "127.0.0.1:8000"},
	} {
		if got := advertisedAddr(tc.addr); got != tc.want {
			t.Errorf("advertisedAddr(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}
