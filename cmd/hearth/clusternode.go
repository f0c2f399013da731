package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/cluster"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
)

// Default ports of the cluster plane: the cluster port (joins and the
// engine proxy, TLS) and the NATS routes (mutual TLS).
const (
	defaultClusterPort = 7443
	defaultRoutePort   = 7422
)

// clusterConfig is hearth up's share of the cluster flags.
type clusterConfig struct {
	join           string // a token from hearth cluster token
	askJoin        string // host[:port] of an inviting node, or "auto" (mDNS)
	listen         string // the cluster port
	routeListen    string // NATS routes
	advertiseHost  string
	advertiseIface string
	mdns           bool
}

func registerClusterFlags(fs *flag.FlagSet, c *clusterConfig) {
	fs.StringVar(&c.join, "join", "", "join the cluster of the token `hearth cluster token` printed on its first node")
	fs.StringVar(&c.askJoin, "ask-join", "", "ask to join the cluster of the node at `HOST[:PORT]` (its cluster port, default "+strconv.Itoa(defaultClusterPort)+"), or auto to find it with mDNS; its owner accepts after comparing the code both print")
	fs.StringVar(&c.listen, "cluster-listen", net.JoinHostPort("0.0.0.0", strconv.Itoa(defaultClusterPort)), "address of the cluster port (joins and the engine proxy, TLS), when this node belongs to a cluster")
	fs.StringVar(&c.routeListen, "cluster-routes-listen", net.JoinHostPort("0.0.0.0", strconv.Itoa(defaultRoutePort)), "address of the cluster's NATS routes (mutual TLS)")
	fs.StringVar(&c.advertiseHost, "advertise-host", "", "the address peers reach this node at (default: the first LAN address of --advertise-iface or of any LAN interface)")
	fs.StringVar(&c.advertiseIface, "advertise-iface", "", "the interface to announce on with mDNS and advertise (default: every LAN interface; loopback, docker0, bridges and veths only when named here)")
	fs.BoolVar(&c.mdns, "mdns", true, "announce this node with mDNS (_hearth._tcp) and find the cluster's peers on the LAN")
}

// clusterDir is where a node keeps its cluster identity.
func clusterDir(dataDir string) string { return filepath.Join(dataDir, "cluster") }

// clusterHost is the host advertised to peers.
func (c clusterConfig) host() string {
	if c.advertiseHost != "" {
		return c.advertiseHost
	}
	if c.advertiseIface != "" {
		if addrs := cluster.LANAddrs(c.advertiseIface); len(addrs) > 0 {
			return addrs[0].String()
		}
	}
	return ""
}

// startClusterNode joins the node to its cluster when it has an identity
// (or a --join token, or an --ask-join the owner accepts): nil when it
// belongs to none.
func startClusterNode(ctx context.Context, cfg upConfig, rt *router.Router, gpus []nodes.GPU, log *slog.Logger) (*cluster.Node, error) {
	c := cfg.cluster
	dir := clusterDir(cfg.dataDir)
	id, err := cluster.Load(dir)
	var routes []string
	switch {
	case errors.Is(err, cluster.ErrNoCluster) && c.askJoin != "":
		res, err := askJoin(ctx, c, dir, cfg.node, log)
		if err != nil {
			return nil, fmt.Errorf("up: %w", err)
		}
		id, routes = res.Identity, res.Routes
		log.Info("joined the cluster", "cluster", id.ClusterID(), "node_id", id.NodeID())
	case errors.Is(err, cluster.ErrNoCluster) && c.join == "":
		// Seen on the LAN, so that an owner knows it is there to join; a
		// daemon that answers on loopback only has nothing to show the LAN.
		if c.mdns && !listensOnLoopback(cfg.listen) {
			go func() {
				err := cluster.AnnounceAlone(ctx, cluster.AloneConfig{
					Iface: c.advertiseIface, Name: cfg.node, GPUSummary: gpuSummary(gpus), Version: version, APIPort: portOf(cfg.listen), Logger: log,
				})
				if err != nil && ctx.Err() == nil {
					log.Debug("mdns: not announced", "error", err)
				}
			}()
		}
		return nil, nil
	case errors.Is(err, cluster.ErrNoCluster):
		tok, err := cluster.ParseToken(c.join)
		if err != nil {
			return nil, fmt.Errorf("%w: --join: %v", errUsage, err)
		}
		res, err := cluster.Join(ctx, dir, cfg.node, tok)
		if err != nil {
			return nil, fmt.Errorf("up: %w", err)
		}
		id, routes = res.Identity, res.Routes
		log.Info("joined the cluster", "cluster", id.ClusterID(), "node_id", id.NodeID())
	case err != nil:
		return nil, fmt.Errorf("up: %w", err)
	case c.join != "":
		tok, perr := cluster.ParseToken(c.join)
		if perr == nil && tok.Fingerprint != id.Fingerprint() {
			return nil, fmt.Errorf("up: this node already belongs to cluster %s; run hearth cluster leave first", id.ClusterID())
		}
	case c.askJoin != "":
		// A service keeps its flags across restarts: once in, the flag
		// has done its work.
		log.Info("this node already belongs to a cluster: --ask-join is ignored", "cluster", id.ClusterID())
	}
	// Besides the join's route: the peers' routes seen before a restart.
	routes = append(routes, cluster.KnownRoutes(dir)...)
	inventory := make([]cluster.GPUInfo, len(gpus))
	for i, g := range gpus {
		inventory[i] = cluster.GPUInfo{Index: g.Index, Name: g.Name, MemoryMiB: int(g.MemoryTotal >> 20)}
	}
	node, err := cluster.New(cluster.Config{
		Identity: id, Name: cfg.node, ClusterListen: c.listen, RouteListen: c.routeListen, AdvertiseHost: c.host(),
		Routes: routes, APIAddr: cfg.listen, Version: version, Workers: rt, Load: rt,
		GPUs:    func() []cluster.GPUInfo { return inventory },
		Running: func(name string) int { return runningOn(rt, name) },
		OnSelfRevoked: func(n *cluster.Node) {
			log.Error("this node's cluster certificate was revoked: it leaves the cluster")
			n.Close()
		},
		Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("up: %w", err)
	}
	log.Info("cluster plane up", "cluster", id.ClusterID(), "node_id", id.NodeID(), "cluster_port", node.ProxyAddr(), "routes", node.RouteURL())
	if c.mdns {
		go func() {
			err := cluster.RunMDNS(ctx, cluster.MDNSConfig{
				Node: node, Iface: c.advertiseIface, APIPort: portOf(cfg.listen), GPUSummary: gpuSummary(gpus), Version: version, Logger: log,
			})
			if err != nil && ctx.Err() == nil {
				log.Warn("mdns stopped", "error", err)
			}
		}()
	}
	return node, nil
}

// askJoin asks the node named by --ask-join (or the one inviting node
// mDNS finds) to let this node in, and waits for its owner.
func askJoin(ctx context.Context, c clusterConfig, dir, name string, log *slog.Logger) (*cluster.JoinResult, error) {
	addr := c.askJoin
	if addr == "auto" {
		log.Info("looking for a cluster to join on mDNS", "service", cluster.MDNSService, "for", askBrowse)
		found, err := cluster.FindInviters(ctx, c.advertiseIface, askBrowse)
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
		addr = net.JoinHostPort(strings.Trim(addr, "[]"), strconv.Itoa(defaultClusterPort))
	}
	if name == "" {
		name = hostName()
	}
	return cluster.AskJoin(ctx, cluster.AskConfig{Dir: dir, Name: name, Addr: addr, OnCode: func(code, inviter string) {
		log.Warn(fmt.Sprintf("waiting for the owner to accept code %s on the console of %s (or hearth cluster accept there)", code, inviter),
			"code", code, "inviter", inviter, "address", addr)
	}})
}

// askBrowse is how long --ask-join auto listens for clusters on mDNS.
const askBrowse = 5 * time.Second

func runningOn(rt *router.Router, name string) int {
	for _, w := range rt.Workers() {
		if w.Info.Name == name {
			return w.ActiveRequests
		}
	}
	return 0
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

// runCluster is hearth cluster token|status|revoke|leave.
func runCluster(ctx context.Context, env *environment, args []string) error {
	usage := "cluster token [--data-dir DIR] [--node NAME] [--advertise HOST:PORT,…] | status [--addr URL] | revoke NODE_ID [--addr URL] | leave [--addr URL] | requests [--addr URL] | accept ID [--addr URL] | reject ID [--addr URL]"
	if len(args) == 0 {
		fmt.Fprintln(env.stderr, "Usage: hearth "+usage)
		return fmt.Errorf("%w: cluster: no subcommand", errUsage)
	}
	sub, rest := args[0], args[1:]
	var target string // revoke's node id or accept's and reject's request id, before the flags
	if (sub == "revoke" || sub == "accept" || sub == "reject") && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		target, rest = rest[0], rest[1:]
	}
	fs := newFlagSet(env, "cluster "+sub, usage)
	dataDir := fs.String("data-dir", defaultDataDir(env.getenv), "where Hearth keeps its state")
	node := fs.String("node", "", "this node's name (default: the host name)")
	advertise := fs.String("advertise", "", "addresses (host:port of the cluster port, comma-separated) to put in the token (default: every LAN address, port "+strconv.Itoa(defaultClusterPort)+")")
	iface := fs.String("advertise-iface", "", "take the token's addresses from this interface only")
	addr := fs.String("addr", "http://127.0.0.1:8000", "the daemon's address")
	key := fs.String("api-key", "", "API key, when the daemon needs one (also $HEARTH_API_KEY)")
	asJSON := fs.Bool("json", false, "print the daemon's JSON as it is")
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	daemon := daemonFlags{addr: addr, key: key, dataDir: dataDir}
	switch sub {
	case "token":
		dir := clusterDir(*dataDir)
		id, err := cluster.Load(dir)
		if errors.Is(err, cluster.ErrNoCluster) {
			name := *node
			if name == "" {
				name = hostName()
			}
			if id, err = cluster.Create(dir, name); err != nil {
				return err
			}
			fmt.Fprintf(env.stderr, "created cluster %s in %s\n", id.ClusterID(), dir)
		} else if err != nil {
			return err
		}
		var named []string
		if *advertise != "" {
			named = strings.Split(*advertise, ",")
		}
		addrs := tokenAddrs(named, *iface, defaultClusterPort)
		tok, err := id.Token(addrs)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "Run on another machine: hearth up --join TOKEN (cluster %s; addresses %s)\n", id.ClusterID(), strings.Join(addrs, ", "))
		fmt.Fprintln(env.stdout, tok.String())
		return nil
	case "status":
		list, err := askDaemon(ctx, env, daemon, (*adminapi.Client).Nodes)
		if *asJSON && list.Raw != nil {
			return printAsItCame(env.stdout, list.Raw)
		}
		if err != nil {
			return err
		}
		if list.Cluster == "" {
			fmt.Fprintln(env.stdout, "this node belongs to no cluster")
			return nil
		}
		fmt.Fprintf(env.stdout, "cluster %s\n", list.Cluster)
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tADDRESS\tSTATE\tGPUS\tENGINES\tLAST SEEN")
		for _, n := range list.Nodes {
			seen := "-"
			if n.LastSeen != nil {
				seen = time.Since(*n.LastSeen).Round(100*time.Millisecond).String() + " ago"
			}
			names := make([]string, len(n.Engines))
			for i, e := range n.Engines {
				names[i] = e.Name
			}
			id := n.ID
			if n.Self {
				id += " (this)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", id, n.Name, n.Address, n.State, len(n.GPUs), strings.Join(names, ","), seen)
		}
		return tw.Flush()
	case "revoke":
		if target == "" {
			return fmt.Errorf("%w: hearth cluster revoke NODE_ID [--addr URL]", errUsage)
		}
		o, err := askDaemon(ctx, env, daemon, func(c *adminapi.Client, ctx context.Context) (adminapi.Outcome, error) {
			return c.Revoke(ctx, target)
		})
		return printOutcome(env.stdout, o, err)
	case "leave":
		o, err := askDaemon(ctx, env, daemon, (*adminapi.Client).Leave)
		return printOutcome(env.stdout, o, err)
	case "requests":
		list, err := askDaemon(ctx, env, daemon, (*adminapi.Client).JoinRequests)
		if *asJSON && list.Raw != nil {
			return printAsItCame(env.stdout, list.Raw)
		}
		if err != nil {
			return err
		}
		switch {
		case list.Cluster == "":
			fmt.Fprintln(env.stdout, "this node belongs to no cluster")
			return nil
		case !list.CanInvite:
			fmt.Fprintf(env.stdout, "this node does not hold the CA key of cluster %s: join requests go to the node that created it\n", list.Cluster)
			return nil
		case len(list.Requests) == 0:
			fmt.Fprintln(env.stdout, "no join request is waiting")
			return nil
		}
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tADDRESS\tCODE\tRECEIVED")
		for _, q := range list.Requests {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s ago\n", q.ID, q.Name, q.Address, q.Code, time.Since(q.Received).Round(time.Second))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(env.stdout, "Accept only a request whose code the joining machine prints too: hearth cluster accept ID")
		return nil
	case "accept", "reject":
		if target == "" {
			return fmt.Errorf("%w: hearth cluster %s ID [--addr URL] (the ids: hearth cluster requests)", errUsage, sub)
		}
		decide := (*adminapi.Client).Accept
		if sub == "reject" {
			decide = (*adminapi.Client).Reject
		}
		o, err := askDaemon(ctx, env, daemon, func(c *adminapi.Client, ctx context.Context) (adminapi.Outcome, error) {
			return decide(c, ctx, target)
		})
		return printOutcome(env.stdout, o, err)
	}
	return fmt.Errorf("%w: cluster: unknown subcommand %q", errUsage, sub)
}

// tokenAddrs are the cluster-port addresses a join token carries: those
// named, else every LAN address (of iface, when named) on port. hearth
// cluster token and the console's Cluster page both invite with it.
func tokenAddrs(named []string, iface string, port int) []string {
	if len(named) > 0 {
		return named
	}
	var addrs []string
	for _, ip := range cluster.LANAddrs(iface) {
		addrs = append(addrs, net.JoinHostPort(ip.String(), strconv.Itoa(port)))
	}
	return addrs
}

func hostName() string {
	h, _ := os.Hostname()
	return h
}
