package daemon

import (
	"net/url"
	"testing"
)

func TestPeerRoute(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ peer, want string }{
		{"10.0.0.2", "nats-route://10.0.0.2:7422"},
		{" rig-b ", "nats-route://rig-b:7422"},
		{"rig-b:7500", "nats-route://rig-b:7500"},
		{"fd00::3", "nats-route://[fd00::3]:7422"},
		{"[fd00::3]:7500", "nats-route://[fd00::3]:7500"},
		{"", "error"},
		{"rig:0", "error"},
		{"rig:x", "error"},
		{"rig:70000", "error"},
		{"nats-route://rig", "error"},
		{"user@rig", "error"},
	} {
		got, err := PeerRoute(tc.peer)
		if err != nil {
			got = "error"
		}
		if got != tc.want {
			t.Errorf("PeerRoute(%q) = %q (%v), want %q", tc.peer, got, err, tc.want)
		}
	}
}

// FuzzPeerRoute: what --peer and hearth.toml's peer take, typed by
// people, never panics and always makes a URL NATS can parse back to
// a host and a port.
func FuzzPeerRoute(f *testing.F) {
	for _, s := range []string{"10.0.0.2", "rig:7422", "[::1]:1", "::1", "a:b:c", "[", "]:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, peer string) {
		route, err := PeerRoute(peer)
		if err != nil {
			return
		}
		u, err := url.Parse(route)
		if err != nil || u.Scheme != "nats-route" || u.Hostname() == "" || u.Port() == "" {
			t.Fatalf("PeerRoute(%q) = %q, which does not parse back (%v)", peer, route, err)
		}
	})
}
