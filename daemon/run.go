package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/api/store"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/console"
	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/router/ingest"
	"github.com/hearth-llm/hearth/router/osl"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
)

// Run runs the whole daemon on ln until ctx ends: the engines under
// their supervisor, the router following their KV events, the gateway and
// the console. It builds in stages (plan, store, routing, engines, API);
// what a stage opened is released by one cleanup stack, whichever stage
// fails.
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

	// GPUs and plan: which engines run where. The sampler reads the GPUs
	// from here on; the first reading plans the engines.
	gpuSource, err := gpuSourceOf(cfg)
	if err != nil {
		return err
	}
	if c, ok := gpuSource.(io.Closer); ok {
		cleanup.push(func() { c.Close() })
	}
	inv, discoverErr := gpuSource.Discover(ctx)
	gpus, err := selectGPUs(cfg, inv, discoverErr, log)
	if err != nil {
		return err
	}
	if cfg.EngineRuntime == "docker" && cfg.Sim == "" {
		gpus = withoutOwnEngines(ctx, cfg.Node, gpus, log)
	}
	specs, planNotes, err := planEngines(cfg, gpus)
	if err != nil {
		return err
	}
	if short := contextShortfall(specs); short != "" {
		log.Warn(short)
	}
	if cfg.EngineRuntime == "docker" {
		cfg.cudaVersion = inv.Host.CUDADriverVersion
	}
	if err := prepareDataDir(cfg.DataDir); err != nil {
		return fmt.Errorf("up: data dir: %w", err)
	}
	log.Info(fmt.Sprintf("starting: %d engines loading…", len(specs)), "sim", cfg.Sim, "engine", cfg.Engine, "engine_runtime", cfg.EngineRuntime, "engines", len(specs),
		"listen", ln.Addr().String(), "policy", cfg.Policy, "model", cfg.Model, "data_dir", cfg.DataDir,
		"api_keys", len(cfg.APIKeys), "speedup", cfg.Speedup)

	// Store: settings and keys that outlive the daemon. Precedence of the
	// routing policy and the model aliases: what was last saved on the
	// console's Settings page, when anything was; otherwise --policy and
	// --alias. Saved settings that do not fit the served model are skipped
	// with a warning.
	db, err := store.Open(ctx, filepath.Join(cfg.DataDir, "hearth.db"))
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	cleanup.push(func() { db.Close() })
	storedKeys, err := db.HasKeys(ctx)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	if err := checkExposureKeys(cfg, ln.Addr(), storedKeys); err != nil {
		return err
	}
	tlsConfig, ca, err := serverTLS(cfg, ln.Addr(), time.Now())
	if err != nil {
		return err
	}
	if ca != nil {
		log.Info("TLS with Hearth's own CA", "ca", ca.CertPath(), "sha256", ca.Fingerprint())
	}
	baseURL := cfg.Scheme() + "://" + advertisedAddr(ln.Addr())
	models, err := api.NewModels(cfg.Models, nil)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	settings, err := newSettingsStore(ctx, db, log, cfg.Policy, cfg.Models, cfg.Aliases, models)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}

	var kvStore *kvbm.NodeStore
	if cfg.KVStoreDir != "" {
		// The engines' node: the GPUs' (simulated GPUs are on node "sim").
		kvStore, err = kvbm.OpenNodeStore(specs[0].GPU.Node, cfg.KVStoreDir, int64(cfg.KVStoreGiB*(1<<30)), log.With("component", "kvstore"))
		if err != nil {
			return fmt.Errorf("up: %w", err)
		}
		cleanup.push(func() { kvStore.Close() })
	}
	// Routing: requests are hashed with the served model's own tokenizer,
	// the one its engines load.
	tok, _, err := specTokenizers(cfg, specs)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	routerMetrics, err := router.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	rcfg := router.Config{Policy: settings.Policy(), Seed: cfg.Seed}
	if kvStore != nil {
		// The store's eviction weighs the priority of the requests that
		// covered a block, which only the router sees.
		rcfg.BlockPriorities = nodeStoreBlockPriorities
	}
	rt, err := router.New(rcfg,
		router.WithLogger(log.With("component", "router")), router.WithMetrics(routerMetrics))
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	if kvStore != nil {
		if err := reg.Register(kvStore.Store); err != nil {
			return fmt.Errorf("up: %w", err)
		}
	}
	engines := newFleet(rt, log.With("component", "fleet"))
	if kvStore != nil {
		engines.storeReadBytesPerSec = catalog.DefaultDiskGBps * 1e9
		engines.store = kvStore
		kvStore.TellEvictions(nodeStoreEvictions(rt, specs))
		kvStore.WeighPriorities(newNodeStorePriorities(rt, specs))
	}
	if err := reg.Register(ingest.NewCollector(engines.ingestStats, engines.workerName)); err != nil {
		return fmt.Errorf("up: %w", err)
	}

	// Cluster: peers' engines join the router, this node's are offered.
	clusterNode, err := startClusterNode(ctx, cfg, rt, gpus, log.With("component", "cluster"))
	if err != nil {
		return err
	}
	if clusterNode != nil {
		cleanup.push(clusterNode.Close)
		engines.cluster = clusterNode
	}

	// Engines, under one supervisor.
	pulls := newPullBoard(cfg.ProgressOut, log)
	launcher, closeLauncher, err := newLauncher(ctx, cfg, tok, kvStore, pulls.set, log)
	if err != nil {
		return err
	}
	cleanup.push(closeLauncher)
	if d, ok := launcher.(*docker.Launcher); ok {
		if err := d.RemoveStale(ctx, specs); err != nil {
			return fmt.Errorf("up: %w", err)
		}
	}
	supervised := make([]hruntime.Supervised, len(specs))
	for i, spec := range specs {
		supervised[i] = hruntime.Supervised{Spec: spec, Launcher: launcher}
	}
	sup, err := hruntime.NewSupervisor(hruntime.SupervisorConfig{
		Engines: supervised, Attacher: engines, StopTimeout: cfg.StopTimeout, Backoff: cfg.backoff, KeepEngines: cfg.KeepEngines,
		Tokenizer: func(hruntime.Spec) hruntime.ChatTokenizer { return tok },
		Logger:    log.With("component", "supervisor"),
	})
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	// A GPU lost stops its engines, and its return starts them again.
	watch := gpuWatch{specs: specs, sup: sup}
	sampler := nodes.NewSampler(nodes.SamplerConfig{
		Source: gpuSource, Interval: cfg.gpuInterval, Logger: log.With("component", "gpus"), OnLost: watch.lost, OnFound: watch.found,
	})
	if _, err := sampler.Sample(ctx); err != nil && discoverErr == nil {
		log.Warn("reading the GPUs", "err", err)
	}
	if err := reg.Register(sampler); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	contextTokens := specs[0].Estimate.MaxModelLen
	// An engine whose image is being pulled shows the pull as its phase.
	engineStatuses := func() []hruntime.Status { return pulls.annotate(sup.Engines()) }

	// API: the gateway, with the console mounted on it. The console reads
	// the engines, the router and the gateway's traffic through adapters;
	// the keys it creates, kept in the database, open the API too, next to
	// the command line's.
	routes := &gatewayRouter{rt: rt, defaultPolicy: settings.Policy, whyNoWorker: sup.Summary}
	keys := &keyStore{db: db, static: cfg.APIKeys}
	traffic := api.NewTraffic(api.TrafficLimits{})
	keyless := &keylessClients{}
	health, closeHealth := newHealthSource(cfg, latestGPUs{sampler}, engineIdentities(sup), engineStatuses, ln.Addr().String())
	cleanup.push(closeHealth)
	deps := console.Deps{
		Engines:     engineSource{engines: engineStatuses, logs: sup.Logs, rt: rt, gpus: sampler, planNotes: planNotes, client: hruntime.NewProbeClient()},
		Router:      routerSource{rt: rt},
		Traffic:     &trafficSource{traffic: traffic, decode: tok.Decode},
		Keys:        keys,
		Settings:    settings,
		Health:      health,
		KeyRequired: apiKeys{keys}.required,
		Keyless:     keyless,
		Owner:       db,
		Logger:      log,
	}
	if kvStore != nil {
		deps.KVStores = kvStores{kvStore}
	}
	// The hearth command on this machine proves its state-changing
	// requests with a token only this user can read (docs/security.md).
	if cfg.DataDir != "" {
		if deps.LocalToken, err = adminapi.WriteLocalToken(cfg.DataDir); err != nil {
			return fmt.Errorf("up: %w", err)
		}
	}
	if clusterNode != nil {
		deps.Cluster = newClusterConsole(clusterNode, cfg.Cluster)
	}
	con, err := console.New(console.Config{
		Model: cfg.Model, ContextTokens: contextTokens, Interval: cfg.consoleInterval, ChartWindow: cfg.consoleChartWindow,
		SecureCookie: cfg.ServesTLS(),
	}, deps)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	gw, err := api.New(api.Config{
		Addr: ln.Addr().String(), Models: cfg.Models, ContextTokens: contextTokens,
		TLS:             tlsConfig, // above the gateway's connection cap
		NoInferredHints: cfg.NoInferredHints, EnginePriority: enginePriority(specs),
	}, api.Deps{
		Router: routes, Tokenizer: tok, Store: db, Registry: reg, Logger: log,
		Keys: apiKeys{keys}, Models: models, Traffic: traffic,
		OutputLengths: osl.New(osl.Config{}, clock.Real{}),
		Mount: func(r fiber.Router) {
			con.Register(r)
			adminapi.Mount(r, con.Guard, AdminSources(engineStatuses, sup, traffic, tok.Decode, clusterNode, cfg.DataDir))
			if cfg.Profile {
				adminapi.MountProfiler(r, con.Guard)
			}
			// A browser opening the API's address lands on the console;
			// HEAD / (Claude Code's probe) keeps the gateway's answer.
			r.Add(fiber.MethodGet, "/", func(c *fiber.Ctx) error { return c.Redirect("/console/") })
		},
	})
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	keyless.gw = gw

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return sup.Run(ctx) })
	g.Go(func() error { return sampler.Run(ctx) })
	if kvStore != nil {
		g.Go(func() error { return kvStore.Run(ctx) })
	}
	g.Go(func() error {
		return db.RunRetention(ctx, cfg.ResponseRetention, clock.Real{}, log.With("component", "store"))
	})
	g.Go(func() error { return gw.Serve(ctx, ln) })
	g.Go(func() error { return con.Run(ctx) })
	log.Info(fmt.Sprintf("serving on %s; waiting for engines", baseURL), "engines", len(specs))
	// The settings are printed once the engines are ready (or have failed):
	// a client that follows them at once finds them serving. Keys created
	// in the console last across restarts: ask the gateway, not the
	// command line, whether one is needed.
	g.Go(func() error {
		select {
		case <-sup.Settled():
			log.Info("engines settled", "engines", sup.Summary(""))
			if ca != nil {
				printTrust(stdout, ca)
			}
			if token := con.SetupToken(); token != "" {
				printSetupToken(stdout, baseURL, token)
			}
			printConnectSettings(stdout, baseURL, cfg.Model, contextTokens, gw.KeyRequired(ctx))
		case <-ctx.Done():
		}
		return nil
	})
	err = g.Wait()
	log.Info("stopped")
	return err
}

// prepareDataDir creates the data directory, or narrows one that exists,
// to its owner alone: it holds the database of key digests and
// conversations, the CA's private key and the node's cluster identity.
func prepareDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
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
