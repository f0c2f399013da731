package cluster

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/netguard"
	"github.com/hearth-llm/hearth/router"
)

// Heartbeat is what a node publishes every HeartbeatEvery: who it is,
// where its peers reach it, its GPUs and engines, and the revocation list
// as it knows it (so that a node that missed a revocation learns it).
type Heartbeat struct {
	NodeID  string       `json:"node_id"`
	Name    string       `json:"name"`
	Serial  string       `json:"serial"`
	Proxy   string       `json:"proxy"` // host:port of the cluster port
	Route   string       `json:"route"` // NATS route URL
	API     string       `json:"api,omitempty"`
	Version string       `json:"version,omitempty"`
	GPUs    []GPUInfo    `json:"gpus"`
	Engines []EngineInfo `json:"engines"`
	// EngineGen numbers the latest change of Engines (see EngineEvent).
	EngineGen uint64    `json:"engine_gen,omitempty"`
	Revoked   []Revoked `json:"revoked,omitempty"`
	// Drained, when not empty, says why the node takes no new requests
	// (Node.SetDrained): its engines stay in its peers' routers, drained.
	Drained string `json:"drained,omitempty"`
	// Queued is how many requests the node's router holds waiting for KV
	// room: every worker of their model was full when they came.
	Queued int `json:"queued,omitempty"`
}

// GPUInfo is one GPU of a node's inventory.
type GPUInfo struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	MemoryMiB int    `json:"memory_mib"`
}

// EngineInfo is one engine in service on a node, with what a router needs
// to make it a worker. Incarnation changes when the engine restarts; it
// also names the engine's KV-event subject.
type EngineInfo struct {
	Name        string `json:"name"`
	Model       string `json:"model"`
	Incarnation string `json:"incarnation"`
	// URL is the engine's OpenAI API root as peers reach it: through the
	// owning node's proxy, mutual TLS required.
	URL                 string  `json:"url"`
	CapacityBlocks      int     `json:"capacity_blocks"`
	RAMCapacityBlocks   int     `json:"ram_capacity_blocks,omitempty"`
	BlockBytes          int     `json:"block_bytes,omitempty"`
	PrefillTokensPerSec float64 `json:"prefill_tokens_per_sec,omitempty"`
	LoadBytesPerSec     float64 `json:"load_bytes_per_sec,omitempty"`
	Approximate         bool    `json:"approximate,omitempty"`
	// EventFormat names the layout of the engine's KV-event payloads
	// (kvevents.ParseFormat); empty from nodes that predate it: vLLM's.
	EventFormat string `json:"event_format,omitempty"`
	Running     int    `json:"running"` // requests the owner's router has on it
	// Full says the owner's router finds the engine's KV cache full: the
	// blocks its requests hold reach the router's saturation share.
	Full bool `json:"full,omitempty"`
	// State is EngineReady, EngineRestarting or EngineStopped; only a
	// ready engine is routable.
	State string `json:"state,omitempty"`
}

// Workers is where remote engines become routable: the router.
type Workers interface {
	AddWorker(router.WorkerInfo) (router.WorkerID, error)
	RemoveWorker(router.WorkerID)
	// SetDrained keeps a drained node's engines out of new requests
	// while other workers can take them.
	SetDrained(id router.WorkerID, drained bool) bool
	Index() *router.Index
}

// Config configures a Node.
type Config struct {
	Identity *Identity
	Name     string // this node's name (hearth up --node)
	// ClusterListen is the address of the cluster port (joins and the
	// engine proxy); RouteListen that of the NATS routes.
	ClusterListen, RouteListen string
	// AdvertiseHost is the address peers dial; default: the listen host,
	// or the first LAN address when that is unspecified.
	AdvertiseHost string
	// Routes are NATS route URLs to start from (from a join or mDNS).
	Routes  []string
	APIAddr string
	Version string
	// MaxConns caps the cluster port's open connections; more clients
	// wait to be accepted. Default an eighth of the process's file
	// descriptor limit, at most 1024.
	MaxConns int
	// IdleTimeout closes kept connections of the cluster port and the
	// peers' engine proxies that carry no request for this long; 0 =
	// netguard.IdleTimeout. A client that sends no headers within
	// netguard.HeaderTimeout of connecting is closed too.
	IdleTimeout time.Duration
	// Workers receives the cluster's remote engines; nil keeps them out.
	Workers Workers
	// GPUs reports this node's GPUs for the heartbeat; nil: none.
	GPUs func() []GPUInfo
	// Running reports how many requests the local router has on a worker
	// (by name) and whether its KV cache is full; nil: zero, not full.
	Running func(name string) (running int, full bool)
	// Queued reports how many requests the local router holds waiting for
	// KV room; nil: none.
	Queued func() int
	// Load is the local router for load sharing: its own load on every
	// worker goes to the peers (hearth.<cluster>.load) and theirs comes
	// back into it; nil shares none.
	Load LoadSharing
	// OnSelfRevoked is called once, on a goroutine of its own, when this
	// node learns that its own certificate was revoked.
	OnSelfRevoked func(*Node)
	Clock         clock.Clock
	Logger        *slog.Logger
}

// Node is one node's part of the cluster plane.
type Node struct {
	cfg     Config
	id      *Identity
	pool    *x509.CertPool
	revoked *revocations
	members *membership
	clock   clock.Clock
	log     *slog.Logger

	ns          *server.Server
	routesMu    sync.Mutex
	natsOpts    *server.Options
	nc          *nats.Conn
	clusterLn   net.Listener
	clusterSrv  *http.Server
	proxyAddr   string
	routeURL    string
	subjectBase string

	// engineTransport carries the proxy's requests to local engines.
	engineTransport *http.Transport

	reconcileMu sync.Mutex
	mu          sync.Mutex
	local       map[string]*localEngine  // by incarnation
	remote      map[string]*remoteEngine // by incarnation
	selfGone    bool
	engineGen   uint64 // the latest change of local engines (EngineEvent.Gen)
	drained     string // why this node is drained; "" while it serves

	asks asks // join requests waiting for the owner (ask.go)

	// kvTrace, when set (by the propagation benchmark), is told when a KV
	// event batch passes each stage of its way; see kvStage.
	kvTrace atomic.Pointer[func(kvStage, uint64)]

	stopOnce sync.Once
	stop     chan struct{}
	wg       sync.WaitGroup

	// handlers counts the NATS handlers running (handler), so that Close
	// returns only once none of them still writes the cluster directory:
	// closing the NATS connection does not wait for its callbacks.
	handlersMu     sync.Mutex
	handlersClosed bool
	handlers       sync.WaitGroup
}

// handler runs f for each message until Close, which waits for the
// calls in progress.
func (n *Node) handler(f nats.MsgHandler) nats.MsgHandler {
	return func(m *nats.Msg) {
		n.handlersMu.Lock()
		if n.handlersClosed {
			n.handlersMu.Unlock()
			return
		}
		n.handlers.Add(1)
		n.handlersMu.Unlock()
		defer n.handlers.Done()
		f(m)
	}
}

// New starts a node's cluster plane: the cluster port, the embedded NATS
// server routed to cfg.Routes, and the heartbeat and judging loops. Close
// stops it.
func New(cfg Config) (*Node, error) {
	if cfg.Identity == nil {
		return nil, errors.New("cluster: no identity")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	id := cfg.Identity
	rev, err := loadRevocations(id.Dir)
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg: cfg, id: id, pool: id.Pool(), revoked: rev, members: newMembership(),
		clock: clock.Or(cfg.Clock), log: cfg.Logger.With("component", "cluster"),
		local: map[string]*localEngine{}, remote: map[string]*remoteEngine{},
		stop: make(chan struct{}), subjectBase: "hearth." + id.ClusterID(),
		// A fresh loopback connection per proxied request: a kept one the
		// engine closes as it is taken fails the request, and the transport
		// cannot send it again (its body streams in from the peer). A
		// loopback connect costs far less than a turn.
		engineTransport: &http.Transport{DisableKeepAlives: true},
	}
	if rev.serialRevoked(id.Serial()) {
		return nil, fmt.Errorf("cluster: this node's certificate (serial %s) was revoked; remove %s and join again", id.Serial(), id.Dir)
	}
	if err := n.startClusterPort(); err != nil {
		return nil, err
	}
	if err := n.startNATS(); err != nil {
		n.clusterSrv.Close()
		return nil, err
	}
	if _, err := n.nc.Subscribe(n.subjectBase+".hb", n.handler(n.onHeartbeat)); err != nil {
		n.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if _, err := n.nc.Subscribe(n.subjectBase+".revoke", n.handler(n.onRevoke)); err != nil {
		n.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if _, err := n.nc.Subscribe(n.subjectBase+".engine", n.handler(n.onEngine)); err != nil {
		n.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if _, err := n.nc.Subscribe(n.subjectBase+".load", n.handler(n.onLoad)); err != nil {
		n.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n.wg.Add(1)
	go n.loop()
	n.publishHeartbeat()
	return n, nil
}

func (n *Node) advertise(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", err
	}
	if n.cfg.AdvertiseHost != "" {
		host = n.cfg.AdvertiseHost
	} else if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if addrs := LANAddrs(""); len(addrs) > 0 {
			host = addrs[0].String()
		}
	}
	return net.JoinHostPort(host, port), nil
}

func (n *Node) startClusterPort() error {
	ln, err := net.Listen("tcp", n.cfg.ClusterListen)
	if err != nil {
		return fmt.Errorf("cluster: cluster port: %w", err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	host, _, _ := net.SplitHostPort(n.cfg.ClusterListen)
	n.proxyAddr, err = n.advertise(net.JoinHostPort(host, port))
	if err != nil {
		ln.Close()
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc(joinPath, n.joinHandler)
	mux.HandleFunc("POST "+askPath, n.askHandler)
	mux.HandleFunc("POST "+askPath+"/{id}", n.waitHandler)
	mux.HandleFunc("/engine/", n.proxyHandler)
	n.clusterSrv = netguard.Server(&http.Server{Handler: netguard.BodyDeadline(mux, netguard.BodyTimeout), TLSConfig: n.clusterPortTLS(),
		IdleTimeout: n.cfg.IdleTimeout, ErrorLog: slog.NewLogLogger(n.log.Handler(), slog.LevelDebug)})
	maxConns := n.cfg.MaxConns
	if maxConns <= 0 {
		maxConns = netguard.MaxConns(8, 1024)
	}
	ln = netguard.Listen(ln, netguard.Config{MaxConns: maxConns, Logger: n.log})
	n.clusterLn = ln
	go func() { _ = n.clusterSrv.ServeTLS(ln, "", "") }()
	return nil
}

func (n *Node) startNATS() error {
	host, portStr, err := net.SplitHostPort(n.cfg.RouteListen)
	if err != nil {
		return fmt.Errorf("cluster: route listen: %w", err)
	}
	port, _ := strconv.Atoi(portStr)
	if port == 0 {
		port = -1 // NATS's "any free port"
	}
	var routes []*url.URL
	for _, r := range n.cfg.Routes {
		u, err := url.Parse(r)
		if err != nil {
			return fmt.Errorf("cluster: route %q: %w", r, err)
		}
		routes = append(routes, u)
	}
	opts := &server.Options{
		ServerName: n.id.NodeID(),
		// The client port must listen for NATS to start its routes; it
		// listens on loopback only, behind a random token, and this
		// node's own client connects in-process.
		Host:          "127.0.0.1",
		Port:          -1,
		Authorization: newIncarnation() + newIncarnation(),
		NoSigs:        true,
		NoLog:         os.Getenv("HEARTH_NATS_LOG") == "",
		MaxPayload:    8 << 20,
		Cluster: server.ClusterOpts{
			Name:       "hearth-" + n.id.ClusterID(),
			Host:       host,
			Port:       port,
			TLSConfig:  n.mutualTLS(""),
			TLSTimeout: 5,
		},
		Routes: routes,
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("cluster: nats: %w", err)
	}
	if !opts.NoLog {
		ns.ConfigureLogger()
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return errors.New("cluster: the embedded NATS server did not start")
	}
	addr := ns.ClusterAddr()
	if addr == nil {
		ns.Shutdown()
		return errors.New("cluster: the embedded NATS server has no route listener")
	}
	adv, err := n.advertise(net.JoinHostPort(host, strconv.Itoa(addr.Port)))
	if err != nil {
		ns.Shutdown()
		return err
	}
	n.routeURL = "nats-route://" + adv
	nc, err := nats.Connect("", nats.InProcessServer(ns), nats.Token(opts.Authorization), nats.Name(n.id.NodeID()), nats.MaxReconnects(-1),
		nats.ErrorHandler(func(_ *nats.Conn, s *nats.Subscription, err error) {
			// A slow consumer: a remote engine's batches dropped while
			// its ingester replayed; it replays them too.
			subject := ""
			if s != nil {
				subject = s.Subject
			}
			n.log.Warn("cluster: nats", "subject", subject, "error", err)
		}))
	if err != nil {
		ns.Shutdown()
		return fmt.Errorf("cluster: nats client: %w", err)
	}
	n.ns, n.nc, n.natsOpts = ns, nc, opts
	return nil
}

// AddRoute makes the NATS server route to another node (learned from mDNS
// or a heartbeat); NATS gossip then completes the mesh.
func (n *Node) AddRoute(routeURL string) error {
	u, err := url.Parse(routeURL)
	if err != nil {
		return err
	}
	if routeURL == n.routeURL {
		return nil
	}
	n.routesMu.Lock()
	defer n.routesMu.Unlock()
	for _, r := range n.natsOpts.Routes {
		if r.String() == u.String() {
			return nil
		}
	}
	opts := n.natsOpts.Clone()
	opts.Routes = append(opts.Routes, u)
	if err := n.ns.ReloadOptions(opts); err != nil {
		return fmt.Errorf("cluster: add route %s: %w", routeURL, err)
	}
	n.natsOpts = opts
	return nil
}

// rememberRoute keeps a peer's route URL in the cluster directory, so that
// a restarted node finds its cluster again without mDNS.
func (n *Node) rememberRoute(route string) {
	known := KnownRoutes(n.id.Dir)
	for _, r := range known {
		if r == route {
			return
		}
	}
	known = append(known, route)
	if len(known) > maxKnownRoutes {
		known = known[len(known)-maxKnownRoutes:]
	}
	b, _ := json.Marshal(known)
	_ = writeFile(n.id.Dir, routesFile, b)
}

// maxKnownRoutes bounds the routes remembered (the cluster's 16 nodes,
// with room for changed addresses).
const maxKnownRoutes = 64

// KnownRoutes are the peers' route URLs this node has seen, oldest first.
func KnownRoutes(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, routesFile))
	if err != nil {
		return nil
	}
	var routes []string
	_ = json.Unmarshal(b, &routes)
	return routes
}

// RouteURL is the NATS route URL peers dial to reach this node.
func (n *Node) RouteURL() string { return n.routeURL }

// ProxyAddr is the host:port of this node's cluster port as peers see it.
func (n *Node) ProxyAddr() string { return n.proxyAddr }

// ClusterPort is the address the cluster port listens on.
func (n *Node) ClusterPort() net.Addr { return n.clusterLn.Addr() }

// Identity is the node's cluster identity.
func (n *Node) Identity() *Identity { return n.id }

// NumRoutes is the number of NATS routes this node holds.
func (n *Node) NumRoutes() int { return n.ns.NumRoutes() }

// Close stops the plane: remote engines leave routing, local ones stop
// being relayed, the servers shut down.
func (n *Node) Close() {
	n.stopOnce.Do(func() {
		close(n.stop)
		n.wg.Wait()
		n.mu.Lock()
		remotes := n.remote
		n.remote = map[string]*remoteEngine{}
		locals := n.local
		n.local = map[string]*localEngine{}
		n.mu.Unlock()
		for _, r := range remotes {
			r.close(n)
		}
		for _, l := range locals {
			l.close()
		}
		if n.nc != nil {
			n.nc.Close()
		}
		n.handlersMu.Lock()
		n.handlersClosed = true
		n.handlersMu.Unlock()
		n.handlers.Wait()
		if n.ns != nil {
			n.ns.Shutdown()
			n.ns.WaitForShutdown()
		}
		if n.clusterSrv != nil {
			n.clusterSrv.Close()
		}
	})
}

func (n *Node) loop() {
	defer n.wg.Done()
	hb, stopHB := n.clock.NewTicker(HeartbeatEvery)
	defer stopHB()
	judge, stopJudge := n.clock.NewTicker(HeartbeatEvery / 4)
	defer stopJudge()
	var load <-chan time.Time
	if n.cfg.Load != nil {
		var stopLoad func()
		load, stopLoad = n.clock.NewTicker(LoadEvery)
		defer stopLoad()
	}
	var lastLoad map[string]EngineLoad
	var lastLoadAt time.Time
	for {
		select {
		case <-n.stop:
			return
		case <-hb:
			n.publishHeartbeat()
		case <-judge:
			n.judge()
		case <-load:
			lastLoad = n.publishLoad(lastLoad, &lastLoadAt)
		}
	}
}

// judge moves peers between states by the local age of their last
// heartbeat and takes the engines of those gone down out of routing.
func (n *Node) judge() {
	lost := n.members.judge(n.clock.Now(), n.id.NodeID())
	for _, id := range lost {
		n.log.Warn("cluster: node down, its engines leave routing", "node", id)
	}
	if len(lost) > 0 {
		n.reconcile()
	}
}

func (n *Node) heartbeat() Heartbeat {
	hb := Heartbeat{
		NodeID: n.id.NodeID(), Name: n.cfg.Name, Serial: n.id.Serial(), Proxy: n.proxyAddr, Route: n.routeURL,
		API: n.cfg.APIAddr, Version: n.cfg.Version, Revoked: n.revoked.list(),
	}
	if n.cfg.GPUs != nil {
		hb.GPUs = n.cfg.GPUs()
	}
	if n.cfg.Queued != nil {
		hb.Queued = n.cfg.Queued()
	}
	n.mu.Lock()
	for _, l := range n.local {
		e := l.info
		if n.cfg.Running != nil {
			e.Running, e.Full = n.cfg.Running(e.Name)
		}
		hb.Engines = append(hb.Engines, e)
	}
	hb.EngineGen = n.engineGen
	hb.Drained = n.drained
	n.mu.Unlock()
	sortEngines(hb.Engines)
	return hb
}

func (n *Node) publishHeartbeat() {
	n.mu.Lock()
	gone := n.selfGone
	n.mu.Unlock()
	if gone {
		return
	}
	b, err := json.Marshal(n.heartbeat())
	if err != nil {
		return
	}
	if err := n.nc.Publish(n.subjectBase+".hb", b); err != nil {
		n.log.Debug("cluster: heartbeat", "error", err)
	}
}

func (n *Node) onHeartbeat(m *nats.Msg) {
	var hb Heartbeat
	if err := json.Unmarshal(m.Data, &hb); err != nil || hb.NodeID == "" {
		return
	}
	n.applyRevocations(hb.Revoked)
	if n.revoked.nodeRevoked(hb.NodeID) || (hb.Serial != "" && n.revoked.serialRevoked(hb.Serial)) {
		n.members.revoke(hb.NodeID)
		return
	}
	if n.members.seen(hb, n.clock.Now()) && hb.NodeID != n.id.NodeID() {
		if hb.Route != "" {
			if err := n.AddRoute(hb.Route); err != nil {
				n.log.Debug("cluster: add route", "route", hb.Route, "error", err)
			} else {
				n.rememberRoute(hb.Route)
			}
		}
		n.reconcile()
	}
}

func (n *Node) onRevoke(m *nats.Msg) {
	var list []Revoked
	if err := json.Unmarshal(m.Data, &list); err != nil {
		return
	}
	n.applyRevocations(list)
}

// applyRevocations merges a revocation list into this node's and acts on
// what is new: the nodes leave routing at once; this node, if revoked,
// stops taking part.
func (n *Node) applyRevocations(list []Revoked) {
	added := n.revoked.merge(list)
	if len(added) == 0 {
		return
	}
	self := false
	for _, r := range added {
		n.log.Warn("cluster: node revoked", "node", r.NodeID, "serial", r.Serial)
		n.members.revoke(r.NodeID)
		if r.Serial == n.id.Serial() {
			self = true
		}
	}
	n.reconcile()
	if !self && n.id.CanInvite() {
		// Whoever took the revoked node's token must not join again.
		if err := n.id.RotateSecret(); err != nil {
			n.log.Error("cluster: rotating the join secret after a revocation", "err", err)
		} else {
			n.log.Warn("cluster: join secret rotated: tokens made before the revocation are refused; hearth cluster token prints the new one")
		}
	}
	if self {
		n.mu.Lock()
		first := !n.selfGone
		n.selfGone = true
		n.mu.Unlock()
		if first && n.cfg.OnSelfRevoked != nil {
			go n.cfg.OnSelfRevoked(n)
		}
	}
}

// Revoke revokes a node's certificate (by node id) on every node: its
// serial is refused by new TLS handshakes and by the proxy at once, and its
// engines leave routing.
func (n *Node) Revoke(nodeID string) error {
	m, ok := n.members.get(nodeID)
	if !ok || m.Serial == "" {
		return fmt.Errorf("cluster: no node %q is known", nodeID)
	}
	list := []Revoked{{Serial: m.Serial, NodeID: nodeID}}
	n.applyRevocations(list)
	b, _ := json.Marshal(list)
	if err := n.nc.Publish(n.subjectBase+".revoke", b); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return n.nc.FlushTimeout(5 * time.Second)
}

// Leave revokes this node's own certificate on every node it reaches.
func (n *Node) Leave() error {
	list := []Revoked{{Serial: n.id.Serial(), NodeID: n.id.NodeID()}}
	b, _ := json.Marshal(list)
	if err := n.nc.Publish(n.subjectBase+".revoke", b); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	err := n.nc.FlushTimeout(5 * time.Second)
	n.applyRevocations(list)
	return err
}

// SetDrained drains this node (reason says why, for the peers' and the
// console's view) or, with reason "", returns it to routing. The peers
// hear of it at once: a heartbeat goes out now rather than at the next
// tick. Draining the local router's own workers is the caller's.
func (n *Node) SetDrained(reason string) {
	n.mu.Lock()
	changed := n.drained != reason
	n.drained = reason
	n.mu.Unlock()
	if changed {
		n.publishHeartbeat()
	}
}

// Members lists every node this node has heard of, itself included.
func (n *Node) Members() []Member {
	n.judge()
	return n.members.list()
}

func newIncarnation() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ctxUntilStop is a context that ends when the node stops.
func (n *Node) ctxUntilStop() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-n.stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx, cancel
}
