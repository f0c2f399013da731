package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/grandcat/zeroconf"
)

// mdnsEntry is an announcement as a browse returns it: from ip (none when
// empty), port, with the TXT records txt.
func mdnsEntry(ip string, port int, txt ...string) *zeroconf.ServiceEntry {
	e := zeroconf.NewServiceEntry("hearth-x", MDNSService, "local.")
	e.Text, e.Port = txt, port
	if ip != "" {
		e.AddrIPv4 = []net.IP{net.ParseIP(ip)}
	}
	return e
}

func TestParsePeer(t *testing.T) {
	entry := func(ip string, txt ...string) *zeroconf.ServiceEntry { return mdnsEntry(ip, 0, txt...) }
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
	entry := mdnsEntry
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

// Over real multicast on a LAN interface: an inviter announced by RunMDNS
// is found by FindInviters at its cluster port, and a node of no cluster
// announced by AnnounceAlone is not taken for one. The test runs itself
// again inside a network namespace of its own, whose only LAN interface is
// one end "lan0" of a veth pair, so that none of its multicast leaves the machine.
func TestFindInvitersOnTheLAN(t *testing.T) {
	const ifc = "lan0"
	if os.Getenv(netnsChildEnv) == "" {
		runInOwnNetns(t, ifc, "10.78.0.1/24")
		return
	}
	ips := LANAddrs(ifc)
	if len(ips) == 0 {
		t.Fatalf("%s has no IPv4 address in the test's namespace", ifc)
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

// netnsChildEnv marks a test binary run again inside its own namespace.
const netnsChildEnv = "HEARTH_TEST_IN_NETNS"

// runInOwnNetns runs the calling test again in a new network namespace with
// a veth pair, its end ifc holding addr (and loopback) up, and fails when it
// fails there. It skips, saying why, without root or ip netns.
func runInOwnNetns(t *testing.T, ifc, addr string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: a network namespace of its own needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipping: ip is not installed")
	}
	ns := fmt.Sprintf("hearth-mdns-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("skipping: ip netns does not work here: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", ifc, "type", "veth", "peer", "name", ifc + "-peer"},
		{"addr", "add", addr, "dev", ifc},
		{"link", "set", ifc + "-peer", "up"},
		{"link", "set", ifc, "up"},
	} {
		if out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), netnsChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in namespace %s: %v\n%s", ns, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("in namespace %s the test did not pass:\n%s", ns, out)
	}
}
