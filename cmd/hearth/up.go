package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/bench"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/installer/config"
	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// defaultListen is the API's address unless hearth up --listen says
// otherwise; hearth doctor checks that it is free.
const defaultListen = "127.0.0.1:8000"

// upConfig is the parsed command line of hearth up: what the daemon
// serves, and how it logs.
type upConfig struct {
	daemon.Config
	logLevel  slog.Level
	logFormat string // logFormatText or logFormatJSON
	// agent, when its client is set, picks the layout (chooseAgentLayout).
	agent upAgent
}

func runUp(ctx context.Context, env *environment, args []string) error {
	cfg, err := parseUpFlags(env, args)
	if err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg.logLevel, cfg.logFormat)
	if cfg.agent.client != "" {
		if err := chooseAgentLayout(ctx, &cfg, env.layoutEvaluationSize(), log); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("up: listen: %w", err)
	}
	cfg.ProgressOut = env.stderr
	if env.memoryLimit != nil {
		env.memoryLimit(cfg.MemoryLimit(), log)
	}
	return daemon.Run(ctx, cfg.Config, ln, env.stdout, log)
}

// defaultKVStoreDir is where the node's SSD KV store lives without
// --kv-store-dir: hearth up keeps it there, hearth doctor and hearth
// kvstore look there.
func defaultKVStoreDir(dataDir string) string {
	return filepath.Join(dataDir, "kvstore")
}

func parseUpFlags(env *environment, args []string) (upConfig, error) {
	fs := newFlagSet(env, "up", "up --sim 2x4090 [flags]")
	cfg := upConfig{Config: daemon.Config{Aliases: map[string]string{}, Version: version}}
	fs.StringVar(&cfg.Sim, "sim", "", `simulated GPUs to serve from, e.g. "2x4090" or "1x4090+2x3090"`)
	fs.StringVar(&cfg.EngineRuntime, "engine-runtime", "", "how engines run: sim (simulated, inside the daemon; the default with --sim), docker (containers; the default with --engine) or process (child processes)")
	fs.StringVar(&cfg.Engine, "engine", "", "the engine to run on --gpus: vllm or sglang; with --sim and --engine-runtime docker, the engine the simulated image passes for")
	gpuList := fs.String("gpus", "all", "GPUs for --engine: all, or CUDA device indices or UUIDs, e.g. 0,1; one engine per GPU (per --tp GPUs)")
	fs.IntVar(&cfg.TP, "tp", 1, "GPUs per engine: tensor parallelism splits the model over several, for a model too large for one GPU or a longer context and more sessions at once (simulated engines too)")
	fs.StringVar(&cfg.KVCacheDtype, "kv-cache-dtype", catalog.KVCacheAuto, "engines' KV cache dtype: auto (the model's, BF16) or fp8 (half the bytes per token: twice the context and sessions)")
	fs.BoolVar(&cfg.RopeScaling, "rope-scaling", false, "serve the model's longer context with YaRN rope scaling where it has one (Qwen3: 131,072 tokens instead of 40,960)")
	fs.StringVar(&cfg.Image, "image", "", "engine image for --engine-runtime docker (default: the engine's pinned image for the driver's CUDA version)")
	fs.StringVar(&cfg.HFCache, "hf-cache", defaultHFCache(env.getenv), "Hugging Face cache mounted into engine containers")
	fs.StringVar(&cfg.GPURuntime, "gpu-runtime", "", "nvidia (containers get their GPU through the NVIDIA runtime) or none (no GPU: for the simulated images; the default with --sim)")
	fs.StringVar(&cfg.Node, "node", "", "this machine's name in engine names and container labels (default: the host name)")
	fs.BoolVar(&cfg.KeepEngines, "keep-engines", false, "leave engine containers running when the daemon stops, so the next start adopts them without reloading weights")
	fs.Var(config.Repeatable(func(s string) error {
		cfg.EngineArgs = append(cfg.EngineArgs, s)
		return nil
	}), "engine-arg", "an argument appended to every engine's command line (repeatable)")
	fs.IntVar(&cfg.MaxModelLen, "max-model-len", 0, "context length of each engine (0: the engine's default)")
	fs.DurationVar(&cfg.StopTimeout, "stop-timeout", 30*time.Second, "how long a stopping engine may take before it is killed")
	fs.StringVar(&cfg.Listen, "listen", defaultListen, "address of the API (OpenAI and Anthropic)")
	registerClusterFlags(fs, &cfg.Cluster)
	joinFile := fs.String("join-file", "", "read the --join token from this file, or from standard input with -, where no process list shows it")
	fs.StringVar(&cfg.Policy, "policy", router.PolicyHearth, "routing policy: "+strings.Join(router.PolicyNames(), ", "))
	fs.StringVar(&cfg.DataDir, "data-dir", "", "where Hearth keeps its state (default $XDG_DATA_HOME/hearth or ~/.local/share/hearth)")
	modelList := fs.String("model", "", "served model ("+strings.Join(sim.ModelNames(), ", ")+" when simulated; default: the largest that fits the smallest GPU, qwen3-14b-fp8 on 24 GB); several, separated by commas, are served by the GPUs in turn")
	fs.Float64Var(&cfg.Speedup, "speedup", 1, "run the simulated GPUs this many times faster than real time")
	fs.Float64Var(&cfg.KVOffloadGiB, "kv-offloading-size", 32, "host RAM per engine for KV blocks evicted from the GPU, in GiB, as vLLM's flag (default for real engines: planned from the host's memory; 32 for simulated ones)")
	fs.StringVar(&cfg.Tiers, "kvbm", kvbm.TiersRAMSSD, "KV tiers below the GPU: off, ram (host RAM per engine) or ram+ssd (and the node's SSD store, shared by its engines)")
	fs.StringVar(&cfg.KVStoreDir, "kv-store-dir", "", "the node's SSD KV store (default: kvstore in the data directory)")
	fs.Float64Var(&cfg.KVStoreGiB, "kv-store-size", 0, "capacity of the SSD KV store in GiB (0: 10% of the disk's free space, at most 256 GiB)")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the simulated engines")
	fs.BoolVar(&cfg.Profile, "pprof", false, "serve Go's runtime profiles under /debug/pprof/ on the API, to an admin API key or the local token (simulated engines run as processes serve theirs on their own port)")
	fs.BoolVar(&cfg.SimAgent.AllowWriteTools, "sim-allow-write-tools", false, "let the simulated model call tools that write, edit or run commands (it only reads otherwise)")
	fs.Func("sim-tool-calls", "tool calls the simulated model makes per task before answering, N or N-M (default 3-6)", cfg.SimAgent.ParseToolCallRange)
	fs.Var(config.Repeatable(func(s string) error {
		if s == "" {
			return errors.New("empty key")
		}
		cfg.APIKeys = append(cfg.APIKeys, s)
		return nil
	}), "api-key", "require this API key from clients (repeatable; also $"+daemon.ServerKeysEnv+", keys separated by commas; keys created in the console are kept in the data directory)")
	fs.StringVar(&cfg.TLS, "tls", daemon.TLSOff, "serve HTTPS: auto (a certificate from Hearth's own CA, kept in the data directory as tls/ca.pem) or off; needed to listen beyond loopback")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "serve HTTPS with this certificate (PEM, with its chain); needs --tls-key")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	fs.BoolVar(&cfg.InsecureLAN, "insecure-lan", false, "allow plain HTTP on an address beyond loopback (keys and passwords then cross the network in clear)")
	fs.Var(config.Repeatable(func(s string) error {
		name, target, ok := strings.Cut(s, "=")
		if !ok || name == "" || target == "" {
			return fmt.Errorf("want NAME=MODEL, got %q", s)
		}
		cfg.Aliases[name] = target
		return nil
	}), "alias", `map a client's model name to the served one, NAME=MODEL; NAME may be a pattern such as "claude-*" (repeatable; default "*" maps every name)`)
	fs.StringVar(&cfg.agent.client, "agent", "", "choose --tp, --kv-cache-dtype and --rope-scaling for this coding-agent client, as hearth plan --agent recommends them: "+
		strings.Join(bench.ClientPresetNames(), ", ")+" (the flags given override the recommendation)")
	fs.IntVar(&cfg.agent.sessions, "agent-sessions", 4, "with --agent: the client's sessions at once to choose the layout for")
	inferHints := fs.String("infer-hints", "on", "on or off: give requests the agent hints their client did not send, inferred from their traffic (side requests after turns); off to compare")
	verbose := fs.Bool("v", false, "log debug messages")
	fs.StringVar(&cfg.logFormat, "log-format", logFormatText, "log format: text (for people) or json (one object a line, for machines)")
	if err := upConfigFlags(env, fs, args); err != nil {
		return cfg, err
	}
	if err := readJoinFile(env, &cfg.Cluster.Join, *joinFile); err != nil {
		return cfg, err
	}
	switch *inferHints {
	case "on", "off":
		cfg.NoInferredHints = *inferHints == "off"
	default:
		return cfg, fmt.Errorf("%w: --infer-hints %q: want on or off", errUsage, *inferHints)
	}
	if cfg.agent.client != "" {
		if !slices.Contains(bench.ClientPresetNames(), cfg.agent.client) {
			return cfg, fmt.Errorf("%w: --agent %q: want one of %s", errUsage, cfg.agent.client, strings.Join(bench.ClientPresetNames(), ", "))
		}
		if cfg.agent.sessions < 1 || cfg.agent.sessions > 64 {
			return cfg, fmt.Errorf("%w: --agent-sessions %d: want 1 to 64", errUsage, cfg.agent.sessions)
		}
		set := flagsSet(fs)
		for _, name := range layoutFlagNames {
			if set[name] {
				cfg.agent.explicit = append(cfg.agent.explicit, name)
			}
		}
	}
	if cfg.EngineRuntime == "" {
		cfg.EngineRuntime = "sim"
		if cfg.Sim == "" {
			cfg.EngineRuntime = "docker"
		}
	}
	if cfg.Engine == "" && cfg.Sim != "" && cfg.EngineRuntime == "docker" {
		cfg.Engine = string(hruntime.KindVLLM)
	}
	if cfg.GPURuntime == "" {
		cfg.GPURuntime = "nvidia"
		if cfg.Sim != "" {
			cfg.GPURuntime = "none"
		}
	}
	if cfg.Sim == "" && *gpuList != "all" && *gpuList != "" {
		gpus, err := parseGPUList(*gpuList)
		if err != nil {
			return cfg, fmt.Errorf("%w: --gpus: %v", errUsage, err)
		}
		cfg.GPUs = gpus
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	switch cfg.Tiers {
	case kvbm.TiersOff:
		cfg.KVOffloadGiB = 0
	case kvbm.TiersRAM, kvbm.TiersRAMSSD:
		cfg.KVOffloadAuto = cfg.Sim == "" && !flagsSet(fs)["kv-offloading-size"]
	}
	if cfg.logFormat != logFormatText && cfg.logFormat != logFormatJSON {
		return cfg, fmt.Errorf("%w: unknown --log-format %q (known: text, json)", errUsage, cfg.logFormat)
	}
	// The server's keys come from its own variable: HEARTH_API_KEY is what
	// the printed client settings tell clients to export, and a daemon
	// started from such a shell must not start asking for that key.
	for _, key := range strings.Split(env.getenv(daemon.ServerKeysEnv), ",") {
		if key = strings.TrimSpace(key); key != "" {
			cfg.APIKeys = append(cfg.APIKeys, key)
		}
	}
	if *modelList == "" {
		*modelList = defaultModel(cfg.Sim)
	}
	for _, m := range strings.Split(*modelList, ",") {
		m = strings.TrimSpace(m)
		if known, ok := catalog.LookupModel(m); ok {
			m = known.Name // "Qwen/Qwen3-14B-FP8" is served as qwen3-14b-fp8
		} else if cfg.EngineRuntime != "sim" && m != "" {
			if err := docker.CheckModel(m); err != nil {
				return cfg, fmt.Errorf("%w: --model: %v", errUsage, err)
			}
		}
		if m != "" && !slices.Contains(cfg.Models, m) {
			cfg.Models = append(cfg.Models, m)
		}
	}
	if len(cfg.Models) == 0 {
		return cfg, fmt.Errorf("%w: --model is empty", errUsage)
	}
	cfg.Model = cfg.Models[0]
	if len(cfg.Aliases) == 0 {
		cfg.Aliases["*"] = cfg.Model
	}
	if cfg.DataDir == "" {
		cfg.DataDir = defaultDataDir(env.getenv)
	}
	if cfg.Tiers != kvbm.TiersRAMSSD {
		cfg.KVStoreDir = ""
	} else if cfg.KVStoreDir == "" {
		cfg.KVStoreDir = defaultKVStoreDir(cfg.DataDir)
	}
	if cfg.KVStoreDir != "" {
		// Engines in containers mount it at the same path.
		abs, err := filepath.Abs(cfg.KVStoreDir)
		if err != nil {
			return cfg, fmt.Errorf("%w: --kv-store-dir: %v", errUsage, err)
		}
		cfg.KVStoreDir = abs
	}
	if *verbose {
		cfg.logLevel = slog.LevelDebug
	}
	cfg.HFToken = env.getenv("HF_TOKEN")
	if cfg.Node == "" {
		cfg.Node, _ = os.Hostname()
	}
	return cfg, nil
}

// readJoinFile sets join from --join-file: the file's first line, or
// standard input's with "-".
func readJoinFile(env *environment, join *string, path string) error {
	if path == "" {
		return nil
	}
	if *join != "" {
		return fmt.Errorf("%w: --join and --join-file both give a token: keep one", errUsage)
	}
	var r io.Reader
	if path == "-" {
		if env.stdin == nil {
			return fmt.Errorf("%w: --join-file -: no standard input", errUsage)
		}
		r = env.stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("%w: --join-file: %v", errUsage, err)
		}
		defer f.Close()
		r = f
	}
	line, err := bufio.NewReader(io.LimitReader(r, 64<<10)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("--join-file: %w", err)
	}
	if *join = strings.TrimSpace(line); *join == "" {
		return fmt.Errorf("%w: --join-file %s holds no token", errUsage, path)
	}
	return nil
}

// parseGPUList reads --gpus: CUDA device indices or NVML UUIDs
// ("GPU-…"), separated by commas. A GPU named by UUID is numbered by its
// place in the list.
func parseGPUList(s string) ([]daemon.GPURef, error) {
	var out []daemon.GPURef
	seen := map[string]bool{}
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		var g daemon.GPURef
		switch n, err := strconv.Atoi(f); {
		case f == "all":
			return nil, errors.New(`"all" stands alone: every GPU, or name them, e.g. 0,1`)
		case err == nil && n >= 0:
			g.Index = n
		case strings.HasPrefix(f, "GPU-") && len(f) > len("GPU-"):
			g = daemon.GPURef{Index: i, UUID: f}
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
