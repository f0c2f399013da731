package cluster

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

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

func TestParseInviterAndChoose(t *testing.T) {
	entry := func(ip string, port int, txt ...string) *zeroconf.ServiceEntry {
		e := zeroconf.NewServiceEntry("hearth-x", MDNSService, "local.")
		e.Text, e.Port = txt, port
		if ip != "" {
			e.AddrIPv4 = []net.IP{net.ParseIP(ip)}
		}
		return e
	}
	cases := []struct {
		name string
		e    *zeroconf.ServiceEntry
		addr string
	}{
		{"inviter", entry("10.0.0.2", 7443, "node=p", "cluster=c1", "name=a", "invite=1"), "10.0.0.2:7443"},
		{"member without the CA key", entry("10.0.0.3", 7443, "node=q", "cluster=c1"), ""},
		{"node of no cluster", entry("10.0.0.4", 8000, "node=", "cluster=", "invite=1"), ""},
		{"no address", entry("", 7443, "node=p", "cluster=c1", "invite=1"), ""},
		{"no port", entry("10.0.0.2", 0, "node=p", "cluster=c1", "invite=1"), ""},
	}
	alone := entry("10.0.0.5", 8000, aloneAnnouncement(AloneConfig{Name: "z", APIPort: 8000})...)
	if _, ok := parseInviter(alone); ok {
		t.Error("a node of no cluster is taken for an inviter")
	}
	if _, ok := parsePeer(alone, "c1", "me"); ok {
		t.Error("a node of no cluster is taken for a peer")
	}
	var found []Inviter
	for _, c := range cases {
		inv, ok := parseInviter(c.e)
		if ok != (c.addr != "") || inv.Addr != c.addr {
			t.Errorf("%s: %+v %v, want address %q", c.name, inv, ok, c.addr)
		}
		if ok {
			found = append(found, inv)
		}
	}
	if got, err := ChooseInviter(found); err != nil || got.Addr != "10.0.0.2:7443" || got.ClusterID != "c1" {
		t.Errorf("one cluster: %+v %v", got, err)
	}
	if _, err := ChooseInviter(nil); err == nil || !strings.Contains(err.Error(), "--ask-join HOST") {
		t.Errorf("none: %v", err)
	}
	two := append(found, Inviter{ClusterID: "c2", NodeID: "r", Name: "z", Addr: "10.0.0.9:7443"})
	if _, err := ChooseInviter(two); err == nil || !strings.Contains(err.Error(), "c1") || !strings.Contains(err.Error(), "10.0.0.9:7443") {
		t.Errorf("two clusters: %v", err)
	}
}

// Over real multicast on the first LAN interface: an inviter announced by
// RunMDNS is found by FindInviters at its cluster port, and a node of no
// cluster announced by AnnounceAlone is not taken for one.
func TestFindInvitersOnTheLAN(t *testing.T) {
	ifcs := LANInterfaces("")
	if len(ifcs) == 0 {
		t.Skip("skipping: no LAN interface (up, multicast, not virtual) to announce on")
	}
	ifc := ifcs[0].Name
	ips := LANAddrs(ifc)
	if len(ips) == 0 {
		t.Skipf("skipping: %s has no IPv4 address", ifc)
	}
	id, err := Create(t.TempDir(), "inviter")
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Identity: id, Name: "inviter", ClusterListen: net.JoinHostPort(ips[0].String(), "0"), RouteListen: "127.0.0.1:0", Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = RunMDNS(ctx, MDNSConfig{Node: n, Iface: ifc, Logger: quietLog()}) }()
	go func() { _ = AnnounceAlone(ctx, AloneConfig{Iface: ifc, Name: "alone", APIPort: 1, Logger: quietLog()}) }()
	var found []Inviter
	for try := 0; try < 3 && !containsInviter(found, id.NodeID()); try++ {
		found, err = FindInviters(ctx, ifc, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
	}
	if !containsInviter(found, id.NodeID()) {
		t.Fatalf("the inviter was not found on %s: %+v", ifc, found)
	}
	for _, inv := range found {
		if inv.NodeID == id.NodeID() && (inv.Addr != n.ProxyAddr() || inv.ClusterID != id.ClusterID() || inv.Name != "inviter") {
			t.Fatalf("found %+v, want the cluster port %s", inv, n.ProxyAddr())
		}
		if inv.Name == "alone" {
			t.Fatalf("a node of no cluster taken for an inviter: %+v", inv)
		}
	}
}

func containsInviter(found []Inviter, nodeID string) bool {
	for _, inv := range found {
		if inv.NodeID == nodeID {
			return true
		}
	}
	return false
}
