package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/cluster"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
)

// Default ports of the cluster plane: the cluster port (joins and the
// engine proxy, TLS) and the NATS routes (mutual TLS).
const (
	DefaultClusterPort = 7443
	DefaultRoutePort   = 7422
)

// host is the host advertised to peers.
func (c ClusterConfig) host() string {
	if c.AdvertiseHost != "" {
		return c.AdvertiseHost
	}
	if c.AdvertiseIface != "" {
		if addrs := cluster.LANAddrs(c.AdvertiseIface); len(addrs) > 0 {
			return addrs[0].String()
		}
	}
	return ""
}

// startClusterNode joins the node to its cluster when it has an identity
// (or a --join token, or an --ask-join the owner accepts): nil when it
// belongs to none.
func startClusterNode(ctx context.Context, cfg Config, rt *router.Router, gpus []nodes.GPU, log *slog.Logger) (*cluster.Node, error) {
	c := cfg.Cluster
	dir := cfg.Data().Cluster()
	id, err := cluster.Load(dir)
	var routes []string
	switch {
	case errors.Is(err, cluster.ErrNoCluster) && c.AskJoin != "":
		res, err := askJoin(ctx, c, dir, cfg.Node, log)
		if err != nil {
			return nil, fmt.Errorf("up: %w", err)
		}
		id, routes = res.Identity, res.Routes
		log.Info("joined the cluster", "cluster", id.ClusterID(), "node_id", id.NodeID())
	case errors.Is(err, cluster.ErrNoCluster) && c.Join == "":
		// Seen on the LAN, so that an owner knows it is there to join; a
		// daemon that answers on loopback only has nothing to show the LAN.
		if c.MDNS && !listensOnLoopback(cfg.Listen) {
			go func() {
				err := cluster.AnnounceAlone(ctx, cluster.AloneConfig{
					Iface: c.AdvertiseIface, Name: cfg.Node, GPUSummary: gpuSummary(gpus), Version: cfg.Version, APIPort: portOf(cfg.Listen), Logger: log,
				})
				if err != nil && ctx.Err() == nil {
					log.Debug("mdns: not announced", "error", err)
				}
			}()
		}
		return nil, nil
	case errors.Is(err, cluster.ErrNoCluster):
		tok, err := cluster.ParseToken(c.Join)
		if err != nil {
			return nil, fmt.Errorf("%w: --join: %v", ErrUsage, err)
		}
		res, err := cluster.Join(ctx, dir, cfg.Node, tok)
		if err != nil {
			return nil, fmt.Errorf("up: %w", err)
		}
		id, routes = res.Identity, res.Routes
		log.Info("joined the cluster", "cluster", id.ClusterID(), "node_id", id.NodeID())
	case err != nil:
		return nil, fmt.Errorf("up: %w", err)
	case c.Join != "":
		tok, perr := cluster.ParseToken(c.Join)
		if perr == nil && tok.Fingerprint != id.Fingerprint() {
			return nil, fmt.Errorf("up: this node already belongs to cluster %s; run hearth cluster leave first", id.ClusterID())
		}
	case c.AskJoin != "":
		// A service keeps its flags across restarts: once in, the flag
		// has done its work.
		log.Info("this node already belongs to a cluster: --ask-join is ignored", "cluster", id.ClusterID())
	}
	// Besides the join's route: the peers named by --peer, and those seen
	// before a restart (kept in the cluster directory), so that the
	// cluster forms and heals where mDNS does not reach. Explicit routes
	// are redialled for as long as their node is away.
	routes = append(routes, c.Peers...)
	routes = append(routes, cluster.KnownRoutes(dir)...)
	inventory := make([]cluster.GPUInfo, len(gpus))
	for i, g := range gpus {
		inventory[i] = cluster.GPUInfo{Index: g.Index, Name: g.Name, MemoryMiB: int(g.MemoryTotal >> 20)}
	}
	node, err := cluster.New(cluster.Config{
		Identity: id, Name: cfg.Node, ClusterListen: c.Listen, RouteListen: c.RouteListen, AdvertiseHost: c.host(),
		Routes: routes, APIAddr: cfg.Listen, Version: cfg.Version, Workers: rt, Load: rt,
		GPUs:    func() []cluster.GPUInfo { return inventory },
		Running: func(name string) (int, bool) { return runningOn(rt, name) },
		Queued:  rt.QueueLen,
		OnSelfRevoked: func(n *cluster.Node) {
			log.Error("this node's cluster certificate was revoked: it leaves the cluster")
			n.Close()
		},
		Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("up: %w", err)
	}
	log.Info("cluster plane up", "cluster", id.ClusterID(), "node_id", id.NodeID(), "cluster_port", node.ProxyAddr(), "routes", node.RouteURL(),
		"dialling", strings.Join(routes, ","))
	if c.MDNS {
		go func() {
			err := cluster.RunMDNS(ctx, cluster.MDNSConfig{
				Node: node, Iface: c.AdvertiseIface, APIPort: portOf(cfg.Listen), GPUSummary: gpuSummary(gpus), Version: cfg.Version, Logger: log,
			})
			if err != nil && ctx.Err() == nil {
				log.Warn("mdns stopped", "error", err)
			}
		}()
	}
	return node, nil
}

// PeerRoute is the NATS route URL of a node named by --peer: HOST or
// HOST:PORT (an IPv6 address in brackets when it has a port), the port
// being its cluster routes port (DefaultRoutePort when left out).
func PeerRoute(peer string) (string, error) {
	host, port := strings.TrimSpace(peer), strconv.Itoa(DefaultRoutePort)
	if h, p, err := net.SplitHostPort(host); err == nil {
		host, port = h, p
	} else if strings.Count(host, ":") == 1 {
		return "", fmt.Errorf("--peer %q: %w", peer, err)
	}
	host = strings.Trim(host, "[]")
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("--peer %q: the port must be a number from 1 to 65535", peer)
	}
	if host == "" || strings.ContainsAny(host, "/?#@ \t") {
		return "", fmt.Errorf("--peer %q: want HOST or HOST:PORT", peer)
	}
	// The route must read back as this host: that refuses what a URL
	// cannot carry ("%", "a:b:c").
	route := "nats-route://" + net.JoinHostPort(host, port)
	if u, err := url.Parse(route); err != nil || u.Hostname() != host {
		return "", fmt.Errorf("--peer %q: want HOST, HOST:PORT or [IPv6]:PORT", peer)
	}
	return route, nil
}

// askJoin asks the node named by --ask-join (or the one inviting node
// mDNS finds) to let this node in, and waits for its owner.
func askJoin(ctx context.Context, c ClusterConfig, dir, name string, log *slog.Logger) (*cluster.JoinResult, error) {
	addr := c.AskJoin
	if addr == "auto" {
		log.Info("looking for a cluster to join on mDNS", "service", cluster.MDNSService, "for", askBrowse)
		found, err := cluster.FindInviters(ctx, c.AdvertiseIface, askBrowse)
		if err != nil {
			return nil, fmt.Errorf("--ask-join auto: %w", err)
		}
		inv, err := cluster.ChooseInviter(found)
		if err != nil {
			return nil, fmt.Errorf("--ask-join auto: %w", err)
		}
		log.Info("found a cluster on mDNS", "cluster", inv.ClusterID, "node", inv.Name, "address", inv.Addr)
		addr = inv.Addr
	} else if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(strings.Trim(addr, "[]"), strconv.Itoa(DefaultClusterPort))
	}
	if name == "" {
		name, _ = os.Hostname()
	}
	return cluster.AskJoin(ctx, cluster.AskConfig{Dir: dir, Name: name, Addr: addr, OnCode: func(code, inviter string) {
		log.Warn(fmt.Sprintf("waiting for the owner to accept code %s on the console of %s (or hearth cluster accept there)", code, inviter),
			"code", code, "inviter", inviter, "address", addr)
	}})
}

// askBrowse is how long --ask-join auto listens for clusters on mDNS.
const askBrowse = 5 * time.Second

// runningOn is what the router has running on the worker called name
// and whether it finds the worker's KV cache full.
func runningOn(rt *router.Router, name string) (running int, full bool) {
	for _, w := range rt.Workers() {
		if w.Info.Name == name {
			return w.ActiveRequests, w.Saturated
		}
	}
	return 0, false
}

func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

func gpuSummary(gpus []nodes.GPU) string {
	count := map[string]int{}
	var order []string
	for _, g := range gpus {
		if count[g.Kind] == 0 {
			order = append(order, g.Kind)
		}
		count[g.Kind]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%dx%s", count[k], k)
	}
	return strings.Join(parts, "+")
}

// clusterOffer is where the fleet offers its engines to the cluster.
type clusterOffer interface {
	AddLocalEngine(cluster.LocalEngine) (func(), error)
}

// TokenAddrs are the cluster-port addresses a join token carries: those
// named, else every LAN address (of iface, when named) on port. hearth
// cluster token and the console's Cluster page both invite with it.
func TokenAddrs(named []string, iface string, port int) []string {
	if len(named) > 0 {
		return named
	}
	var addrs []string
	for _, ip := range cluster.LANAddrs(iface) {
		addrs = append(addrs, net.JoinHostPort(ip.String(), strconv.Itoa(port)))
	}
	return addrs
}
