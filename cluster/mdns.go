package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/grandcat/zeroconf"
)

// MDNSService is the service type Hearth nodes announce.
const MDNSService = "_hearth._tcp"

// MDNSConfig configures RunMDNS.
type MDNSConfig struct {
	Node *Node
	// Iface names the one interface to announce and browse on; "" means
	// every LAN interface (LANInterfaces).
	Iface      string
	APIPort    int
	GPUSummary string
	Version    string
	Logger     *slog.Logger
	// BrowseEvery is how long one browse lasts before the next starts
	// (default 20 s).
	BrowseEvery time.Duration
}

// Peer is a node of this node's cluster seen through mDNS.
type Peer struct {
	NodeID   string
	RouteURL string
}

// announcement is the TXT record of a node: no secret, only what a peer
// needs to recognise its cluster and route to the node.
func announcement(n *Node, apiPort int, gpus, version string) []string {
	_, routePort, _ := net.SplitHostPort(strings.TrimPrefix(n.RouteURL(), "nats-route://"))
	txt := []string{
		"node=" + n.id.NodeID(), "cluster=" + n.id.ClusterID(), "version=" + version, "gpus=" + gpus,
		"api=" + strconv.Itoa(apiPort), "route=" + routePort, "name=" + n.cfg.Name,
	}
	if n.id.CanInvite() {
		// Where hearth up --ask-join auto sends its request.
		txt = append(txt, "invite=1")
	}
	return txt
}

// AloneConfig configures AnnounceAlone.
type AloneConfig struct {
	Iface, Name, GPUSummary, Version string
	APIPort                          int
	Logger                           *slog.Logger
}

// aloneAnnouncement is the TXT record of a node of no cluster: empty
// cluster and node ids, so that no cluster routes to it or asks it to
// invite, and what an owner looking at the LAN wants to see.
func aloneAnnouncement(cfg AloneConfig) []string {
	return []string{"node=", "cluster=", "version=" + cfg.Version, "gpus=" + cfg.GPUSummary,
		"api=" + strconv.Itoa(cfg.APIPort), "name=" + cfg.Name}
}

// AnnounceAlone announces a node that belongs to no cluster until ctx
// ends (the service's port is its API's), on the same interfaces as
// RunMDNS: every hearth up is visible on the LAN, in a cluster or not.
func AnnounceAlone(ctx context.Context, cfg AloneConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ifaces := LANInterfaces(cfg.Iface)
	if len(ifaces) == 0 {
		return errors.New("mdns: no LAN interface to announce on (name one with --advertise-iface)")
	}
	// The instance name must differ from every other node's.
	srv, err := zeroconf.Register("hearth-"+cfg.Name+"-"+newIncarnation()[:6], MDNSService, "local.", cfg.APIPort, aloneAnnouncement(cfg), ifaces)
	if err != nil {
		return fmt.Errorf("mdns: announce: %w", err)
	}
	defer srv.Shutdown()
	cfg.Logger.Info("mdns: announcing (in no cluster)", "service", MDNSService)
	<-ctx.Done()
	return nil
}

// Inviter is a node seen through mDNS that holds its cluster's CA key, so
// that it takes join requests: its cluster port's address.
type Inviter struct {
	ClusterID, NodeID, Name string
	Addr                    string // host:port of the cluster port
}

// parseInviter reads an inviter from an mDNS entry; ok is false for nodes
// that cannot invite and for nodes of no cluster.
func parseInviter(e *zeroconf.ServiceEntry) (Inviter, bool) {
	txt := map[string]string{}
	for _, t := range e.Text {
		k, v, _ := strings.Cut(t, "=")
		txt[k] = v
	}
	if txt["invite"] != "1" || txt["cluster"] == "" || txt["node"] == "" || len(e.AddrIPv4) == 0 || e.Port <= 0 || e.Port > 65535 {
		return Inviter{}, false
	}
	return Inviter{ClusterID: txt["cluster"], NodeID: txt["node"], Name: txt["name"],
		Addr: net.JoinHostPort(e.AddrIPv4[0].String(), strconv.Itoa(e.Port))}, true
}

// FindInviters browses mDNS for d on the LAN interfaces (or iface) and
// returns the nodes found that take join requests.
func FindInviters(ctx context.Context, iface string, d time.Duration) ([]Inviter, error) {
	ifaces := LANInterfaces(iface)
	if len(ifaces) == 0 {
		return nil, errors.New("mdns: no LAN interface to browse on (name one with --advertise-iface)")
	}
	resolver, err := zeroconf.NewResolver(zeroconf.SelectIfaces(ifaces), zeroconf.SelectIPTraffic(zeroconf.IPv4))
	if err != nil {
		return nil, fmt.Errorf("mdns: browse: %w", err)
	}
	entries := make(chan *zeroconf.ServiceEntry, 16)
	bctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := resolver.Browse(bctx, MDNSService, "local.", entries); err != nil {
		return nil, fmt.Errorf("mdns: browse: %w", err)
	}
	seen := map[string]bool{}
	var out []Inviter
	for {
		select {
		case <-bctx.Done():
			return out, ctx.Err()
		case e, ok := <-entries:
			if !ok {
				return out, ctx.Err()
			}
			if inv, ok := parseInviter(e); ok && !seen[inv.NodeID] {
				seen[inv.NodeID] = true
				out = append(out, inv)
			}
		}
	}
}

// ChooseInviter picks where --ask-join auto asks: the inviter of the one
// cluster found. Several clusters, or none, is an error that names them.
func ChooseInviter(found []Inviter) (Inviter, error) {
	byCluster := map[string]Inviter{}
	var clusters []string
	for _, inv := range found {
		if _, ok := byCluster[inv.ClusterID]; !ok {
			clusters = append(clusters, inv.ClusterID)
			byCluster[inv.ClusterID] = inv
		}
	}
	switch len(clusters) {
	case 0:
		return Inviter{}, errors.New("no cluster's inviting node answered on mDNS; give its address: --ask-join HOST[:PORT]")
	case 1:
		return byCluster[clusters[0]], nil
	}
	sort.Strings(clusters)
	names := make([]string, len(clusters))
	for i, c := range clusters {
		inv := byCluster[c]
		names[i] = fmt.Sprintf("cluster %s at %s (node %s)", c, inv.Addr, inv.Name)
	}
	return Inviter{}, fmt.Errorf("several clusters found on mDNS: %s; name one: --ask-join HOST[:PORT]", strings.Join(names, ", "))
}

// parsePeer reads a peer of the given cluster from an mDNS entry; ok is
// false for another cluster's nodes, this node, or an entry lacking parts.
func parsePeer(e *zeroconf.ServiceEntry, clusterID, self string) (Peer, bool) {
	txt := map[string]string{}
	for _, t := range e.Text {
		k, v, _ := strings.Cut(t, "=")
		txt[k] = v
	}
	if txt["cluster"] != clusterID || txt["node"] == "" || txt["node"] == self || txt["route"] == "" || len(e.AddrIPv4) == 0 {
		return Peer{}, false
	}
	if _, err := strconv.Atoi(txt["route"]); err != nil {
		return Peer{}, false
	}
	return Peer{NodeID: txt["node"], RouteURL: "nats-route://" + net.JoinHostPort(e.AddrIPv4[0].String(), txt["route"])}, true
}

// RunMDNS announces the node until ctx ends and browses for peers of its
// cluster, adding a NATS route to each one found. Only LAN interfaces are
// used: never loopback, docker0, bridges or veths unless cfg.Iface names
// one.
func RunMDNS(ctx context.Context, cfg MDNSConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BrowseEvery <= 0 {
		cfg.BrowseEvery = 20 * time.Second
	}
	n := cfg.Node
	ifaces := LANInterfaces(cfg.Iface)
	if len(ifaces) == 0 {
		return errors.New("mdns: no LAN interface to announce on (name one with --advertise-iface)")
	}
	_, port, _ := net.SplitHostPort(n.ProxyAddr())
	p, _ := strconv.Atoi(port)
	srv, err := zeroconf.Register("hearth-"+n.id.NodeID(), MDNSService, "local.", p,
		announcement(n, cfg.APIPort, cfg.GPUSummary, cfg.Version), ifaces)
	if err != nil {
		return fmt.Errorf("mdns: announce: %w", err)
	}
	defer srv.Shutdown()
	names := make([]string, len(ifaces))
	for i, f := range ifaces {
		names[i] = f.Name
	}
	cfg.Logger.Info("mdns: announcing", "service", MDNSService, "interfaces", strings.Join(names, ","))
	for ctx.Err() == nil {
		resolver, err := zeroconf.NewResolver(zeroconf.SelectIfaces(ifaces), zeroconf.SelectIPTraffic(zeroconf.IPv4))
		if err != nil {
			return fmt.Errorf("mdns: browse: %w", err)
		}
		entries := make(chan *zeroconf.ServiceEntry, 16)
		bctx, cancel := context.WithTimeout(ctx, cfg.BrowseEvery)
		if err := resolver.Browse(bctx, MDNSService, "local.", entries); err != nil {
			cancel()
			return fmt.Errorf("mdns: browse: %w", err)
		}
	browse:
		for {
			select {
			case <-bctx.Done():
				break browse
			case e, ok := <-entries:
				if !ok {
					break browse
				}
				peer, ok := parsePeer(e, n.id.ClusterID(), n.id.NodeID())
				if !ok {
					continue
				}
				if err := n.AddRoute(peer.RouteURL); err != nil {
					cfg.Logger.Debug("mdns: route to peer", "peer", peer.NodeID, "error", err)
				} else {
					cfg.Logger.Info("mdns: peer found", "peer", peer.NodeID, "route", peer.RouteURL)
				}
			}
		}
		cancel()
	}
	return nil
}
