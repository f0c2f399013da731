package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/api/store"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// ErrUsage marks errors in how the daemon was configured: a bad flag on
// hearth up's command line. cmd/hearth exits with status 2 for them.
var ErrUsage = errors.New("usage")

// ServerKeysEnv holds API keys the daemon requires, separated by commas,
// like --api-key.
const ServerKeysEnv = "HEARTH_SERVER_API_KEYS"

// Engine runtimes (Config.EngineRuntime).
const (
	RuntimeSim     = "sim"     // simulated engines inside the daemon
	RuntimeProcess = "process" // engines as child processes
	RuntimeDocker  = "docker"  // engines as containers
)

// DaemonMemoryLimit is the soft memory limit of a daemon whose engines run
// outside it (MemoryLimit): the budget of docs/perf.md ("Memory") is 300
// MB of RSS at 128 agent sessions, and at that load the daemon holds 95 to
// 130 MB live. Without a limit the collector lets the heap grow to twice
// what is live before it runs (GOGC=100), which put the RSS at 290-360 MB;
// at this limit it collects sooner when the heap nears it, and returns
// what it freed to the system.
const DaemonMemoryLimit = 224 << 20

// MemoryLimit is the Go runtime's soft memory limit for a daemon of this
// configuration, in bytes: DaemonMemoryLimit when its engines run as
// processes or containers, 0 (none) when simulated engines run inside it,
// whose memory the budget does not cover.
func (c Config) MemoryLimit() int64 {
	if c.EngineRuntime == RuntimeSim || c.EngineRuntime == "" {
		return 0
	}
	return DaemonMemoryLimit
}

// Config is what hearth up serves and how: its command line, once parsed.
type Config struct {
	// Sim is the simulated GPUs, e.g. "2x4090" ("" for real ones).
	Sim     string
	Listen  string
	Policy  string
	DataDir string
	Model   string   // the first of Models: what unknown names map to
	Models  []string // served models; engine i serves Models[i % len]
	// OnDemand is how models beyond what the GPUs hold at once are served
	// (--keep-alive, --pin, --preload, --model-wait; see residency.go).
	OnDemand OnDemandConfig
	APIKeys  []string
	// ResponseRetention bounds the Responses-API conversations kept in
	// hearth.db; zero fields take store's defaults (7 days, 256 MiB).
	ResponseRetention store.Retention
	// TLS is --tls (TLSOff or TLSAuto: the node's own CA); TLSCert and
	// TLSKey the user's certificate instead. InsecureLAN allows plain HTTP
	// beyond loopback.
	TLS         string
	TLSCert     string
	TLSKey      string
	InsecureLAN bool
	Aliases     map[string]string
	Speedup     float64
	// KVOffloadGiB is each engine's host-RAM KV tier, vLLM's
	// --kv-offloading-size.
	KVOffloadGiB float64
	// Tiers is --kvbm: which KV tiers below the GPU engines get
	// (kvbm.TiersOff, TiersRAM, TiersRAMSSD). KVOffloadAuto sizes the
	// host-RAM tier of real engines from the host's memory (no
	// --kv-offloading-size).
	Tiers         string
	KVOffloadAuto bool
	// KVStoreDir is the node's SSD KV store ("" without one) and
	// KVStoreGiB its capacity (0: 10% of the free disk, at most 256 GiB).
	KVStoreDir string
	KVStoreGiB float64
	Seed       int64
	// SimAgent is the simulated engines' tool use (--sim-allow-write-tools,
	// --sim-tool-calls).
	SimAgent sim.AgentOptions

	// EngineRuntime runs the engines: in-process (RuntimeSim), as child
	// processes (RuntimeProcess) or as containers (RuntimeDocker). Engine
	// names the real engine (vllm, sglang) to run on GPUs, or, with
	// simulated GPUs in containers, the engine the simulated image passes
	// for.
	EngineRuntime string
	Engine        string
	GPUs          []GPURef // none: every GPU discovery finds
	TP            int      // GPUs per engine
	// KVCacheDtype is the engines' KV cache dtype (--kv-cache-dtype): ""
	// or "auto" for the model's, "fp8" for half the bytes per token.
	KVCacheDtype string
	// RopeScaling serves the model's longer YaRN context where it has one
	// (--rope-scaling; Qwen3: 131,072 tokens).
	RopeScaling bool
	MaxModelLen int
	// MaxBatchedTokens is the engines' step token budget, the layout's
	// (catalog.Layout.MaxBatchedTokens): chooseLayout sets the agent
	// layout's; 0 is catalog.DefaultMaxBatchedTokens. It is not a flag:
	// --engine-arg passes another to a real engine, which the plan then
	// does not size for.
	MaxBatchedTokens int
	// Layout is --layout: LayoutAgent (the default) or LayoutPerGPU,
	// the layout served when no explicit layout flag is given
	// (chooseLayout).
	Layout      string
	StopTimeout time.Duration
	// EngineArgs are appended to every engine's command line.
	EngineArgs []string
	// NoInferredHints is --infer-hints off: the gateway leaves the agent
	// hints a client did not send unset (api.Config.NoInferredHints).
	NoInferredHints bool
	// Profile is --pprof: Go's runtime profiles on the API under
	// /debug/pprof/ (adminapi.MountProfiler), and on each simulated engine
	// run as a process (sim-engine --pprof).
	Profile bool

	// The Docker runtime: the node name on the containers' labels, an image
	// instead of the default one, the Hugging Face cache to mount, the
	// token for gated models, "none" to start containers without GPUs
	// (simulated images), and whether engines outlive the daemon.
	Node        string
	Image       string
	HFCache     string
	HFToken     string
	GPURuntime  string
	KeepEngines bool

	Cluster ClusterConfig
	// Agent is --agent: the coding-agent client whose workload chooses
	// the engines' layout (ChooseAgentLayout).
	Agent AgentConfig
	// LogLevel and LogFormat are how hearth up logs (-v, --log-format:
	// LogFormatText or LogFormatJSON).
	LogLevel  slog.Level
	LogFormat string
	// Version is the hearth binary's, announced to peers and naming the
	// simulated images.
	Version string
	// ProgressOut shows image pulls as bars when it is a terminal.
	ProgressOut io.Writer

	// measured is the layout hearth up --agent measured and chose
	// (ChooseAgentLayout); nil otherwise.
	measured *ServedLayout

	// cmdline is the command line's text that Complete turns into the
	// fields above (RegisterFlags).
	cmdline commandLine

	// Set by Options (tests, mostly); see options.go.
	hearthBinary       string
	backoff            hruntime.Backoff
	tweakSpec          func(*hruntime.Spec)
	kvCheckWait        time.Duration // 0: hruntime.DefaultKVCheckWait
	simTokenizer       func(sim.Tokenizer) sim.Tokenizer
	gpuSource          nodes.Discoverer
	consoleInterval    time.Duration
	consoleChartWindow time.Duration
	consoleClock       clock.Clock // nil: real time
	gpuInterval        time.Duration
	gpuTaken           *GPUTakenPolicy // nil: DefaultGPUTakenPolicy
	keepAliveInterval  time.Duration
	// cudaVersion is the driver's, read at start; it picks engine images.
	cudaVersion int
}

// OnDemandConfig is how hearth up serves more models than its GPUs hold at
// once (docs/models.md): each model's keep-alive, the models pinned (never
// evicted) and preloaded (loaded at start), and how long a request waits
// for its model to load before the dialect's overloaded error.
type OnDemandConfig struct {
	KeepAlive time.Duration
	Pinned    []string
	Preload   []string
	Wait      time.Duration
}

// AgentConfig is hearth up --agent: the client (a catalog.AgentClients
// ID; "" for none) and its sessions at once to choose the layout for.
// Explicit names the layout flags the command line gave ("tp",
// "kv-cache-dtype", "rope-scaling"), which override the recommendation.
type AgentConfig struct {
	Client   string
	Sessions int
	Explicit []string
}

// layoutFlags are the flags a recommended layout sets.
var layoutFlags = []string{"tp", "kv-cache-dtype", "rope-scaling"}

// Data is the layout of the data directory.
func (cfg Config) Data() DataDir { return DataDir(cfg.DataDir) }

// Complete fills in what the flags left to be worked out, in the order
// each depends on the last: the join token from --join-file, the engine
// runtime, engine and GPU runtime the others imply, the GPUs named, the
// KV tiers' sizes, the API keys of $HEARTH_SERVER_API_KEYS, the served
// models (the largest that fits without --model) and their aliases, the
// data directory and KV store, the Hugging Face home, the node's name and
// the log level. It reads the command line's text when RegisterFlags
// bound cfg to one. Validate checks the result; errors in the text are
// usage errors here.
func (cfg *Config) Complete(env Env) error {
	cl := &cfg.cmdline
	if err := readJoinFile(env.Stdin, &cfg.Cluster.Join, cl.joinFile); err != nil {
		return err
	}
	switch cl.inferHints {
	case "", "on":
	case "off":
		cfg.NoInferredHints = true
	default:
		return fmt.Errorf("%w: --infer-hints %q: want on or off", ErrUsage, cl.inferHints)
	}
	if cfg.Agent.Client != "" {
		if !slices.Contains(catalog.AgentClientIDs(), cfg.Agent.Client) {
			return fmt.Errorf("%w: --agent %q: want one of %s", ErrUsage, cfg.Agent.Client, strings.Join(catalog.AgentClientIDs(), ", "))
		}
		if cfg.Agent.Sessions < 1 || cfg.Agent.Sessions > 64 {
			return fmt.Errorf("%w: --agent-sessions %d: want 1 to 64", ErrUsage, cfg.Agent.Sessions)
		}
		for _, name := range layoutFlags {
			if cl.set[name] {
				cfg.Agent.Explicit = append(cfg.Agent.Explicit, name)
			}
		}
	}
	if cfg.Layout == "" {
		cfg.Layout = LayoutAgent
	}
	if !slices.Contains(LayoutNames(), cfg.Layout) {
		return fmt.Errorf("%w: --layout %q: want %s", ErrUsage, cfg.Layout, strings.Join(LayoutNames(), " or "))
	}
	if cfg.EngineRuntime == "" {
		cfg.EngineRuntime = RuntimeSim
		if cfg.Sim == "" {
			cfg.EngineRuntime = RuntimeDocker
		}
	}
	if cfg.Engine == "" && cfg.Sim != "" && cfg.EngineRuntime == RuntimeDocker {
		cfg.Engine = string(hruntime.KindVLLM)
	}
	if cfg.GPURuntime == "" {
		cfg.GPURuntime = "nvidia"
		if cfg.Sim != "" {
			cfg.GPURuntime = "none"
		}
	}
	if cfg.Sim == "" && cl.gpus != "all" && cl.gpus != "" {
		gpus, err := parseGPUList(cl.gpus)
		if err != nil {
			return fmt.Errorf("%w: --gpus: %v", ErrUsage, err)
		}
		cfg.GPUs = gpus
	}
	switch cfg.Tiers {
	case kvbm.TiersOff:
		cfg.KVOffloadGiB = 0
	case kvbm.TiersRAM, kvbm.TiersRAMSSD:
		cfg.KVOffloadAuto = cfg.Sim == "" && !cl.set["kv-offloading-size"]
	}
	// The server's keys come from its own variable: HEARTH_API_KEY is what
	// the printed client settings tell clients to export, and a daemon
	// started from such a shell must not start asking for that key.
	for _, key := range strings.Split(env.getenv(ServerKeysEnv), ",") {
		if key = strings.TrimSpace(key); key != "" {
			cfg.APIKeys = append(cfg.APIKeys, key)
		}
	}
	if err := cfg.completeModels(cl.models); err != nil {
		return err
	}
	if cfg.DataDir == "" {
		cfg.DataDir = string(DefaultDataDir(env.getenv))
	}
	if cfg.Tiers != kvbm.TiersRAMSSD {
		cfg.KVStoreDir = ""
	} else if cfg.KVStoreDir == "" {
		cfg.KVStoreDir = cfg.Data().KVStore()
	}
	if cfg.KVStoreDir != "" {
		// Engines in containers mount it at the same path.
		abs, err := filepath.Abs(cfg.KVStoreDir)
		if err != nil {
			return fmt.Errorf("%w: --kv-store-dir: %v", ErrUsage, err)
		}
		cfg.KVStoreDir = abs
	}
	home, note, err := catalog.ReadHFHome(cfg.HFCache)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if note != "" {
		env.note("hearth up: %s", note)
	}
	cfg.HFCache = home
	if cl.verbose {
		cfg.LogLevel = slog.LevelDebug
	}
	cfg.HFToken = env.getenv("HF_TOKEN")
	if cfg.Node == "" {
		cfg.Node, _ = os.Hostname()
	}
	return nil
}

// completeModels reads --model: names separated by commas, each a
// catalog model (by name or repository: "Qwen/Qwen3-14B-FP8" is served as
// qwen3-14b-fp8) or, for real engines, a repository the engine loads. The
// default is the largest catalog model that fits the smallest simulated
// GPU. The first model is what unknown names map to without --alias.
func (cfg *Config) completeModels(list string) error {
	if list == "" && len(cfg.Models) == 0 {
		list = defaultModel(cfg.Sim)
	}
	for _, m := range strings.Split(list, ",") {
		m = strings.TrimSpace(m)
		if known, ok := catalog.LookupModel(m); ok {
			m = known.Name
		} else if cfg.EngineRuntime != RuntimeSim && m != "" {
			if err := docker.CheckModel(m); err != nil {
				return fmt.Errorf("%w: --model: %v", ErrUsage, err)
			}
		}
		if m != "" && !slices.Contains(cfg.Models, m) {
			cfg.Models = append(cfg.Models, m)
		}
	}
	if len(cfg.Models) == 0 {
		return fmt.Errorf("%w: --model is empty", ErrUsage)
	}
	cfg.Model = cfg.Models[0]
	for _, list := range []struct {
		flag  string
		names []string
	}{{"--pin", cfg.OnDemand.Pinned}, {"--preload", cfg.OnDemand.Preload}} {
		for i, name := range list.names {
			if known, ok := catalog.LookupModel(name); ok {
				name, list.names[i] = known.Name, known.Name
			}
			if !slices.Contains(cfg.Models, name) {
				return fmt.Errorf("%w: %s %s: not a served model (--model %s)", ErrUsage, list.flag, name, strings.Join(cfg.Models, ","))
			}
		}
	}
	if len(cfg.Aliases) == 0 {
		cfg.Aliases = map[string]string{"*": cfg.Model}
	}
	return nil
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
	m, err := catalog.DefaultModel(nodes.PlannerUses(gpus))
	if err != nil {
		return fallback
	}
	return m.Name
}

// readJoinFile sets join from --join-file: the file's first line, or
// stdin's with "-".
func readJoinFile(stdin io.Reader, join *string, path string) error {
	if path == "" {
		return nil
	}
	if *join != "" {
		return fmt.Errorf("%w: --join and --join-file both give a token: keep one", ErrUsage)
	}
	r := stdin
	if path == "-" {
		if stdin == nil {
			return fmt.Errorf("%w: --join-file -: no standard input", ErrUsage)
		}
	} else {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("%w: --join-file: %v", ErrUsage, err)
		}
		defer f.Close()
		r = f
	}
	line, err := bufio.NewReader(io.LimitReader(r, 64<<10)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("--join-file: %w", err)
	}
	if *join = strings.TrimSpace(line); *join == "" {
		return fmt.Errorf("%w: --join-file %s holds no token", ErrUsage, path)
	}
	return nil
}

// parseGPUList reads --gpus: CUDA device indices or NVML UUIDs
// ("GPU-…"), separated by commas. A GPU named by UUID is numbered by its
// place in the list.
func parseGPUList(s string) ([]GPURef, error) {
	var out []GPURef
	seen := map[string]bool{}
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		var g GPURef
		switch n, err := strconv.Atoi(f); {
		case f == "all":
			return nil, errors.New(`"all" stands alone: every GPU, or name them, e.g. 0,1`)
		case err == nil && n >= 0:
			g.Index = n
		case strings.HasPrefix(f, "GPU-") && len(f) > len("GPU-"):
			g = GPURef{Index: i, UUID: f}
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

// GPURef is a GPU named on the command line: by CUDA index, or by UUID
// (then numbered by its place in the list).
type GPURef struct {
	Index int
	UUID  string
}

// Validate checks what the flags alone decide: the runtime and engine
// named, the numbers in range, TLS and exposure. Run validates first.
func (cfg Config) Validate() error {
	switch {
	case cfg.EngineRuntime != RuntimeSim && cfg.EngineRuntime != RuntimeProcess && cfg.EngineRuntime != RuntimeDocker:
		return fmt.Errorf("%w: unknown --engine-runtime %q (known: sim, docker, process)", ErrUsage, cfg.EngineRuntime)
	case cfg.GPURuntime != "nvidia" && cfg.GPURuntime != "none":
		return fmt.Errorf("%w: unknown --gpu-runtime %q (known: nvidia, none)", ErrUsage, cfg.GPURuntime)
	case cfg.Sim == "" && cfg.Engine == "":
		return fmt.Errorf("%w: say what to serve from: --sim 2x4090 for simulated GPUs, or --engine vllm --gpus 0 for real ones", ErrUsage)
	case cfg.Sim != "" && cfg.Engine != "" && cfg.EngineRuntime != RuntimeDocker:
		return fmt.Errorf("%w: --sim and --engine go together only with --engine-runtime docker (the simulated images)", ErrUsage)
	case cfg.Sim == "" && cfg.EngineRuntime == RuntimeSim:
		return fmt.Errorf("%w: --engine-runtime sim runs simulated GPUs: add --sim 2x4090", ErrUsage)
	case cfg.TP < 1:
		return fmt.Errorf("%w: --tp must be at least 1", ErrUsage)
	case cfg.KeepEngines && cfg.EngineRuntime != RuntimeDocker:
		return fmt.Errorf("%w: --keep-engines needs --engine-runtime docker", ErrUsage)
	case cfg.Cluster.Join != "" && cfg.Cluster.AskJoin != "":
		return fmt.Errorf("%w: --join (with a token) and --ask-join (the owner accepts) are two ways to join: give one", ErrUsage)
	}
	if cfg.LogFormat != "" && cfg.LogFormat != LogFormatText && cfg.LogFormat != LogFormatJSON {
		return fmt.Errorf("%w: unknown --log-format %q (known: text, json)", ErrUsage, cfg.LogFormat)
	}
	if err := (catalog.Layout{KVCacheDtype: cfg.KVCacheDtype}).Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if cfg.Engine != "" {
		if _, err := hruntime.KindOf(cfg.Engine); err != nil {
			return fmt.Errorf("%w: --engine: want vllm or sglang, got %q", ErrUsage, cfg.Engine)
		}
	}
	switch {
	case cfg.MaxModelLen < 0:
		return fmt.Errorf("%w: --max-model-len must not be negative", ErrUsage)
	case cfg.KVOffloadGiB < 0:
		return fmt.Errorf("%w: --kv-offloading-size must not be negative", ErrUsage)
	case cfg.KVStoreGiB < 0:
		return fmt.Errorf("%w: --kv-store-size must not be negative", ErrUsage)
	case cfg.Tiers != kvbm.TiersOff && cfg.Tiers != kvbm.TiersRAM && cfg.Tiers != kvbm.TiersRAMSSD:
		return fmt.Errorf("%w: unknown --kvbm %q (known: off, ram, ram+ssd)", ErrUsage, cfg.Tiers)
	case cfg.OnDemand.KeepAlive < 0:
		return fmt.Errorf("%w: --keep-alive must not be negative", ErrUsage)
	case cfg.OnDemand.Wait < 0:
		return fmt.Errorf("%w: --model-wait must not be negative", ErrUsage)
	case !(cfg.Speedup > 0):
		return fmt.Errorf("%w: --speedup must be positive", ErrUsage)
	case !slices.Contains(router.PolicyNames(), cfg.Policy):
		return fmt.Errorf("%w: unknown --policy %q (known: %s)", ErrUsage, cfg.Policy, strings.Join(router.PolicyNames(), ", "))
	}
	return checkExposureFlags(cfg)
}

// ClusterConfig is hearth up's share of the cluster flags.
type ClusterConfig struct {
	Join           string // a token from hearth cluster token
	AskJoin        string // host[:port] of an inviting node, or "auto" (mDNS)
	Listen         string // the cluster port
	RouteListen    string // NATS routes
	AdvertiseHost  string
	AdvertiseIface string
	MDNS           bool
	// Peers are the NATS route URLs of nodes named by --peer
	// (PeerRoute), dialled besides those a join or mDNS gives.
	Peers []string
	// Wake are the MAC addresses of sleeping rigs (--wake) woken by a
	// Wake-on-LAN packet to WakeAddr while requests wait for KV room.
	Wake     []string
	WakeAddr string
}
