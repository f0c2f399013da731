package cluster

import (
	"net"
	"testing"

	"github.com/grandcat/zeroconf"
)

func TestParsePeer(t *testing.T) {
	entry := func(ip string, txt ...string) *zeroconf.ServiceEntry {
		e := zeroconf.NewServiceEntry("hearth-x", MDNSService, "local.")
		e.Text = txt
		if ip != "" {
			e.AddrIPv4 = []net.IP{net.ParseIP(ip)}
		}
		return e
	}
	cases := []struct {
		name  string
		e     *zeroconf.ServiceEntry
		ok    bool
		route string
	}{
		{"peer of this cluster", entry("10.0.0.2", "node=p", "cluster=c1", "route=7422"), true, "nats-route://10.0.0.2:7422"},
		{"another cluster", entry("10.0.0.2", "node=p", "cluster=c2", "route=7422"), false, ""},
		{"this node", entry("10.0.0.2", "node=me", "cluster=c1", "route=7422"), false, ""},
		{"no address", entry("", "node=p", "cluster=c1", "route=7422"), false, ""},
		{"bad route port", entry("10.0.0.2", "node=p", "cluster=c1", "route=x"), false, ""},
		{"no route", entry("10.0.0.2", "node=p", "cluster=c1"), false, ""},
	}
	for _, c := range cases {
		p, ok := parsePeer(c.e, "c1", "me")
		if ok != c.ok || p.RouteURL != c.route {
			t.Errorf("%s: %+v %v, want ok=%v route %q", c.name, p, ok, c.ok, c.route)
		}
	}
}

// Loopback, docker0, bridges and veths are never announced on unless
// named; a named interface is used whatever it is.
func TestVirtualInterfacesAreSkipped(t *testing.T) {
	for _, name := range []string{"docker0", "br-1a2b", "veth12ab", "virbr0", "cni0", "flannel.1"} {
		if !virtualInterface(name) {
			t.Errorf("%s is announced on", name)
		}
	}
	for _, name := range []string{"eth0", "enp3s0", "wlan0", "lan0"} {
		if virtualInterface(name) {
			t.Errorf("%s is skipped", name)
		}
	}
	for _, ifc := range LANInterfaces("") {
		if ifc.Flags&net.FlagLoopback != 0 {
			t.Errorf("loopback %s listed as a LAN interface", ifc.Name)
		}
	}
	if got := LANInterfaces("lo"); len(got) != 1 || got[0].Name != "lo" {
		t.Errorf("LANInterfaces(\"lo\") = %v, want lo when named", got)
	}
}
