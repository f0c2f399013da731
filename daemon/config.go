package daemon

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/api/store"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	hruntime "github.com/hearth-llm/hearth/runtime"
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
	APIKeys []string
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
	// Version is the hearth binary's, announced to peers and naming the
	// simulated images.
	Version string
	// ProgressOut shows image pulls as bars when it is a terminal.
	ProgressOut io.Writer

	// Set by Options (tests, mostly); see options.go.
	hearthBinary       string
	backoff            hruntime.Backoff
	tweakSpec          func(*hruntime.Spec)
	simTokenizer       func(sim.Tokenizer) sim.Tokenizer
	gpuSource          nodes.Discoverer
	consoleInterval    time.Duration
	consoleChartWindow time.Duration
	gpuInterval        time.Duration
	// cudaVersion is the driver's, read at start; it picks engine images.
	cudaVersion int
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
}
