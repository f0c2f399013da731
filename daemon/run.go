package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/api/store"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/cluster"
	"github.com/hearth-llm/hearth/console"
	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/router/ingest"
	"github.com/hearth-llm/hearth/router/osl"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
	"github.com/hearth-llm/hearth/tlsca"
	"github.com/hearth-llm/hearth/tokenizer"
)

// Run runs the whole daemon on ln until ctx ends: the engines under
// their supervisor, the router following their KV events, the gateway and
// the console. It builds in stages (GPUs and plan, state, routing,
// cluster, engines, API), each taking what the stages before it made;
// what a stage opened is released by one cleanup stack, whichever stage
// fails, and what runs until ctx ends runs in one errgroup.
func Run(ctx context.Context, cfg Config, ln net.Listener, stdout io.Writer, log *slog.Logger, opts ...Option) (err error) {
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	var cleanup cleanupStack
	defer cleanup.run()
	cleanup.push(func() { ln.Close() }) // the gateway closes it too; a second close is harmless

	hw, err := planStage(ctx, &cfg, &cleanup, log)
	if err != nil {
		return err
	}
	cfg.cudaVersion = hw.cudaVersion
	if err := cfg.Data().prepare(); err != nil {
		return fmt.Errorf("up: data dir: %w", err)
	}
	if err := writeServedLayout(cfg.Data(), hw.layout); err != nil {
		return err
	}
	log.Info(fmt.Sprintf("starting: %d engines loading…", len(hw.specs)), "sim", cfg.Sim, "engine", cfg.Engine, "engine_runtime", cfg.EngineRuntime, "engines", len(hw.specs),
		"listen", ln.Addr().String(), "policy", cfg.Policy, "model", cfg.Model, "data_dir", cfg.DataDir,
		"api_keys", len(cfg.APIKeys), "speedup", cfg.Speedup)
	st, err := openState(ctx, cfg, ln.Addr(), &cleanup, log)
	if err != nil {
		return err
	}
	kvStore, err := openKVStore(cfg.KVStoreDir, cfg.KVStoreGiB, hw.specs, &cleanup, log)
	if err != nil {
		return err
	}
	rs, err := newRouting(cfg, hw.specs, st.settings.Policy(), kvStore, log)
	if err != nil {
		return err
	}
	node, err := startClusterNode(ctx, cfg, rs.router, hw.gpus, log.With("component", "cluster"))
	if err != nil {
		return err
	}
	if node != nil {
		cleanup.push(node.Close)
		rs.fleet.cluster = node
	}
	eng, err := startEngines(ctx, cfg, hw, rs, kvStore, node, &cleanup, log)
	if err != nil {
		return err
	}
	front, err := newFront(cfg, ln.Addr().String(), hw, st, rs, eng, kvStore, node, &cleanup, log)
	if err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return eng.sup.Run(ctx) })
	g.Go(func() error { return eng.sampler.Run(ctx) })
	g.Go(func() error { return eng.residency.Run(ctx) })
	if kvStore != nil {
		g.Go(func() error { return kvStore.Run(ctx) })
	}
	g.Go(func() error {
		return st.db.RunRetention(ctx, cfg.ResponseRetention, clock.Real{}, log.With("component", "store"))
	})
	g.Go(func() error { return front.gateway.Serve(ctx, ln) })
	g.Go(func() error { return front.console.Run(ctx) })
	if w := newWaker(cfg.Cluster, rs.router.QueueLen, nil, log.With("component", "wake")); w != nil {
		g.Go(func() error { return w.Run(ctx) })
	}
	log.Info(fmt.Sprintf("serving on %s; waiting for engines", st.baseURL), "engines", len(hw.specs))
	g.Go(func() error { printWhenSettled(ctx, stdout, cfg.Models, st, eng, front, log); return nil })
	err = g.Wait()
	log.Info("stopped")
	return err
}

// hardware is what the first stage found: where the GPUs are read, the
// first reading's error, the GPUs served from, the engines planned on
// them (with notes on why an engine got less than its GPUs could give)
// and the driver's CUDA version for engine images.
type hardware struct {
	source      nodes.Discoverer
	discoverErr error
	gpus        []nodes.GPU
	specs       []hruntime.Spec
	planNotes   map[string]string
	cudaVersion int
	// layout is the layout served and why.
	layout ServedLayout
}

// planStage reads the GPUs, sets cfg's layout for them (chooseLayout) and
// plans which engines run where. The sampler reads the GPUs from the same
// source later on.
func planStage(ctx context.Context, cfg *Config, cleanup *cleanupStack, log *slog.Logger) (hardware, error) {
	var hw hardware
	var err error
	if hw.source, err = gpuSourceOf(*cfg); err != nil {
		return hw, err
	}
	if c, ok := hw.source.(io.Closer); ok {
		cleanup.push(func() { c.Close() })
	}
	inv, discoverErr := hw.source.Discover(ctx)
	hw.discoverErr = discoverErr
	if hw.gpus, err = selectGPUs(*cfg, inv, discoverErr, log); err != nil {
		return hw, err
	}
	if cfg.EngineRuntime == RuntimeDocker && cfg.Sim == "" {
		hw.gpus = withoutOwnEngines(ctx, cfg.Node, hw.gpus, log)
	}
	layout, err := chooseLayout(cfg, hw.gpus)
	if err != nil {
		return hw, err
	}
	if hw.specs, hw.planNotes, err = planEngines(*cfg, hw.gpus); err != nil {
		return hw, err
	}
	logSharePlans(log, *cfg, hw.gpus)
	hw.layout = layout.withContext(hw.specs[0].Estimate.MaxModelLen, contextShortfall(hw.specs))
	log.Info(hw.layout.Line())
	if hw.layout.Shortfall != "" {
		log.Warn(hw.layout.Shortfall)
	}
	if cfg.EngineRuntime == RuntimeDocker {
		hw.cudaVersion = inv.Host.CUDADriverVersion
	}
	return hw, nil
}

// state is what outlives the daemon and how it is served: the database,
// the API's TLS (and Hearth's own CA, for --tls auto), the served models
// and the console's settings over them, and the base URL clients use.
type state struct {
	db       *store.SQLite
	tls      *tls.Config
	ca       *tlsca.Authority
	models   *api.Models
	settings *settingsStore
	baseURL  string
}

// openState opens the database and checks the exposure against the keys
// it holds, makes the TLS configuration, and loads the settings. Precedence
// of the routing policy and the model aliases: what was last saved on the
// console's Settings page, when anything was; otherwise --policy and
// --alias. Saved settings that do not fit the served model are skipped
// with a warning.
func openState(ctx context.Context, cfg Config, addr net.Addr, cleanup *cleanupStack, log *slog.Logger) (state, error) {
	var st state
	db, err := store.Open(ctx, cfg.Data().Database())
	if err != nil {
		return st, fmt.Errorf("up: %w", err)
	}
	cleanup.push(func() { db.Close() })
	st.db = db
	storedKeys, err := db.HasKeys(ctx)
	if err != nil {
		return st, fmt.Errorf("up: %w", err)
	}
	if err := checkExposureKeys(cfg, addr, storedKeys); err != nil {
		return st, err
	}
	if st.tls, st.ca, err = serverTLS(cfg, addr, time.Now()); err != nil {
		return st, err
	}
	if st.ca != nil {
		log.Info("TLS with Hearth's own CA", "ca", st.ca.CertPath(), "sha256", st.ca.Fingerprint())
	}
	st.baseURL = cfg.Scheme() + "://" + advertisedAddr(addr)
	if st.models, err = api.NewModels(cfg.Models, nil); err != nil {
		return st, fmt.Errorf("up: %w", err)
	}
	if st.settings, err = newSettingsStore(ctx, db, log, cfg.Policy, cfg.Models, cfg.Aliases, st.models); err != nil {
		return st, fmt.Errorf("up: %w", err)
	}
	return st, nil
}

// openKVStore opens the node's SSD KV store in dir with a capacity of gib
// GiB (0: its default), on the engines' node (the GPUs'; simulated GPUs
// are on node "sim"); nil without a dir.
func openKVStore(dir string, gib float64, specs []hruntime.Spec, cleanup *cleanupStack, log *slog.Logger) (*kvbm.NodeStore, error) {
	if dir == "" {
		return nil, nil
	}
	st, err := kvbm.OpenNodeStore(specs[0].GPU.Node, dir, int64(gib*(1<<30)), log.With("component", "kvstore"))
	if err != nil {
		return nil, fmt.Errorf("up: %w", err)
	}
	cleanup.push(func() { st.Close() })
	return st, nil
}

// routing is the router and what feeds it: the served model's tokenizer
// (the one its engines load), the metrics registry, and the fleet that
// puts ready engines into the router.
type routing struct {
	tok      *tokenizer.Model
	registry *prometheus.Registry
	router   *router.Router
	fleet    *fleet
}

// newRouting builds the router with the policy in force, and ties the node
// store (nil: none) to it: the store's eviction weighs the priority of the
// requests that covered a block, which only the router sees, and its
// evictions leave the router's index.
func newRouting(cfg Config, specs []hruntime.Spec, policy string, kvStore *kvbm.NodeStore, log *slog.Logger) (routing, error) {
	var rs routing
	var err error
	if rs.tok, _, err = specTokenizers(cfg, specs); err != nil {
		return rs, err
	}
	rs.registry = prometheus.NewRegistry()
	metrics, err := router.NewMetrics(rs.registry)
	if err != nil {
		return rs, fmt.Errorf("up: %w", err)
	}
	rcfg := router.Config{Policy: policy, Seed: cfg.Seed}
	if kvStore != nil {
		rcfg.BlockPriorities = nodeStoreBlockPriorities
	}
	if rs.router, err = router.New(rcfg, router.WithLogger(log.With("component", "router")), router.WithMetrics(metrics)); err != nil {
		return rs, fmt.Errorf("up: %w", err)
	}
	rs.fleet = newFleet(rs.router, log.With("component", "fleet"))
	if kvStore != nil {
		if err := rs.registry.Register(kvStore.Store); err != nil {
			return rs, fmt.Errorf("up: %w", err)
		}
		rs.fleet.storeReadBytesPerSec = catalog.DefaultDiskGBps * 1e9
		rs.fleet.store = kvStore
		kvStore.TellEvictions(nodeStoreEvictions(rs.router, specs))
		kvStore.WeighPriorities(newNodeStorePriorities(rs.router, specs))
	}
	if err := rs.registry.Register(ingest.NewCollector(rs.fleet.ingestStats, rs.fleet.workerName)); err != nil {
		return rs, fmt.Errorf("up: %w", err)
	}
	return rs, nil
}

// engines is the engines under their supervisor, the GPU sampler that
// watches their GPUs, and their statuses as the console and the admin
// API show them (an engine whose image is being pulled shows the pull as
// its phase).
type engines struct {
	sup      *hruntime.Supervisor
	sampler  *nodes.Sampler
	statuses func() []hruntime.Status
	drain    *drainer
	// residency holds the models served on demand (no manager when every
	// model has GPUs of its own).
	residency *residency
}

// startEngines builds the engines' launcher and their supervisor, with
// the fleet as what attaches ready engines, and the sampler: a GPU lost
// stops its engines, and its return starts them again; memory another
// program takes of a GPU drains the node (node nil: no cluster to tell).
func startEngines(ctx context.Context, cfg Config, hw hardware, rs routing, kvStore *kvbm.NodeStore, node *cluster.Node, cleanup *cleanupStack, log *slog.Logger) (engines, error) {
	var eng engines
	pulls := newPullBoard(cfg.ProgressOut, log)
	launcher, closeLauncher, err := newLauncher(ctx, cfg, rs.tok, kvStore, pulls.set, log)
	if err != nil {
		return eng, err
	}
	cleanup.push(closeLauncher)
	if d, ok := launcher.(*docker.Launcher); ok {
		if err := d.RemoveStale(ctx, hw.specs); err != nil {
			return eng, fmt.Errorf("up: %w", err)
		}
	}
	supervised := make([]hruntime.Supervised, len(hw.specs))
	for i, spec := range hw.specs {
		supervised[i] = hruntime.Supervised{Spec: spec, Launcher: launcher}
	}
	eng.sup, err = hruntime.NewSupervisor(hruntime.SupervisorConfig{
		Engines: supervised, Attacher: rs.fleet, StopTimeout: cfg.StopTimeout, Backoff: cfg.backoff, KeepEngines: cfg.KeepEngines,
		KVCheckWait: cfg.kvCheckWait,
		Tokenizer:   func(hruntime.Spec) hruntime.ChatTokenizer { return rs.tok },
		KVEventTap: func(ctx context.Context, endpoint, topic string) (hruntime.KVEventStream, error) {
			return ingest.DialTap(ctx, endpoint, topic)
		},
		Logger: log.With("component", "supervisor"),
	})
	if err != nil {
		return eng, fmt.Errorf("up: %w", err)
	}
	watch := gpuWatch{specs: hw.specs, sup: eng.sup, stayHeld: func(name string) bool { return eng.residency.stayHeld(name) }}
	var peers drainPeers
	if node != nil { // a nil *cluster.Node in the interface would not read as nil
		peers = node
	}
	policy := DefaultGPUTakenPolicy
	if cfg.gpuTaken != nil {
		policy = *cfg.gpuTaken
	}
	identities := engineIdentities(eng.sup)
	eng.drain = newDrainer(rs.fleet, peers, hw.specs, hw.gpus, func() []hruntime.Identity { return identities(ctx) }, policy, nil, log.With("component", "drain"))
	eng.sampler = nodes.NewSampler(nodes.SamplerConfig{
		Source: hw.source, Interval: cfg.gpuInterval, Logger: log.With("component", "gpus"), OnLost: watch.lost, OnFound: watch.found,
		OnReading: eng.drain.observe,
	})
	if _, err := eng.sampler.Sample(ctx); err != nil && hw.discoverErr == nil {
		log.Warn("reading the GPUs", "err", err)
	}
	if err := rs.registry.Register(eng.sampler); err != nil {
		return eng, fmt.Errorf("up: %w", err)
	}
	if eng.residency, err = newResidency(cfg, hw.gpus, hw.specs, eng.sup, eng.sampler, log); err != nil {
		return eng, err
	}
	eng.statuses = func() []hruntime.Status { return eng.residency.annotate(pulls.annotate(eng.sup.Engines())) }
	return eng, nil
}

// front is what clients talk to: the gateway, with the console and the
// admin API mounted on it, and the context length it serves.
type front struct {
	gateway       *api.Gateway
	console       *console.Console
	contextTokens int
}

// newFront builds the console and the gateway. The console reads the
// engines, the router and the gateway's traffic through adapters; the
// keys it creates, kept in the database, open the API too, next to the
// command line's.
func newFront(cfg Config, addr string, hw hardware, st state, rs routing, eng engines, kvStore *kvbm.NodeStore, node *cluster.Node,
	cleanup *cleanupStack, log *slog.Logger) (front, error) {
	f := front{contextTokens: hw.specs[0].Estimate.MaxModelLen}
	traffic := api.NewTraffic(api.TrafficLimits{})
	keys := &keyStore{db: st.db, static: cfg.APIKeys}
	keyless := &keylessClients{}
	health, closeHealth := newHealthSource(cfg, latestGPUs{eng.sampler}, engineIdentities(eng.sup), eng.statuses, addr)
	cleanup.push(closeHealth)
	deps := console.Deps{
		Engines:     engineSource{engines: eng.statuses, logs: eng.sup.Logs, rt: rs.router, gpus: eng.sampler, planNotes: hw.planNotes, fractions: sharedFractions(eng.residency, hw.specs), client: hruntime.NewProbeClient()},
		Router:      routerSource{rt: rs.router},
		Traffic:     &trafficSource{traffic: traffic, decode: rs.tok.Decode},
		Keys:        keys,
		Settings:    st.settings,
		Health:      health,
		KeyRequired: apiKeys{keys}.required,
		Keyless:     keyless,
		Owner:       st.db,
		Logger:      log,
		Clock:       cfg.consoleClock,
	}
	if len(eng.residency.managers) > 0 {
		deps.Models = eng.residency
	}
	if kvStore != nil {
		deps.KVStores = kvStores{kvStore}
	}
	// The hearth command on this machine proves its state-changing
	// requests with a token only this user can read (docs/security.md).
	var err error
	if deps.LocalToken, err = adminapi.WriteLocalToken(cfg.Data().LocalToken()); err != nil {
		return f, fmt.Errorf("up: %w", err)
	}
	if err := writeLocalAddr(cfg.Data(), cfg.localBaseURL(addr)); err != nil {
		return f, fmt.Errorf("up: %w", err)
	}
	if node != nil {
		deps.Cluster = newClusterConsole(node, cfg.Cluster)
	}
	if f.console, err = console.New(console.Config{
		Model: cfg.Model, ContextTokens: f.contextTokens, Layout: hw.layout.Name, LayoutReason: hw.layout.Reason, Interval: cfg.consoleInterval, ChartWindow: cfg.consoleChartWindow,
		SecureCookie: cfg.ServesTLS(),
	}, deps); err != nil {
		return f, fmt.Errorf("up: %w", err)
	}
	admin := AdminSources(eng.statuses, eng.sup, traffic, rs.tok.Decode, node, cfg.Data().Cluster())
	admin.Drain = eng.drain
	if len(eng.residency.managers) > 0 {
		admin.Models = eng.residency
	}
	routes := &gatewayRouter{rt: rs.router, defaultPolicy: st.settings.Policy, whyNoWorker: eng.sup.Summary}
	var onDemand api.Residency // nil unless models are served on demand
	if len(eng.residency.managers) > 0 {
		routes.residency, onDemand = eng.residency, eng.residency
	}
	f.gateway, err = api.New(api.Config{
		Addr: addr, Models: cfg.Models, ContextTokens: f.contextTokens,
		TLS:             st.tls, // above the gateway's connection cap
		NoInferredHints: cfg.NoInferredHints, EnginePriority: enginePriority(hw.specs), KeepAliveInterval: cfg.keepAliveInterval,
		HotPrefixes: loadHotPrefixes(cfg.Data().HotPrefixes(), log.With("component", "hot-prefixes")),
	}, api.Deps{
		Router: routes, Tokenizer: rs.tok, Store: st.db, Registry: rs.registry, Logger: log,
		Keys: apiKeys{keys}, Models: st.models, Traffic: traffic, Residency: onDemand,
		OutputLengths: osl.New(osl.Config{}, clock.Real{}),
		Mount: func(r fiber.Router) {
			f.console.Register(r)
			adminapi.Mount(r, f.console.Guard, admin)
			if cfg.Profile {
				adminapi.MountProfiler(r, f.console.RequireAdminCredential)
			}
			// A browser opening the API's address lands on the console;
			// HEAD / (Claude Code's probe) keeps the gateway's answer.
			r.Add(fiber.MethodGet, "/", func(c *fiber.Ctx) error { return c.Redirect("/console/") })
		},
	})
	if err != nil {
		return f, fmt.Errorf("up: %w", err)
	}
	keyless.gw = f.gateway
	rs.fleet.setWarm(f.gateway.WarmEngine)
	return f, nil
}

// printWhenSettled prints the clients' settings once the engines are
// ready (or have failed), and the models served on demand that start
// loaded are in, so that a client that follows them at once
// finds them serving, with the CA to trust and the console's setup token
// before them. Keys created in the console last across restarts: it asks
// the gateway, not the command line, whether one is needed.
func printWhenSettled(ctx context.Context, stdout io.Writer, models []string, st state, eng engines, f front, log *slog.Logger) {
	for _, settled := range []<-chan struct{}{eng.sup.Settled(), eng.residency.preloaded(ctx)} {
		select {
		case <-settled:
		case <-ctx.Done():
			return
		}
	}
	log.Info("engines settled", "engines", eng.sup.Summary(""))
	if st.ca != nil {
		printTrust(stdout, st.ca)
	}
	if token := f.console.SetupToken(); token != "" {
		printSetupToken(stdout, st.baseURL, token)
	}
	printConnectSettings(stdout, st.baseURL, models, f.contextTokens, f.gateway.KeyRequired(ctx))
}

// cleanupStack runs what was pushed in reverse order.
type cleanupStack []func()

func (s *cleanupStack) push(f func()) { *s = append(*s, f) }

func (s *cleanupStack) run() {
	for i := len(*s) - 1; i >= 0; i-- {
		(*s)[i]()
	}
	*s = nil
}

// enginePriority is how the engines of specs take a request's priority
// (api.Config.EnginePriority): their kind's convention when all share one,
// else 0 (none sent).
func enginePriority(specs []hruntime.Spec) int {
	sign := 0
	for i, s := range specs {
		k, ok := hruntime.Lookup(s.Engine)
		if !ok {
			return 0
		}
		if i > 0 && k.Priority.Sign() != sign {
			return 0
		}
		sign = k.Priority.Sign()
	}
	return sign
}
