package daemon

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/cluster"
	"github.com/hearth-llm/hearth/installer"
	"github.com/hearth-llm/hearth/installer/config"
	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/models"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// hearth up's command line: every flag, its default and its help, defined
// once here for hearth up, hearth config (which prints them), hearth
// install (which writes them as a configuration file) and hearth upgrade
// (which reads the installed one). A flag is added here, its value turned
// into Config fields and defaults filled in Complete, and checked in
// Validate.

// DefaultListen is the API's address without --listen; hearth doctor
// checks that it is free.
const DefaultListen = "127.0.0.1:8000"

// ConfigEnv names the configuration file of hearth up, like --config.
const ConfigEnv = "HEARTH_CONFIG"

// Log formats (--log-format): text for people, json (one object a line)
// for machines.
const (
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// Env is what hearth up's configuration reads beyond its command line.
type Env struct {
	// Getenv reads the process's environment (nil: nothing is set).
	Getenv func(string) string
	// Stdin is read by --join-file -.
	Stdin io.Reader
	// Notes receives what the configuration says it did not take as
	// written (nil: nowhere): a configuration file's engine under --sim, a
	// hub directory given as --hf-cache.
	Notes io.Writer
	// ConfigFile is read when neither --config nor $HEARTH_CONFIG names a
	// file, and only when it exists ("": none, as tests must not read the
	// machine's).
	ConfigFile string
}

func (e Env) getenv(name string) string {
	if e.Getenv == nil {
		return ""
	}
	return e.Getenv(name)
}

func (e Env) note(format string, args ...any) {
	if e.Notes != nil {
		fmt.Fprintf(e.Notes, format+"\n", args...)
	}
}

// commandLine is what the flags give as text that Complete turns into
// Config fields, and which flags the command line set itself.
type commandLine struct {
	configFile string
	gpus       string
	models     string
	joinFile   string
	inferHints string
	verbose    bool
	// layoutGiven names the explicit layout flags set anywhere: the
	// command line, the environment or the configuration file.
	layoutGiven []string
	// set names the flags given on the command line (not those from the
	// environment or the configuration file).
	set map[string]bool
}

// Flags is hearth up's command line bound to a Config (RegisterFlags).
type Flags struct {
	fs  *flag.FlagSet
	cfg *Config
	env Env
}

// RegisterFlags defines hearth up's flags on fs, each with its default, to
// be parsed into cfg (Flags.Parse, then cfg.Complete).
func RegisterFlags(fs *flag.FlagSet, cfg *Config, env Env) *Flags {
	cl := &cfg.cmdline
	fs.StringVar(&cl.configFile, "config", "", "TOML file of hearth up's flags, one key per flag (default: "+installer.ConfigPath+" when it exists; also $"+ConfigEnv+"); flags and HEARTH_* variables override it")

	// What to serve from, and how engines run.
	fs.StringVar(&cfg.Sim, "sim", "", `simulated GPUs to serve from, e.g. "2x4090" or "1x4090+2x3090"`)
	fs.StringVar(&cfg.EngineRuntime, "engine-runtime", "", "how engines run: sim (simulated, inside the daemon; the default with --sim), docker (containers; the default with --engine) or process (child processes)")
	fs.StringVar(&cfg.Engine, "engine", "", "the engine to run on --gpus: vllm or sglang; with --sim and --engine-runtime docker, the engine the simulated image passes for")
	fs.StringVar(&cl.gpus, "gpus", "all", "GPUs for --engine: all, or CUDA device indices or UUIDs, e.g. 0,1; one engine per GPU (per --tp GPUs)")
	fs.IntVar(&cfg.TP, "tp", 1, "GPUs per engine: tensor parallelism splits the model over several, for a model too large for one GPU or a longer context and more sessions at once (simulated engines too)")
	fs.StringVar(&cfg.KVCacheDtype, "kv-cache-dtype", catalog.KVCacheAuto, "engines' KV cache dtype: auto (the model's, BF16) or fp8 (half the bytes per token: twice the context and sessions)")
	fs.BoolVar(&cfg.RopeScaling, "rope-scaling", false, "serve the model's longer context with YaRN rope scaling where it has one (Qwen3: 131,072 tokens instead of 40,960)")
	fs.StringVar(&cfg.Image, "image", "", "engine image for --engine-runtime docker (default: the engine's pinned image for the driver's CUDA version)")
	fs.StringVar(&cfg.HFCache, "hf-cache", catalog.HFHome(env.getenv), "Hugging Face home (HF_HOME, models under its hub/), mounted into engine containers")
	fs.StringVar(&cfg.GPURuntime, "gpu-runtime", "", "nvidia (containers get their GPU through the NVIDIA runtime) or none (no GPU: for the simulated images; the default with --sim)")
	fs.StringVar(&cfg.Node, "node", "", "this machine's name in engine names and container labels (default: the host name)")
	fs.BoolVar(&cfg.KeepEngines, "keep-engines", false, "leave engine containers running when the daemon stops, so the next start adopts them without reloading weights")
	fs.Var(config.Repeatable(func(s string) error {
		cfg.EngineArgs = append(cfg.EngineArgs, s)
		return nil
	}), "engine-arg", "an argument appended to every engine's command line (repeatable)")
	fs.IntVar(&cfg.MaxModelLen, "max-model-len", 0, "context length of each engine (0: the longest the layout's KV cache holds, up to the model's)")
	fs.StringVar(&cfg.Layout, "layout", LayoutAgent, "the engines' layout when no --tp, --kv-cache-dtype, --rope-scaling or --max-model-len is given: agent (the layout for coding agents: tensor parallelism, FP8 KV and YaRN where they give the agents' sessions more room) or per-gpu (one engine per GPU with the model's KV dtype)")
	fs.DurationVar(&cfg.StopTimeout, "stop-timeout", 30*time.Second, "how long a stopping engine may take before it is killed")
	fs.StringVar(&cl.models, "model", "", "served model ("+strings.Join(sim.ModelNames(), ", ")+" when simulated; default: the largest that fits the smallest GPU, qwen3-14b-fp8 on 24 GB); several, separated by commas, are served by the GPUs in turn, and more than the GPUs hold load on demand, the idle ones asleep (see --keep-alive)")
	fs.DurationVar(&cfg.OnDemand.KeepAlive, "keep-alive", models.DefaultKeepAlive, "with more --model than the GPUs hold at once: how long an idle model stays loaded before it sleeps. Long by default because an agent's loop is idle while its tools run (builds, tests) and while its user reads: a shorter one makes the next turn wait for a swap")
	fs.Var(config.Repeatable(func(s string) error {
		cfg.OnDemand.Pinned = appendNames(cfg.OnDemand.Pinned, s)
		return nil
	}), "pin", "a model never put to sleep to make room for another (repeatable, or names separated by commas)")
	fs.Var(config.Repeatable(func(s string) error {
		cfg.OnDemand.Preload = appendNames(cfg.OnDemand.Preload, s)
		return nil
	}), "preload", "a model loaded at start; the others load on their first request (repeatable, or names separated by commas; default: the first --model of each GPU)")
	fs.DurationVar(&cfg.OnDemand.Wait, "model-wait", 2*time.Minute, "how long a request for a model that is not loaded waits for it (streams get keep-alives meanwhile) before the overloaded error with Retry-After")
	fs.Float64Var(&cfg.Speedup, "speedup", 1, "run the simulated GPUs this many times faster than real time")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the simulated engines")
	fs.BoolVar(&cfg.SimAgent.AllowWriteTools, "sim-allow-write-tools", false, "let the simulated model call tools that write, edit or run commands (it only reads otherwise)")
	fs.Func("sim-tool-calls", "tool calls the simulated model makes per task before answering, N or N-M (default 3-6)", cfg.SimAgent.ParseToolCallRange)

	// KV tiers below the GPU.
	fs.Float64Var(&cfg.KVOffloadGiB, "kv-offloading-size", kvbm.DefaultSimRAMGiB, fmt.Sprintf("host RAM per engine for KV blocks evicted from the GPU, in GiB, as vLLM's flag (default for real engines: planned from the host's memory; %d for simulated ones)", kvbm.DefaultSimRAMGiB))
	fs.StringVar(&cfg.Tiers, "kvbm", kvbm.DefaultTiers, "KV tiers below the GPU: off, ram (host RAM per engine) or ram+ssd (and the node's SSD store, shared by its engines)")
	fs.StringVar(&cfg.KVStoreDir, "kv-store-dir", "", "the node's SSD KV store (default: kvstore in the data directory)")
	fs.Float64Var(&cfg.KVStoreGiB, "kv-store-size", 0, "capacity of the SSD KV store in GiB (0: 10% of the disk's free space, at most 256 GiB)")

	// The API, its keys and TLS.
	fs.StringVar(&cfg.Listen, "listen", DefaultListen, "address of the API (OpenAI and Anthropic)")
	fs.StringVar(&cfg.Policy, "policy", router.PolicyHearth, "routing policy: "+strings.Join(router.PolicyNames(), ", "))
	fs.StringVar(&cfg.DataDir, "data-dir", "", "where Hearth keeps its state (default $XDG_DATA_HOME/hearth or ~/.local/share/hearth)")
	fs.Var(config.Repeatable(func(s string) error {
		if s == "" {
			return errors.New("empty key")
		}
		cfg.APIKeys = append(cfg.APIKeys, s)
		return nil
	}), "api-key", "require this API key from clients (repeatable; also $"+ServerKeysEnv+", keys separated by commas; keys created in the console are kept in the data directory)")
	fs.StringVar(&cfg.TLS, "tls", TLSOff, "serve HTTPS: auto (a certificate from Hearth's own CA, kept in the data directory as tls/ca.pem) or off; needed to listen beyond loopback")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "serve HTTPS with this certificate (PEM, with its chain); needs --tls-key")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	fs.BoolVar(&cfg.InsecureLAN, "insecure-lan", false, "allow plain HTTP on an address beyond loopback (keys and passwords then cross the network in clear)")
	fs.Var(config.Repeatable(func(s string) error {
		name, target, ok := strings.Cut(s, "=")
		if !ok || name == "" || target == "" {
			return fmt.Errorf("want NAME=MODEL, got %q", s)
		}
		if cfg.Aliases == nil {
			cfg.Aliases = map[string]string{}
		}
		cfg.Aliases[name] = target
		return nil
	}), "alias", `map a client's model name to the served one, NAME=MODEL; NAME may be a pattern such as "claude-*" (repeatable; default "*" maps every name)`)
	fs.BoolVar(&cfg.Profile, "pprof", false, "serve Go's runtime profiles under /debug/pprof/ on the API, to an admin API key or the local token (simulated engines run as processes serve theirs on their own port)")
	fs.StringVar(&cl.inferHints, "infer-hints", "on", "on or off: give requests the agent hints their client did not send, inferred from their traffic (side requests after turns); off to compare")

	// The cluster.
	c := &cfg.Cluster
	fs.StringVar(&c.Join, "join", "", "join the cluster of the token `hearth cluster token` printed on its first node")
	fs.StringVar(&cl.joinFile, "join-file", "", "read the --join token from this file, or from standard input with -, where no process list shows it")
	fs.StringVar(&c.AskJoin, "ask-join", "", "ask to join the cluster of the node at `HOST[:PORT]` (its cluster port, default "+strconv.Itoa(DefaultClusterPort)+"), or auto to find it with mDNS; its owner accepts after comparing the code both print")
	fs.StringVar(&c.Listen, "cluster-listen", net.JoinHostPort("0.0.0.0", strconv.Itoa(DefaultClusterPort)), "address of the cluster port (joins and the engine proxy, TLS), when this node belongs to a cluster")
	fs.StringVar(&c.RouteListen, "cluster-routes-listen", net.JoinHostPort("0.0.0.0", strconv.Itoa(DefaultRoutePort)), "address of the cluster's NATS routes (mutual TLS)")
	fs.StringVar(&c.AdvertiseHost, "advertise-host", "", "the address peers reach this node at (default: the first LAN address of --advertise-iface or of any LAN interface)")
	fs.StringVar(&c.AdvertiseIface, "advertise-iface", "", "the interface to announce on with mDNS and advertise (default: every LAN interface; loopback, docker0, bridges and veths only when named here)")
	fs.BoolVar(&c.MDNS, "mdns", true, "announce this node with mDNS (_hearth._tcp) and find the cluster's peers on the LAN")
	fs.Var(config.Repeatable(func(s string) error {
		route, err := PeerRoute(s)
		if err != nil {
			return err
		}
		c.Peers = append(c.Peers, route)
		return nil
	}), "peer", "a node of this node's cluster at `HOST[:PORT]` (its cluster routes port, default "+strconv.Itoa(DefaultRoutePort)+
		"), tried at every start and retried while it is away: the cluster forms without mDNS, where multicast does not pass (WSL2, Wi-Fi, VLANs) (repeatable; in hearth.toml, a list of them)")
	fs.Var(config.Repeatable(func(s string) error {
		mac, err := cluster.ParseWakeMAC(s)
		if err != nil {
			return err
		}
		c.Wake = append(c.Wake, mac.String())
		return nil
	}), "wake", "the `MAC` address of a rig that sleeps: while requests wait for KV room here, a Wake-on-LAN packet wakes it, at most every 2 minutes (repeatable; in hearth.toml, a list of them)")
	fs.StringVar(&c.WakeAddr, "wake-addr", cluster.DefaultWakeAddr, "where --wake's packets go: the LAN's broadcast `HOST:PORT` (a directed broadcast such as 192.168.1.255:9 where the limited one does not leave the machine)")

	// The layout for a coding-agent client.
	fs.StringVar(&cfg.Agent.Client, "agent", "", "choose --tp, --kv-cache-dtype and --rope-scaling for this coding-agent client, as hearth plan --agent recommends them: "+
		strings.Join(catalog.AgentClientIDs(), ", ")+" (the flags given override the recommendation)")
	fs.IntVar(&cfg.Agent.Sessions, "agent-sessions", 4, "with --agent: the client's sessions at once to choose the layout for")

	// Logs.
	fs.BoolVar(&cl.verbose, "v", false, "log debug messages")
	fs.StringVar(&cfg.LogFormat, "log-format", LogFormatText, "log format: text (for people) or json (one object a line, for machines)")

	config.TrackValues(fs)
	return &Flags{fs: fs, cfg: cfg, env: env}
}

// Settings is every flag of hearth up with its value and where the value
// came from, and the configuration file read ("" for none).
type Settings struct {
	File  string
	Flags []config.Setting
}

// Parse parses hearth up's command line args, then fills the flags it left
// unset from the HEARTH_* variables and the configuration file: --config,
// else $HEARTH_CONFIG, else the Env's ConfigFile when it exists. A usage
// error wraps ErrUsage.
func (f *Flags) Parse(args []string) (Settings, error) {
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Settings{}, err
		}
		return Settings{}, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if f.fs.NArg() > 0 {
		return Settings{}, fmt.Errorf("%w: unexpected argument %q", ErrUsage, f.fs.Arg(0))
	}
	cl := &f.cfg.cmdline
	cl.set = map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { cl.set[fl.Name] = true })
	path, required := cl.configFile, true
	if path == "" {
		path = f.env.getenv(ConfigEnv)
	}
	if path == "" {
		path, required = f.env.ConfigFile, false
	}
	settings, err := config.Apply(f.fs, config.Sources{
		File: path, Required: required, Getenv: f.env.Getenv,
		// HEARTH_API_KEY is the key clients send; the server's keys
		// have their own variable (ServerKeysEnv).
		NoEnv: []string{"api-key"},
		Skip:  []string{"config"},
	})
	if err != nil {
		return Settings{}, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	given := map[string]bool{}
	for _, s := range settings {
		given[s.Name] = s.Source != config.SourceDefault
	}
	cl.layoutGiven = layoutGivenIn(func(name string) bool { return given[name] })
	if err := simOverridesFileEngine(f.fs, settings, f.env); err != nil {
		return Settings{}, err
	}
	addServerKeys(settings, f.env.getenv(ServerKeysEnv))
	if _, err := os.Stat(path); err != nil {
		path = ""
	}
	return Settings{File: path, Flags: settings}, nil
}

// realGPUKeys are what the installed configuration file sets for real
// GPUs served from containers (installer.ServiceConfig), and what hearth
// up refuses next to simulated GPUs in the daemon.
var realGPUKeys = []string{"engine", "keep-engines"}

// simOverridesFileEngine lets sim, set anywhere, run simulated GPUs in the
// daemon although the configuration file chooses an engine and keeps its
// containers: those values from the file are for real GPUs, and give way
// (said in the Env's notes) unless the engine runtime is set too, which
// asks for the simulated images and takes them. Set on the command line or
// in the environment, they still meet hearth up's checks.
func simOverridesFileEngine(fs *flag.FlagSet, settings []config.Setting, env Env) error {
	byName := map[string]*config.Setting{}
	for i := range settings {
		byName[settings[i].Name] = &settings[i]
	}
	sim, runtime := byName["sim"], byName["engine-runtime"]
	if sim == nil || runtime == nil || sim.Source == config.SourceDefault || slices.Equal(sim.Values, []string{""}) ||
		runtime.Source != config.SourceDefault {
		return nil
	}
	for _, name := range realGPUKeys {
		s, f := byName[name], fs.Lookup(name)
		if s == nil || f == nil || s.Source != config.SourceFile {
			continue
		}
		if err := f.Value.Set(f.DefValue); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		env.note("hearth up: sim is set, so %s = %s from %s (for real GPUs) is not used; engine-runtime = \"docker\" would run the simulated images with it",
			name, strings.Join(s.Values, ","), s.Origin)
		s.Values, s.Source, s.Origin = []string{f.DefValue}, config.SourceDefault, "(the file's value is for real GPUs)"
	}
	return nil
}

// addServerKeys shows in api-key's setting the keys Complete adds from
// $HEARTH_SERVER_API_KEYS, which config.Apply does not read.
func addServerKeys(settings []config.Setting, keys string) {
	for i := range settings {
		s := &settings[i]
		if s.Name != "api-key" {
			continue
		}
		added := false
		for _, k := range strings.Split(keys, ",") {
			if k = strings.TrimSpace(k); k != "" {
				s.Values, added = append(s.Values, k), true
			}
		}
		switch {
		case !added:
		case s.Source == config.SourceDefault:
			s.Source, s.Origin = config.SourceEnv, ServerKeysEnv
		default:
			s.Origin = strings.TrimSpace(s.Origin + " and env " + ServerKeysEnv)
		}
	}
}

// SecretFlag reports whether a flag's values must not be printed: keys,
// passwords and the join token.
func SecretFlag(name string) bool {
	if name == "join" {
		return true
	}
	for _, w := range []string{"key", "token", "password", "secret"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// ConfigTemplate is the configuration file hearth install writes: every
// flag of hearth up, commented, with values set where values names them.
// The defaults are the ones hearth up has with an empty environment, so
// the file does not depend on who ran the install.
func ConfigTemplate(values map[string][]string) ([]byte, error) {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	RegisterFlags(fs, &Config{}, Env{})
	return config.Template(fs, values, "config")
}

// appendNames adds the names of a comma-separated list to names, once each.
func appendNames(names []string, list string) []string {
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}
