package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/api/store"
	"github.com/hearth-llm/hearth/console"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// upConfig is the parsed command line of hearth up.
type upConfig struct {
	sim     string
	listen  string
	policy  string
	dataDir string
	model   string
	apiKeys []string
	aliases map[string]string
	speedup float64
	// kvOffloadGiB is each engine's host-RAM KV tier, vLLM's
	// --kv-offloading-size.
	kvOffloadGiB float64
	seed         int64
	logLevel     slog.Level

	// consoleInterval is how often the console samples and pushes, and
	// consoleChartWindow how far back its charts reach (0: its defaults);
	// tests shorten them.
	consoleInterval    time.Duration
	consoleChartWindow time.Duration
}

func runUp(ctx context.Context, env *environment, args []string) error {
	cfg, err := parseUpFlags(env, args)
	if err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg.logLevel)
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("up: listen: %w", err)
	}
	return serveUp(ctx, env.stdout, log, cfg, ln)
}

func parseUpFlags(env *environment, args []string) (upConfig, error) {
	fs := newFlagSet(env, "up", "up --sim 2x4090 [flags]")
	cfg := upConfig{aliases: map[string]string{}}
	fs.StringVar(&cfg.sim, "sim", "", `simulated GPUs to serve from, e.g. "2x4090" or "1x4090+2x3090" (required until real GPUs are supported)`)
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:8000", "address of the API (OpenAI and Anthropic)")
	fs.StringVar(&cfg.policy, "policy", router.PolicyHearth, "routing policy: "+strings.Join(router.Policies, ", "))
	fs.StringVar(&cfg.dataDir, "data-dir", "", "where Hearth keeps its state (default $XDG_DATA_HOME/hearth or ~/.local/share/hearth)")
	fs.StringVar(&cfg.model, "model", "qwen3-14b-fp8", "served model: "+strings.Join(sim.ModelNames(), ", "))
	fs.Float64Var(&cfg.speedup, "speedup", 1, "run the simulated GPUs this many times faster than real time")
	fs.Float64Var(&cfg.kvOffloadGiB, "kv-offloading-size", 32, "host RAM per engine for KV blocks evicted from the GPU, in GiB, as vLLM's flag (0: none)")
	fs.Int64Var(&cfg.seed, "seed", 0, "seed of the simulated engines")
	fs.Func("api-key", "require this API key from clients (repeatable; also $HEARTH_API_KEY)", func(s string) error {
		if s == "" {
			return errors.New("empty key")
		}
		cfg.apiKeys = append(cfg.apiKeys, s)
		return nil
	})
	fs.Func("alias", `map a client's model name to the served one, NAME=MODEL; NAME may be a pattern such as "claude-*" (repeatable; default "*" maps every name)`, func(s string) error {
		name, target, ok := strings.Cut(s, "=")
		if !ok || name == "" || target == "" {
			return fmt.Errorf("want NAME=MODEL, got %q", s)
		}
		cfg.aliases[name] = target
		return nil
	})
	verbose := fs.Bool("v", false, "log debug messages")
	if err := parseFlags(fs, args); err != nil {
		return cfg, err
	}
	if cfg.sim == "" {
		return cfg, fmt.Errorf("%w: --sim is required: Hearth cannot start engines on real GPUs yet", errUsage)
	}
	if cfg.kvOffloadGiB < 0 {
		return cfg, fmt.Errorf("%w: --kv-offloading-size must not be negative", errUsage)
	}
	if !(cfg.speedup > 0) {
		return cfg, fmt.Errorf("%w: --speedup must be positive", errUsage)
	}
	if !slices.Contains(router.Policies, cfg.policy) {
		return cfg, fmt.Errorf("%w: unknown --policy %q (known: %s)", errUsage, cfg.policy, strings.Join(router.Policies, ", "))
	}
	if key := env.getenv("HEARTH_API_KEY"); key != "" {
		cfg.apiKeys = append(cfg.apiKeys, key)
	}
	if len(cfg.aliases) == 0 {
		cfg.aliases["*"] = cfg.model
	}
	if cfg.dataDir == "" {
		cfg.dataDir = defaultDataDir(env.getenv)
	}
	if *verbose {
		cfg.logLevel = slog.LevelDebug
	}
	return cfg, nil
}

// defaultDataDir follows the XDG base directory convention.
func defaultDataDir(getenv func(string) string) string {
	if d := getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "hearth")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "share", "hearth")
	}
	return "hearth-data"
}

// serveUp runs the whole daemon on ln until ctx ends: the simulated engines,
// the router following their KV events, and the gateway.
func serveUp(ctx context.Context, stdout io.Writer, log *slog.Logger, cfg upConfig, ln net.Listener) (err error) {
	defer func() {
		if err != nil {
			ln.Close()
		}
	}()
	gpus, err := nodes.ParseSimSpec(cfg.sim)
	if err != nil {
		return fmt.Errorf("%w: --sim: %v", errUsage, err)
	}
	if err := os.MkdirAll(cfg.dataDir, 0o700); err != nil {
		return fmt.Errorf("up: data dir: %w", err)
	}
	log.Info("starting", "sim", cfg.sim, "listen", ln.Addr().String(), "policy", cfg.policy,
		"model", cfg.model, "data_dir", cfg.dataDir, "api_keys", len(cfg.apiKeys), "speedup", cfg.speedup)

	db, err := store.Open(ctx, filepath.Join(cfg.dataDir, "hearth.db"))
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	defer db.Close()
	// Precedence of the routing policy and the model aliases: what was
	// last saved on the console's Settings page, when anything was (it
	// stays in the database across restarts); otherwise --policy and
	// --alias. Saved settings that do not fit the served model are
	// skipped with a warning.
	settings, err := newSettingsStore(ctx, db, log, cfg.policy, cfg.model, cfg.aliases)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}

	tok, err := tokenizer.Qwen3()
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	reg := prometheus.NewRegistry()
	routerMetrics, err := router.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	rt, err := router.New(router.Config{Policy: settings.Policy(), Seed: cfg.seed},
		router.WithLogger(log.With("component", "router")), router.WithMetrics(routerMetrics))
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	cluster, err := newSimCluster(rt, simClusterOptions{
		GPUs: gpus, Model: cfg.model, KVOffloadingGiB: cfg.kvOffloadGiB, Speedup: cfg.speedup, Seed: cfg.seed, Tokenizer: tok,
		Logger: log,
	})
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	if err := reg.Register(router.NewIngestCollector(cluster.ingestStats, cluster.workerName)); err != nil {
		cluster.close(rt)
		return fmt.Errorf("up: %w", err)
	}
	routes := newGatewayRouter(rt)
	contextTokens := 0
	for _, w := range cluster.workers {
		routes.addWorker(w.id, w.name, w.instance.BaseURL())
		contextTokens = w.instance.Config().MaxModelLen
	}

	// The console reads the cluster, the router and the gateway's traffic
	// through adapters; the keys it creates, kept in the database, open the
	// API too, next to the command line's.
	keys := &keyStore{db: db, static: cfg.apiKeys}
	routes.defaultPolicy = settings.Policy
	traffic := &trafficSource{}
	var gw *api.Gateway
	con, err := console.New(console.Config{
		Model: cfg.model, ContextTokens: contextTokens, Interval: cfg.consoleInterval, ChartWindow: cfg.consoleChartWindow,
	}, console.Deps{
		Engines:     engineSource{cluster: cluster, model: cfg.model},
		Router:      routerSource{rt: rt},
		Traffic:     traffic,
		Keys:        keys,
		Settings:    settings,
		KeyRequired: func(ctx context.Context) bool { return gw.KeyRequired(ctx) },
		Logger:      log,
	})
	if err != nil {
		cluster.close(rt)
		return fmt.Errorf("up: %w", err)
	}
	gw, err = api.New(api.Config{
		Addr: ln.Addr().String(), Models: []string{cfg.model}, Aliases: settings.Aliases(),
		APIKeys: cfg.apiKeys, ContextTokens: contextTokens,
	}, api.Deps{
		Router: routes, Tokenizer: tok, Store: db, Registry: reg, Logger: log,
		Keys: apiKeys{db: db},
		Mount: func(r fiber.Router) {
			con.Register(r)
			// A browser opening the API's address lands on the console;
			// HEAD / (Claude Code's probe) keeps the gateway's answer.
			r.Add(fiber.MethodGet, "/", func(c *fiber.Ctx) error { return c.Redirect("/console/") })
		},
	})
	if err != nil {
		cluster.close(rt)
		return fmt.Errorf("up: %w", err)
	}
	traffic.traffic = gw.Traffic()
	settings.gateway = gw

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return cluster.Run(ctx) })
	g.Go(func() error { return gw.Serve(ctx, ln) })
	g.Go(func() error { return con.Run(ctx) })
	// Keys created in the console last across restarts: ask the gateway,
	// not the command line, whether one is needed.
	printConnectSettings(stdout, "http://"+ln.Addr().String(), cfg.model, contextTokens, gw.KeyRequired(ctx))
	err = g.Wait()
	log.Info("stopped")
	return err
}
