package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/api/store"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/console"
	"github.com/hearth-llm/hearth/installer/config"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/router/ingest"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// defaultListen is the API's address unless hearth up --listen says
// otherwise; hearth doctor checks that it is free.
const defaultListen = "127.0.0.1:8000"

// serverKeysEnv holds API keys the daemon requires, separated by commas,
// like --api-key.
const serverKeysEnv = "HEARTH_SERVER_API_KEYS"

// upConfig is the parsed command line of hearth up.
type upConfig struct {
	cluster clusterConfig
	sim     string
	listen  string
	policy  string
	dataDir string
	model   string   // the first of models: what unknown names map to
	models  []string // served models; engine i serves models[i % len]
	apiKeys []string
	// tls is --tls (off or auto: the node's own CA); tlsCert and tlsKey
	// the user's certificate instead. insecureLAN allows plain HTTP beyond
	// loopback.
	tls         string
	tlsCert     string
	tlsKey      string
	insecureLAN bool
	aliases     map[string]string
	speedup     float64
	// kvOffloadGiB is each engine's host-RAM KV tier, vLLM's
	// --kv-offloading-size.
	kvOffloadGiB float64
	// tiers is --kvbm: which KV tiers below the GPU engines get (tiersOff,
	// tiersRAM, tiersRAMSSD). kvOffloadAuto sizes the host-RAM tier of
	// real engines from the host's memory (no --kv-offloading-size);
	// hostMemory reads it (total and available bytes).
	tiers         string
	kvOffloadAuto bool
	hostMemory    func() (total, available uint64, err error)
	// kvStoreDir is the node's SSD KV store ("" without one) and
	// kvStoreGiB its capacity (0: 10% of the free disk, at most 256 GiB).
	kvStoreDir string
	kvStoreGiB float64
	seed       int64
	logLevel   slog.Level
	logFormat  string // logFormatText or logFormatJSON
	// simAgent is the simulated engines' tool use (--sim-allow-write-tools,
	// --sim-tool-calls).
	simAgent sim.AgentOptions

	// engineRuntime runs the engines: in-process ("sim"), as child
	// processes ("process") or as containers ("docker"). engine names the
	// real engine (vllm, sglang) to run on gpus, or, with simulated GPUs in
	// containers, the engine the simulated image passes for.
	engineRuntime string
	engine        string
	gpus          []gpuRef // none: every GPU discovery finds
	// gpuSource, when set, is read instead of the simulated list or the
	// driver (tests). cudaVersion is the driver's, which picks engine
	// images.
	gpuSource   nodes.Discoverer
	cudaVersion int
	tp          int // GPUs per engine
	maxModelLen int
	stopTimeout time.Duration
	// engineArgs are appended to every engine's command line.
	engineArgs []string

	// The Docker runtime: the node name on the containers' labels, an image
	// instead of the default one, the Hugging Face cache to mount, the
	// token for gated models, "none" to start containers without GPUs
	// (simulated images), and whether engines outlive the daemon.
	node        string
	image       string
	hfCache     string
	hfToken     string
	gpuRuntime  string
	keepEngines bool
	// progressOut shows image pulls as bars when it is a terminal.
	progressOut io.Writer
	// hearthBinary runs simulated engines as child processes (default:
	// this binary). Tests shorten the restart backoff and change engines'
	// specs (one that fails at start).
	hearthBinary string
	backoff      hruntime.Backoff
	tweakSpec    func(*hruntime.Spec)

	// consoleInterval is how often the console samples and pushes, and
	// consoleChartWindow how far back its charts reach (0: its defaults);
	// tests shorten them.
	consoleInterval    time.Duration
	consoleChartWindow time.Duration
	// gpuInterval is how often the GPUs are read (0: every 2 s).
	gpuInterval time.Duration
}

func runUp(ctx context.Context, env *environment, args []string) error {
	cfg, err := parseUpFlags(env, args)
	if err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg.logLevel, cfg.logFormat)
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("up: listen: %w", err)
	}
	cfg.progressOut = env.stderr
	return serveUp(ctx, env.stdout, log, cfg, ln)
}

func parseUpFlags(env *environment, args []string) (upConfig, error) {
	fs := newFlagSet(env, "up", "up --sim 2x4090 [flags]")
	cfg := upConfig{aliases: map[string]string{}}
	fs.StringVar(&cfg.sim, "sim", "", `simulated GPUs to serve from, e.g. "2x4090" or "1x4090+2x3090"`)
	fs.StringVar(&cfg.engineRuntime, "engine-runtime", "", "how engines run: sim (simulated, inside the daemon; the default with --sim), docker (containers; the default with --engine) or process (child processes)")
	fs.StringVar(&cfg.engine, "engine", "", "the engine to run on --gpus: vllm or sglang; with --sim and --engine-runtime docker, the engine the simulated image passes for")
	gpuList := fs.String("gpus", "all", "GPUs for --engine: all, or CUDA device indices or UUIDs, e.g. 0,1; one engine per GPU (per --tp GPUs)")
	fs.IntVar(&cfg.tp, "tp", 1, "GPUs per engine: tensor parallelism splits a model too large for one GPU over several")
	fs.StringVar(&cfg.image, "image", "", "engine image for --engine-runtime docker (default: the engine's pinned image for the driver's CUDA version)")
	fs.StringVar(&cfg.hfCache, "hf-cache", defaultHFCache(env.getenv), "Hugging Face cache mounted into engine containers")
	fs.StringVar(&cfg.gpuRuntime, "gpu-runtime", "", "nvidia (containers get their GPU through the NVIDIA runtime) or none (no GPU: for the simulated images; the default with --sim)")
	fs.StringVar(&cfg.node, "node", "", "this machine's name in engine names and container labels (default: the host name)")
	fs.BoolVar(&cfg.keepEngines, "keep-engines", false, "leave engine containers running when the daemon stops, so the next start adopts them without reloading weights")
	fs.Var(config.Repeatable(func(s string) error {
		cfg.engineArgs = append(cfg.engineArgs, s)
		return nil
	}), "engine-arg", "an argument appended to every engine's command line (repeatable)")
	fs.IntVar(&cfg.maxModelLen, "max-model-len", 0, "context length of each engine (0: the engine's default)")
	fs.DurationVar(&cfg.stopTimeout, "stop-timeout", 30*time.Second, "how long a stopping engine may take before it is killed")
	fs.StringVar(&cfg.listen, "listen", defaultListen, "address of the API (OpenAI and Anthropic)")
	registerClusterFlags(fs, &cfg.cluster)
	fs.StringVar(&cfg.policy, "policy", router.PolicyHearth, "routing policy: "+strings.Join(router.PolicyNames(), ", "))
	fs.StringVar(&cfg.dataDir, "data-dir", "", "where Hearth keeps its state (default $XDG_DATA_HOME/hearth or ~/.local/share/hearth)")
	modelList := fs.String("model", "", "served model ("+strings.Join(sim.ModelNames(), ", ")+" when simulated; default: the largest that fits the smallest GPU, qwen3-14b-fp8 on 24 GB); several, separated by commas, are served by the GPUs in turn")
	fs.Float64Var(&cfg.speedup, "speedup", 1, "run the simulated GPUs this many times faster than real time")
	fs.Float64Var(&cfg.kvOffloadGiB, "kv-offloading-size", 32, "host RAM per engine for KV blocks evicted from the GPU, in GiB, as vLLM's flag (default for real engines: planned from the host's memory; 32 for simulated ones)")
	fs.StringVar(&cfg.tiers, "kvbm", tiersRAMSSD, "KV tiers below the GPU: off, ram (host RAM per engine) or ram+ssd (and the node's SSD store, shared by its engines)")
	fs.StringVar(&cfg.kvStoreDir, "kv-store-dir", "", "the node's SSD KV store (default: kvstore in the data directory)")
	fs.Float64Var(&cfg.kvStoreGiB, "kv-store-size", 0, "capacity of the SSD KV store in GiB (0: 10% of the disk's free space, at most 256 GiB)")
	fs.Int64Var(&cfg.seed, "seed", 0, "seed of the simulated engines")
	fs.BoolVar(&cfg.simAgent.AllowWriteTools, "sim-allow-write-tools", false, "let the simulated model call tools that write, edit or run commands (it only reads otherwise)")
	fs.Func("sim-tool-calls", "tool calls the simulated model makes per task before answering, N or N-M (default 3-6)", cfg.simAgent.ParseToolCallRange)
	fs.Var(config.Repeatable(func(s string) error {
		if s == "" {
			return errors.New("empty key")
		}
		cfg.apiKeys = append(cfg.apiKeys, s)
		return nil
	}), "api-key", "require this API key from clients (repeatable; also $"+serverKeysEnv+", keys separated by commas; keys created in the console are kept in the data directory)")
	fs.StringVar(&cfg.tls, "tls", tlsOff, "serve HTTPS: auto (a certificate from Hearth's own CA, kept in the data directory as tls/ca.pem) or off; needed to listen beyond loopback")
	fs.StringVar(&cfg.tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM, with its chain); needs --tls-key")
	fs.StringVar(&cfg.tlsKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	fs.BoolVar(&cfg.insecureLAN, "insecure-lan", false, "allow plain HTTP on an address beyond loopback (keys and passwords then cross the network in clear)")
	fs.Var(config.Repeatable(func(s string) error {
		name, target, ok := strings.Cut(s, "=")
		if !ok || name == "" || target == "" {
			return fmt.Errorf("want NAME=MODEL, got %q", s)
		}
		cfg.aliases[name] = target
		return nil
	}), "alias", `map a client's model name to the served one, NAME=MODEL; NAME may be a pattern such as "claude-*" (repeatable; default "*" maps every name)`)
	verbose := fs.Bool("v", false, "log debug messages")
	fs.StringVar(&cfg.logFormat, "log-format", logFormatText, "log format: text (for people) or json (one object a line, for machines)")
	if err := upConfigFlags(env, fs, args); err != nil {
		return cfg, err
	}
	if cfg.engineRuntime == "" {
		cfg.engineRuntime = "sim"
		if cfg.sim == "" {
			cfg.engineRuntime = "docker"
		}
	}
	if cfg.engine == "" && cfg.sim != "" && cfg.engineRuntime == "docker" {
		cfg.engine = string(hruntime.KindVLLM)
	}
	if cfg.gpuRuntime == "" {
		cfg.gpuRuntime = "nvidia"
		if cfg.sim != "" {
			cfg.gpuRuntime = "none"
		}
	}
	switch {
	case cfg.engineRuntime != "sim" && cfg.engineRuntime != "process" && cfg.engineRuntime != "docker":
		return cfg, fmt.Errorf("%w: unknown --engine-runtime %q (known: sim, docker, process)", errUsage, cfg.engineRuntime)
	case cfg.gpuRuntime != "nvidia" && cfg.gpuRuntime != "none":
		return cfg, fmt.Errorf("%w: unknown --gpu-runtime %q (known: nvidia, none)", errUsage, cfg.gpuRuntime)
	case cfg.sim == "" && cfg.engine == "":
		return cfg, fmt.Errorf("%w: say what to serve from: --sim 2x4090 for simulated GPUs, or --engine vllm --gpus 0 for real ones", errUsage)
	case cfg.sim != "" && cfg.engine != "" && cfg.engineRuntime != "docker":
		return cfg, fmt.Errorf("%w: --sim and --engine go together only with --engine-runtime docker (the simulated images)", errUsage)
	case cfg.sim == "" && cfg.engineRuntime == "sim":
		return cfg, fmt.Errorf("%w: --engine-runtime sim runs simulated GPUs: add --sim 2x4090", errUsage)
	case cfg.tp < 1:
		return cfg, fmt.Errorf("%w: --tp must be at least 1", errUsage)
	case cfg.tp > 1 && cfg.engineRuntime == "sim":
		return cfg, fmt.Errorf("%w: --tp splits a real engine over GPUs: add --engine vllm or sglang", errUsage)
	case cfg.keepEngines && cfg.engineRuntime != "docker":
		return cfg, fmt.Errorf("%w: --keep-engines needs --engine-runtime docker", errUsage)
	case cfg.cluster.join != "" && cfg.cluster.askJoin != "":
		return cfg, fmt.Errorf("%w: --join (with a token) and --ask-join (the owner accepts) are two ways to join: give one", errUsage)
	}
	if cfg.engine != "" {
		if _, err := hruntime.KindOf(cfg.engine); err != nil {
			return cfg, fmt.Errorf("%w: --engine: want vllm or sglang, got %q", errUsage, cfg.engine)
		}
	}
	if cfg.sim == "" && *gpuList != "all" && *gpuList != "" {
		gpus, err := parseGPUList(*gpuList)
		if err != nil {
			return cfg, fmt.Errorf("%w: --gpus: %v", errUsage, err)
		}
		cfg.gpus = gpus
	}
	if cfg.maxModelLen < 0 {
		return cfg, fmt.Errorf("%w: --max-model-len must not be negative", errUsage)
	}
	if cfg.kvOffloadGiB < 0 {
		return cfg, fmt.Errorf("%w: --kv-offloading-size must not be negative", errUsage)
	}
	if cfg.kvStoreGiB < 0 {
		return cfg, fmt.Errorf("%w: --kv-store-size must not be negative", errUsage)
	}
	switch cfg.tiers {
	case tiersOff:
		cfg.kvOffloadGiB = 0
	case tiersRAM, tiersRAMSSD:
		cfg.kvOffloadAuto = cfg.sim == "" && !flagsSet(fs)["kv-offloading-size"]
	default:
		return cfg, fmt.Errorf("%w: unknown --kvbm %q (known: off, ram, ram+ssd)", errUsage, cfg.tiers)
	}
	if !(cfg.speedup > 0) {
		return cfg, fmt.Errorf("%w: --speedup must be positive", errUsage)
	}
	if !slices.Contains(router.PolicyNames(), cfg.policy) {
		return cfg, fmt.Errorf("%w: unknown --policy %q (known: %s)", errUsage, cfg.policy, strings.Join(router.PolicyNames(), ", "))
	}
	if cfg.logFormat != logFormatText && cfg.logFormat != logFormatJSON {
		return cfg, fmt.Errorf("%w: unknown --log-format %q (known: text, json)", errUsage, cfg.logFormat)
	}
	// The server's keys come from its own variable: HEARTH_API_KEY is what
	// the printed client settings tell clients to export, and a daemon
	// started from such a shell must not start asking for that key.
	for _, key := range strings.Split(env.getenv(serverKeysEnv), ",") {
		if key = strings.TrimSpace(key); key != "" {
			cfg.apiKeys = append(cfg.apiKeys, key)
		}
	}
	if err := checkExposureFlags(cfg); err != nil {
		return cfg, err
	}
	if *modelList == "" {
		*modelList = defaultModel(cfg.sim)
	}
	for _, m := range strings.Split(*modelList, ",") {
		m = strings.TrimSpace(m)
		if known, ok := catalog.LookupModel(m); ok {
			m = known.Name // "Qwen/Qwen3-14B-FP8" is served as qwen3-14b-fp8
		} else if cfg.engineRuntime != "sim" && m != "" {
			if err := docker.CheckModel(m); err != nil {
				return cfg, fmt.Errorf("%w: --model: %v", errUsage, err)
			}
		}
		if m != "" && !slices.Contains(cfg.models, m) {
			cfg.models = append(cfg.models, m)
		}
	}
	if len(cfg.models) == 0 {
		return cfg, fmt.Errorf("%w: --model is empty", errUsage)
	}
	cfg.model = cfg.models[0]
	if len(cfg.aliases) == 0 {
		cfg.aliases["*"] = cfg.model
	}
	if cfg.dataDir == "" {
		cfg.dataDir = defaultDataDir(env.getenv)
	}
	if cfg.tiers != tiersRAMSSD {
		cfg.kvStoreDir = ""
	} else if cfg.kvStoreDir == "" {
		cfg.kvStoreDir = filepath.Join(cfg.dataDir, "kvstore")
	}
	if cfg.kvStoreDir != "" {
		// Engines in containers mount it at the same path.
		abs, err := filepath.Abs(cfg.kvStoreDir)
		if err != nil {
			return cfg, fmt.Errorf("%w: --kv-store-dir: %v", errUsage, err)
		}
		cfg.kvStoreDir = abs
	}
	cfg.hostMemory = hostMemory
	if *verbose {
		cfg.logLevel = slog.LevelDebug
	}
	cfg.hfToken = env.getenv("HF_TOKEN")
	if cfg.node == "" {
		cfg.node, _ = os.Hostname()
	}
	return cfg, nil
}

// gpuRef is a GPU named on the command line: by CUDA index, or by UUID.
type gpuRef struct {
	index int
	uuid  string
}

// parseGPUList reads --gpus: CUDA device indices or NVML UUIDs
// ("GPU-…"), separated by commas. A GPU named by UUID is numbered by its
// place in the list.
func parseGPUList(s string) ([]gpuRef, error) {
	var out []gpuRef
	seen := map[string]bool{}
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		var g gpuRef
		switch n, err := strconv.Atoi(f); {
		case f == "all":
			return nil, errors.New(`"all" stands alone: every GPU, or name them, e.g. 0,1`)
		case err == nil && n >= 0:
			g.index = n
		case strings.HasPrefix(f, "GPU-") && len(f) > len("GPU-"):
			g = gpuRef{index: i, uuid: f}
		default:
			return nil, fmt.Errorf("%q is neither a device index nor a GPU UUID (GPU-…)", f)
		}
		if seen[f] {
			return nil, fmt.Errorf("%s is named twice", f)
		}
		seen[f] = true
		out = append(out, g)
	}
	return out, nil
}

// defaultModel is the largest catalog model that fits the smallest GPU of
// a simulated list; qwen3-14b-fp8, what fits a 24 GB board, where the GPUs'
// sizes are not known.
func defaultModel(simSpec string) string {
	const fallback = "qwen3-14b-fp8"
	gpus, err := nodes.ParseSimSpec(simSpec)
	if err != nil || len(gpus) == 0 {
		return fallback // a bad --sim is reported where it is parsed
	}
	uses := make([]catalog.GPUUse, len(gpus))
	for i, g := range gpus {
		uses[i] = gpuUseOf(g)
	}
	m, err := catalog.DefaultModel(uses)
	if err != nil {
		return fallback
	}
	return m.Name
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

// serveUp runs the whole daemon on ln until ctx ends: the engines under
// their supervisor, the router following their KV events, the gateway and
// the console. It builds in stages (plan, store, routing, engines, API);
// what a stage opened is released by one cleanup stack, whichever stage
// fails.
func serveUp(ctx context.Context, stdout io.Writer, log *slog.Logger, cfg upConfig, ln net.Listener) (err error) {
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
	if cfg.engineRuntime == "docker" && cfg.sim == "" {
		gpus = withoutOwnEngines(ctx, cfg.node, gpus, log)
	}
	specs, planNotes, err := planEngines(cfg, gpus)
	if err != nil {
		return err
	}
	if cfg.engineRuntime == "docker" {
		cfg.cudaVersion = inv.Host.CUDADriverVersion
	}
	if err := os.MkdirAll(cfg.dataDir, 0o700); err != nil {
		return fmt.Errorf("up: data dir: %w", err)
	}
	log.Info(fmt.Sprintf("starting: %d engines loading…", len(specs)), "sim", cfg.sim, "engine", cfg.engine, "engine_runtime", cfg.engineRuntime, "engines", len(specs),
		"listen", ln.Addr().String(), "policy", cfg.policy, "model", cfg.model, "data_dir", cfg.dataDir,
		"api_keys", len(cfg.apiKeys), "speedup", cfg.speedup)

	// Store: settings and keys that outlive the daemon. Precedence of the
	// routing policy and the model aliases: what was last saved on the
	// console's Settings page, when anything was; otherwise --policy and
	// --alias. Saved settings that do not fit the served model are skipped
	// with a warning.
	db, err := store.Open(ctx, filepath.Join(cfg.dataDir, "hearth.db"))
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
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	if ca != nil {
		log.Info("TLS with Hearth's own CA", "ca", ca.CertPath(), "sha256", ca.Fingerprint())
	}
	baseURL := cfg.scheme() + "://" + advertisedAddr(ln.Addr())
	models, err := api.NewModels(cfg.models, nil)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	settings, err := newSettingsStore(ctx, db, log, cfg.policy, cfg.models, cfg.aliases, models)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}

	var kvStore *nodeStore
	if cfg.kvStoreDir != "" {
		// The engines' node: the GPUs' (simulated GPUs are on node "sim").
		kvStore, err = openNodeStore(specs[0].GPU.Node, cfg.kvStoreDir, int64(cfg.kvStoreGiB*(1<<30)), log.With("component", "kvstore"))
		if err != nil {
			return fmt.Errorf("up: %w", err)
		}
		cleanup.push(func() { kvStore.store.Close() })
	}
	// Routing.
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
	if kvStore != nil {
		if err := reg.Register(kvStore.store); err != nil {
			return fmt.Errorf("up: %w", err)
		}
	}
	engines := newFleet(rt, log.With("component", "fleet"))
	if kvStore != nil {
		engines.storeReadBytesPerSec = catalog.DefaultDiskGBps * 1e9
		kvStore.tellEvictions(nodeStoreEvictions(rt, specs))
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
	pulls := newPullBoard(cfg.progressOut, log)
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
		Engines: supervised, Attacher: engines, StopTimeout: cfg.stopTimeout, Backoff: cfg.backoff, KeepEngines: cfg.keepEngines,
		Logger: log.With("component", "supervisor"),
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
	keys := &keyStore{db: db, static: cfg.apiKeys}
	traffic := api.NewTraffic(api.TrafficLimits{})
	keyless := &keylessClients{}
	health, closeHealth := newHealthSource(cfg, latestGPUs{sampler}, engineIdentities(sup), ln.Addr().String())
	cleanup.push(closeHealth)
	deps := console.Deps{
		Engines:     engineSource{engines: engineStatuses, logs: sup.Logs, rt: rt, gpus: sampler, planNotes: planNotes, client: &http.Client{}},
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
		deps.KVStores = kvStore
	}
	if clusterNode != nil {
		deps.Cluster = newClusterConsole(clusterNode, cfg.cluster)
	}
	con, err := console.New(console.Config{
		Model: cfg.model, ContextTokens: contextTokens, Interval: cfg.consoleInterval, ChartWindow: cfg.consoleChartWindow,
		SecureCookie: cfg.servesTLS(),
	}, deps)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	gw, err := api.New(api.Config{
		Addr: ln.Addr().String(), Models: cfg.models, ContextTokens: contextTokens,
	}, api.Deps{
		Router: routes, Tokenizer: tok, Store: db, Registry: reg, Logger: log,
		Keys: apiKeys{keys}, Models: models, Traffic: traffic,
		Mount: func(r fiber.Router) {
			con.Register(r)
			adminapi.Mount(r, con.Guard, adminSources(engineStatuses, sup, traffic, tok.Decode, clusterNode, cfg.dataDir))
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
		g.Go(func() error { return kvStore.run(ctx, log.With("component", "kvstore")) })
	}
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
			printConnectSettings(stdout, baseURL, cfg.model, contextTokens, gw.KeyRequired(ctx))
		case <-ctx.Done():
		}
		return nil
	})
	err = g.Wait()
	log.Info("stopped")
	return err
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
