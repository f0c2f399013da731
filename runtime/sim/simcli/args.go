package simcli

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/catalog"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// The command lines of the real engines, `vllm serve MODEL [flags]` and
// `python3 -m sglang.launch_server [flags]` (or `sglang serve`), parsed the
// way their argparse parsers do, into a simulated engine of that flavour.
// Flags the simulator models set its configuration; other real flags are
// accepted and ignored; anything else is an error, exit status 2.

// Settings only the simulator has come from the environment
// (runtime.ParseSimEnv): the real command lines have no place for them.

// envSGLangHealthTimeout is SGLang's own bound on /health_generate, in
// seconds.
const envSGLangHealthTimeout = "SGLANG_HEALTH_CHECK_TIMEOUT"

// Defaults of the real engines.
const (
	vllmDefaultPort   = 8000
	sglangDefaultPort = 30000
	// vLLM binds every interface unless told a host; SGLang binds loopback.
	vllmDefaultHost   = "0.0.0.0"
	sglangDefaultHost = "127.0.0.1"
	// The publisher's endpoint when --kv-events-config names none.
	defaultKVEventsEndpoint = "tcp://*:5557"
)

// engineCommand is a parsed engine command line: what the simulated engine
// runs as.
type engineCommand struct {
	flavor    hruntime.Kind
	prog      string // as argparse names it in messages: "vllm serve", "launch_server.py"
	modelPath string // as given on the command line
	served    string
	host      string
	port      int
	cfg       sim.Config
	// kvEvents, kvReplay and topic are the publisher's sockets; kvEvents is
	// empty when the configuration publishes nothing.
	kvEvents, kvReplay, topic string
	startupDelay              time.Duration
	failure                   sim.Failure
	speedup                   float64
	healthTimeout             time.Duration
	engineVersion             string // the release played (runtime.EnvSimEngineVersion)
	kvEventFault              string // a fault the KV events play (runtime.EnvSimKVEvents)
	kvComponentTypes          bool   // SGLang's --enable-kv-events-component-types
	// memAvailable is the host memory available the engine sees, in
	// bytes (runtime.EnvSimMemAvailableGiB); 0 reads the machine's.
	memAvailable uint64
	// serverArgs are the SGLang server arguments the simulator shows but
	// does not model.
	serverArgs map[string]any
	help       bool
	// sleepMode is vLLM's --enable-sleep-mode or SGLang's
	// --enable-memory-saver; weightsBackup SGLang's
	// --enable-weights-cpu-backup (sim.InstanceOptions).
	sleepMode, weightsBackup bool

	// Parse state.
	kvEventsConfig string
	hierarchical   bool
	hicacheGB      int
	hicacheRatio   float64
	hicacheStorage string // --hicache-storage-backend
	// storeDir is the node KV store SGLang's file backend writes to
	// (SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR); "" when it has none.
	storeDir         string
	priorityRequired bool // SGLang: --schedule-policy priority without --enable-priority-scheduling
	lowPriorityFirst bool // SGLang: --schedule-low-priority-values-first
}

// usageError is a command line the engine's argparse would refuse: exit 2.
type usageError struct {
	prog, usage, msg string
}

func (e *usageError) Error() string {
	return fmt.Sprintf("usage: %s\n%s: error: %s", e.usage, e.prog, e.msg)
}

// engineFlag is one option of an engine's parser.
type engineFlag struct {
	names []string
	// value: the option takes an argument; multi: one or more (nargs="+").
	value, multi bool
	// set applies the option; nil accepts and ignores it. It gets "" for an
	// option without a value.
	set func(c *engineCommand, v string) error
}

// valueFlags and boolFlags make entries for flags the simulator accepts but
// does not model.
func valueFlags(names ...string) []engineFlag {
	out := make([]engineFlag, len(names))
	for i, n := range names {
		out[i] = engineFlag{names: []string{n}, value: true}
	}
	return out
}

func boolFlags(names ...string) []engineFlag {
	out := make([]engineFlag, len(names))
	for i, n := range names {
		out[i] = engineFlag{names: []string{n}}
	}
	return out
}

// simFlags are the simulator's own options, the same for both engines.
var simFlags = []engineFlag{
	{names: []string{"--simulate-startup"}, value: true, set: func(c *engineCommand, v string) error {
		d, err := parseDelay(v)
		c.startupDelay = d
		return err
	}},
	{names: []string{"--simulate-failure"}, value: true, set: func(c *engineCommand, v string) error {
		f, err := sim.ParseFailure(v)
		if err != nil || f == sim.FailureNone {
			return fmt.Errorf("invalid choice: '%s' (choose from 'oom', 'exit')", v)
		}
		c.failure = f
		return nil
	}},
}

// parseDelay reads a Go duration ("90s", "1m30s") or a number of seconds.
func parseDelay(v string) (time.Duration, error) {
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d, nil
	}
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || s < 0 || math.IsInf(s, 0) || math.IsNaN(s) {
		return 0, fmt.Errorf("invalid duration value: '%s'", v)
	}
	return time.Duration(s * float64(time.Second)), nil
}

func setInt(dst *int) func(*engineCommand, string) error {
	return func(_ *engineCommand, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("invalid int value: '%s'", v)
		}
		*dst = n
		return nil
	}
}

// humanInt reads the engines' human-readable integers: "40960", "32k"
// (×1000), "32K" (×1024), likewise m/M and g/G.
func humanInt(v string) (int, error) {
	mult := 1.0
	num := v
	if n := len(v); n > 0 {
		switch v[n-1] {
		case 'k':
			mult = 1e3
		case 'K':
			mult = 1 << 10
		case 'm':
			mult = 1e6
		case 'M':
			mult = 1 << 20
		case 'g':
			mult = 1e9
		case 'G':
			mult = 1 << 30
		}
		if mult != 1 {
			num = v[:n-1]
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || f*mult > math.MaxInt32 {
		return 0, fmt.Errorf("invalid human_readable_int value: '%s'", v)
	}
	return int(f * mult), nil
}

func parseFloatArg(v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("invalid float value: '%s'", v)
	}
	return f, nil
}

// commonFlags are the options both engines take alike: where to serve and
// where to publish KV events.
func commonFlags() []engineFlag {
	return []engineFlag{
		{names: []string{"--host"}, value: true, set: func(c *engineCommand, v string) error { c.host = v; return nil }},
		{names: []string{"--port"}, value: true, set: func(c *engineCommand, v string) error { return setPort(c, v) }},
		{names: []string{"--kv-events-config"}, value: true, set: func(c *engineCommand, v string) error {
			c.kvEventsConfig = v
			return nil
		}},
	}
}

// fractionFlag is the engine's memory fraction under its name
// (sim.Config.GPUMemoryUtilization reads it in the engine's meaning).
func fractionFlag(name string) engineFlag {
	return engineFlag{names: []string{name}, value: true, set: func(c *engineCommand, v string) error {
		f, err := parseFloatArg(v)
		c.cfg.GPUMemoryUtilization = f
		return err
	}}
}

// contextFlag is the engine's context length under its name.
func contextFlag(name string) engineFlag {
	return engineFlag{names: []string{name}, value: true, set: func(c *engineCommand, v string) error {
		n, err := humanInt(v)
		c.cfg.MaxModelLen = n
		return err
	}}
}

// tpFlag is the engine's tensor parallel size under its names: an int, as
// both engines' argparse types it; a size below 1 is refused (vLLM and
// SGLang fail on it when they build their process groups).
func tpFlag(names ...string) engineFlag {
	return engineFlag{names: names, value: true, set: func(c *engineCommand, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("invalid int value: '%s'", v)
		}
		if n < 1 {
			return fmt.Errorf("argument %s: tensor parallel size %d must be at least 1", names[0], n)
		}
		c.cfg.TP = n
		return nil
	}}
}

// kvCacheDtypeFlag is --kv-cache-dtype with the choices the simulated
// flavour models (sim.KVCacheDtypes), refused as argparse refuses a
// choice it does not list.
func kvCacheDtypeFlag(kind hruntime.Kind) engineFlag {
	return engineFlag{names: []string{"--kv-cache-dtype"}, value: true, set: func(c *engineCommand, v string) error {
		choices := sim.KVCacheDtypes(kind)
		if !slices.Contains(choices, v) {
			return fmt.Errorf("argument --kv-cache-dtype: invalid choice: '%s' (choose from '%s')", v, strings.Join(choices, "', '"))
		}
		c.cfg.KVCacheDtype = v
		return nil
	}}
}

// overridesFlag is the engine's JSON override of the model's config.json;
// what is not a JSON object is refused, as both engines' json.loads does.
func overridesFlag(name string) engineFlag {
	return engineFlag{names: []string{name}, value: true, set: func(c *engineCommand, v string) error {
		if _, err := hruntime.ModelContextOf(v, 0); err != nil {
			return fmt.Errorf("argument %s: %v", name, err)
		}
		c.cfg.ModelOverrides = v
		return nil
	}}
}

// vllmFlags are `vllm serve`'s options as far as the simulator knows them.
func vllmFlags() []engineFlag {
	flags := append(commonFlags(), []engineFlag{
		{names: []string{"--model"}, value: true, set: func(c *engineCommand, v string) error {
			if c.modelPath != "" && c.modelPath != v {
				return errors.New("the model is given twice: as the positional model_tag and with --model")
			}
			c.modelPath = v
			return nil
		}},
		{names: []string{"--served-model-name"}, value: true, multi: true, set: func(c *engineCommand, v string) error {
			c.served = v // the first name is the one vLLM reports
			return nil
		}},
		{names: []string{"--enable-sleep-mode"}, set: func(c *engineCommand, _ string) error {
			c.sleepMode = true
			return nil
		}},
		{names: []string{"--block-size"}, value: true, set: func(c *engineCommand, v string) error {
			return setInt(&c.cfg.BlockSize)(c, v)
		}},
		fractionFlag("--gpu-memory-utilization"),
		contextFlag("--max-model-len"),
		tpFlag("--tensor-parallel-size", "-tp"),
		kvCacheDtypeFlag(hruntime.KindVLLM),
		overridesFlag("--hf-overrides"),
		{names: []string{"--kv-offloading-size"}, value: true, set: func(c *engineCommand, v string) error {
			f, err := parseFloatArg(v)
			c.cfg.CPUOffloadGiB = f // GiB, as vLLM reads it
			return err
		}},
		{names: []string{"--max-num-seqs"}, value: true, set: func(c *engineCommand, v string) error {
			return setInt(&c.cfg.MaxNumSeqs)(c, v)
		}},
		{names: []string{"--max-num-batched-tokens"}, value: true, set: func(c *engineCommand, v string) error {
			n, err := humanInt(v)
			c.cfg.MaxNumBatchedTokens = n
			return err
		}},
		{names: []string{"--num-gpu-blocks-override"}, value: true, set: func(c *engineCommand, v string) error {
			return setInt(&c.cfg.NumGPUBlocks)(c, v)
		}},
		{names: []string{"--scheduling-policy"}, value: true, set: func(c *engineCommand, v string) error {
			if v != sim.PolicyFCFS && v != sim.PolicyPriority {
				return fmt.Errorf("invalid choice: '%s' (choose from 'fcfs', 'priority')", v)
			}
			c.cfg.SchedulingPolicy = v
			return nil
		}},
	}...)
	flags = append(flags, simFlags...)
	flags = append(flags, valueFlags("--tool-call-parser", "--reasoning-parser", "--kv-offloading-backend", "--dtype",
		"--quantization", "-q", "--pipeline-parallel-size", "-pp",
		"--data-parallel-size", "-dp", "--api-key", "--chat-template", "--prefix-caching-hash-algo",
		"--download-dir", "--load-format", "--tokenizer", "--revision", "--seed", "--max-logprobs", "--uvicorn-log-level",
		"--kv-transfer-config", "--generation-config", "--swap-space", "--compilation-config", "-O",
		"--distributed-executor-backend", "--tool-parser-plugin", "--override-generation-config", "--cpu-offload-gb",
		"--root-path", "--tokenizer-mode", "--config", "--max-num-partial-prefills",
		"--long-prefill-token-threshold", "--limit-mm-per-prompt", "--speculative-config", "--hf-token")...)
	flags = append(flags, boolFlags("--enable-auto-tool-choice", "--trust-remote-code", "--enable-prefix-caching",
		"--no-enable-prefix-caching", "--enforce-eager", "--disable-log-requests", "--enable-log-requests",
		"--disable-log-stats", "--enable-chunked-prefill", "--no-enable-chunked-prefill",
		"--disable-frontend-multiprocessing", "--disable-uvicorn-access-log", "--enable-prompt-tokens-details",
		"--disable-fastapi-docs", "--async-scheduling", "--headless")...)
	return flags
}

// sglangFlags are `python3 -m sglang.launch_server`'s options as far as the
// simulator knows them.
func sglangFlags() []engineFlag {
	flags := append(commonFlags(), []engineFlag{
		{names: []string{"--model-path", "--model"}, value: true, set: func(c *engineCommand, v string) error {
			c.modelPath = v
			return nil
		}},
		{names: []string{"--served-model-name"}, value: true, set: func(c *engineCommand, v string) error { c.served = v; return nil }},
		{names: []string{"--page-size"}, value: true, set: func(c *engineCommand, v string) error {
			return setInt(&c.cfg.BlockSize)(c, v)
		}},
		fractionFlag("--mem-fraction-static"),
		contextFlag("--context-length"),
		tpFlag("--tp-size", "--tp", "--tensor-parallel-size"),
		kvCacheDtypeFlag(hruntime.KindSGLang),
		overridesFlag("--json-model-override-args"),
		{names: []string{"--enable-hierarchical-cache"}, set: func(c *engineCommand, _ string) error {
			c.hierarchical = true
			return nil
		}},
		// An int in SGLang (type=int), so a fraction is refused as there.
		{names: []string{"--hicache-size"}, value: true, set: func(c *engineCommand, v string) error {
			return setInt(&c.hicacheGB)(c, v)
		}},
		{names: []string{"--hicache-ratio"}, value: true, set: func(c *engineCommand, v string) error {
			f, err := parseFloatArg(v)
			c.hicacheRatio = f
			return err
		}},
		{names: []string{"--max-running-requests"}, value: true, set: func(c *engineCommand, v string) error {
			return setInt(&c.cfg.MaxNumSeqs)(c, v)
		}},
		{names: []string{"--chunked-prefill-size"}, value: true, set: func(c *engineCommand, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("invalid int value: '%s'", v)
			}
			if n > 0 { // -1 turns chunking off; the simulator always chunks
				c.cfg.MaxNumBatchedTokens = n
			}
			return nil
		}},
		{names: []string{"--max-total-tokens"}, value: true, set: func(c *engineCommand, v string) error {
			n, err := humanInt(v)
			c.serverArgs["max_total_tokens"] = n
			return err
		}},
		{names: []string{"--schedule-policy"}, value: true, set: func(c *engineCommand, v string) error {
			// lpm, dfs-weight and the others are scheduled first come,
			// first served by the simulator.
			c.priorityRequired = v == sim.PolicyPriority
			c.serverArgs["schedule_policy"] = v
			return nil
		}},
		{names: []string{"--enable-priority-scheduling"}, set: func(c *engineCommand, _ string) error {
			c.cfg.SchedulingPolicy = sim.PolicyPriority
			return nil
		}},
		{names: []string{"--enable-kv-events-component-types"}, set: func(c *engineCommand, _ string) error {
			c.kvComponentTypes = true
			c.serverArgs["enable_kv_events_component_types"] = true
			return nil
		}},
		{names: []string{"--enable-memory-saver"}, set: func(c *engineCommand, _ string) error {
			c.sleepMode = true
			return nil
		}},
		{names: []string{"--enable-weights-cpu-backup"}, set: func(c *engineCommand, _ string) error {
			c.weightsBackup = true
			return nil
		}},
		{names: []string{"--schedule-low-priority-values-first"}, set: func(c *engineCommand, _ string) error {
			c.lowPriorityFirst = true
			return nil
		}},
	}...)
	flags = append(flags, simFlags...)
	flags = append(flags, engineFlag{names: []string{"--hicache-storage-backend"}, value: true, set: func(c *engineCommand, v string) error {
		c.hicacheStorage = v
		c.serverArgs["hicache_storage_backend"] = v
		return nil
	}})
	ignoredValues := []string{"--tool-call-parser", "--reasoning-parser", "--hicache-write-policy",
		"--hicache-io-backend", "--hicache-mem-layout", "--hicache-storage-prefetch-policy",
		"--dp-size", "--dp", "--data-parallel-size", "--api-key",
		"--dtype", "--quantization", "--tokenizer-path", "--tokenizer-mode", "--chat-template",
		"--attention-backend", "--log-level", "--random-seed", "--load-format", "--download-dir", "--revision",
		"--cuda-graph-max-bs", "--max-prefill-tokens", "--radix-eviction-policy", "--grammar-backend",
		"--stream-interval", "--watchdog-timeout", "--dist-init-addr", "--nnodes", "--node-rank",
		"--sampling-backend", "--file-storage-path", "--config",
		"--decode-log-interval", "--speculative-algorithm", "--ep-size"}
	for _, f := range valueFlags(ignoredValues...) {
		name := strings.ReplaceAll(strings.TrimPrefix(f.names[0], "--"), "-", "_")
		f.set = func(c *engineCommand, v string) error {
			c.serverArgs[name] = v // shown in /server_info
			return nil
		}
		flags = append(flags, f)
	}
	flags = append(flags, boolFlags("--enable-metrics", "--trust-remote-code", "--enable-cache-report",
		"--disable-radix-cache", "--disable-cuda-graph", "--skip-server-warmup", "--enable-torch-compile",
		"--log-requests", "--disable-overlap-schedule", "--enable-mixed-chunk", "--skip-tokenizer-init",
		"--show-time-cost", "--enable-dp-attention")...)
	return flags
}

func setPort(c *engineCommand, v string) error {
	p, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("invalid int value: '%s'", v)
	}
	if p < 0 || p > 65535 {
		return fmt.Errorf("port %d out of range", p)
	}
	c.port = p
	return nil
}

// parseEngineFlags runs argparse's algorithm over args: options by exact name
// ("--name value" or "--name=value"; vLLM also takes underscores for
// dashes), positionals anywhere, a pseudo-argument "--" ending options.
// Unknown options and surplus positionals are reported together, as
// argparse's "unrecognized arguments".
func parseEngineFlags(c *engineCommand, usage string, flags []engineFlag, args []string, underscores bool, positional func(string) bool) error {
	byName := map[string]*engineFlag{}
	for i := range flags {
		for _, n := range flags[i].names {
			byName[n] = &flags[i]
		}
	}
	fail := func(format string, a ...any) error {
		return &usageError{prog: c.prog, usage: usage, msg: fmt.Sprintf(format, a...)}
	}
	var unrecognized []string
	onlyPositionals := false
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if onlyPositionals || !strings.HasPrefix(arg, "-") || arg == "-" || isNumber(arg) {
			if !positional(arg) {
				unrecognized = append(unrecognized, arg)
			}
			continue
		}
		if arg == "--" {
			onlyPositionals = true
			continue
		}
		if arg == "-h" || arg == "--help" {
			c.help = true
			continue
		}
		name, val, hasVal := strings.Cut(arg, "=")
		if underscores && strings.HasPrefix(name, "--") {
			name = "--" + strings.ReplaceAll(name[2:], "_", "-")
		}
		f := byName[name]
		if f == nil {
			unrecognized = append(unrecognized, arg)
			continue
		}
		var vals []string
		switch {
		case !f.value && hasVal:
			return fail("argument %s: ignored explicit argument '%s'", strings.Join(f.names, "/"), val)
		case !f.value:
			vals = []string{""}
		case hasVal:
			vals = []string{val}
		default:
			for i+1 < len(args) && (!strings.HasPrefix(args[i+1], "-") || isNumber(args[i+1])) {
				i++
				vals = append(vals, args[i])
				if !f.multi {
					break
				}
			}
			if len(vals) == 0 {
				if f.multi {
					return fail("argument %s: expected at least one argument", strings.Join(f.names, "/"))
				}
				return fail("argument %s: expected one argument", strings.Join(f.names, "/"))
			}
		}
		if f.set == nil {
			continue
		}
		// nargs="+" keeps the first value where the simulator needs one.
		if err := f.set(c, vals[0]); err != nil {
			return fail("argument %s: %v", strings.Join(f.names, "/"), err)
		}
	}
	if len(unrecognized) > 0 {
		return fail("unrecognized arguments: %s", strings.Join(unrecognized, " "))
	}
	return nil
}

// isNumber tells a negative number, which argparse takes as a value, from
// an option.
func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

const (
	vllmUsage   = "vllm serve [model_tag] [options]"
	sglangUsage = "launch_server.py [-h] --model-path MODEL_PATH [--host HOST] [--port PORT] [options]"
)

// parseVLLMServe parses the arguments after `vllm serve`.
func parseVLLMServe(args []string) (*engineCommand, error) {
	c := &engineCommand{flavor: hruntime.KindVLLM, prog: "vllm serve", host: vllmDefaultHost, port: vllmDefaultPort,
		serverArgs: map[string]any{}}
	positionals := 0
	err := parseEngineFlags(c, vllmUsage, vllmFlags(), args, true, func(arg string) bool {
		positionals++
		if positionals > 1 {
			return false
		}
		if c.modelPath != "" && c.modelPath != arg {
			return false
		}
		c.modelPath = arg
		return true
	})
	if err != nil || c.help {
		return c, err
	}
	if c.modelPath == "" {
		c.modelPath = "Qwen/Qwen3-0.6B" // vLLM's default model
	}
	if c.served == "" {
		c.served = c.modelPath
	}
	if err := c.kvEventsVLLM(); err != nil {
		return c, &usageError{prog: c.prog, usage: vllmUsage, msg: "argument --kv-events-config: " + err.Error()}
	}
	return c, nil
}

// parseSGLangServer parses the arguments of SGLang's launcher: after
// `python3 -m sglang.launch_server`, or after `sglang serve` (positional
// says a first positional argument is the model path).
func parseSGLangServer(args []string, positional bool) (*engineCommand, error) {
	c := &engineCommand{flavor: hruntime.KindSGLang, prog: "launch_server.py", host: sglangDefaultHost,
		port: sglangDefaultPort, serverArgs: map[string]any{}}
	// SGLang pages are one token unless told otherwise.
	c.cfg.BlockSize = 1
	positionals := 0
	err := parseEngineFlags(c, sglangUsage, sglangFlags(), args, false, func(arg string) bool {
		positionals++
		if !positional || positionals > 1 || c.modelPath != "" {
			return false
		}
		c.modelPath = arg
		return true
	})
	if err != nil || c.help {
		return c, err
	}
	if c.modelPath == "" {
		return c, &usageError{prog: c.prog, usage: sglangUsage,
			msg: "the following arguments are required: --model-path/--model"}
	}
	if c.served == "" {
		c.served = c.modelPath
	}
	if c.priorityRequired && c.cfg.SchedulingPolicy != sim.PolicyPriority {
		return c, &usageError{prog: c.prog, usage: sglangUsage,
			msg: "--schedule-policy priority needs --enable-priority-scheduling"}
	}
	// SGLang serves higher priority values first unless told otherwise
	// (schedule_low_priority_values_first, default False).
	c.cfg.PriorityHigherFirst = !c.lowPriorityFirst
	if err := c.kvEventsSGLang(); err != nil {
		return c, &usageError{prog: c.prog, usage: sglangUsage, msg: "argument --kv-events-config: " + err.Error()}
	}
	return c, nil
}

// kvEventsConfigJSON is --kv-events-config as both engines read it; fields
// neither models (buffer_steps, hwm, max_queue_size) are accepted.
type kvEventsConfigJSON struct {
	EnableKVCacheEvents bool    `json:"enable_kv_cache_events"` // vLLM
	Publisher           *string `json:"publisher"`
	Endpoint            *string `json:"endpoint"`
	ReplayEndpoint      *string `json:"replay_endpoint"`
	Topic               string  `json:"topic"`
	BufferSteps         int     `json:"buffer_steps"`
	HWM                 int     `json:"hwm"`
	MaxQueueSize        int     `json:"max_queue_size"`
}

func (c *engineCommand) readKVEventsConfig() (kvEventsConfigJSON, error) {
	var k kvEventsConfigJSON
	if c.kvEventsConfig == "" {
		return k, nil
	}
	if err := json.Unmarshal([]byte(c.kvEventsConfig), &k); err != nil {
		return k, fmt.Errorf("invalid KVEventsConfig JSON: %v", err)
	}
	if k.Publisher != nil && *k.Publisher != "null" && *k.Publisher != "zmq" {
		return k, fmt.Errorf("unknown event publisher '%s'", *k.Publisher)
	}
	return k, nil
}

// kvEventsVLLM: vLLM publishes when enable_kv_cache_events is set; its
// publisher then defaults to zmq.
func (c *engineCommand) kvEventsVLLM() error {
	k, err := c.readKVEventsConfig()
	if err != nil {
		return err
	}
	if !k.EnableKVCacheEvents || (k.Publisher != nil && *k.Publisher == "null") {
		return nil
	}
	c.setKVEvents(k)
	return nil
}

// kvEventsSGLang: SGLang publishes only when the publisher is named zmq.
func (c *engineCommand) kvEventsSGLang() error {
	k, err := c.readKVEventsConfig()
	if err != nil {
		return err
	}
	if k.Publisher == nil || *k.Publisher != "zmq" {
		return nil
	}
	c.setKVEvents(k)
	if c.kvEventsConfig != "" {
		c.serverArgs["kv_events_config"] = c.kvEventsConfig
	}
	return nil
}

func (c *engineCommand) setKVEvents(k kvEventsConfigJSON) {
	c.kvEvents = defaultKVEventsEndpoint
	if k.Endpoint != nil && *k.Endpoint != "" {
		c.kvEvents = *k.Endpoint
	}
	if k.ReplayEndpoint != nil {
		c.kvReplay = *k.ReplayEndpoint
	}
	c.topic = k.Topic
}

// lookupModel finds the model the command line names in the catalog: a
// Hearth name or a Hugging Face repository, or a local directory named like
// either.
func lookupModel(path string) (catalog.Model, bool) {
	if m, ok := catalog.LookupModel(path); ok {
		return m, true
	}
	return catalog.LookupModel(filepath.Base(strings.TrimRight(path, "/")))
}

// errUnknownModel: the command line names a model the simulator cannot
// model.
var errUnknownModel = errors.New("unknown model")

// finish applies the environment and the model lookup to a parsed command.
func (c *engineCommand) finish(getenv func(string) string) error {
	m, ok := lookupModel(c.modelPath)
	if !ok {
		return fmt.Errorf("%w %q", errUnknownModel, c.modelPath)
	}
	c.cfg.Model = m.Name
	c.cfg.Kind = c.flavor
	settings, err := hruntime.ParseSimEnv(getenv)
	if err != nil {
		return err
	}
	c.cfg.GPU, c.speedup, c.cfg.Seed, c.cfg.NumGPUBlocks = settings.GPU, settings.Speedup, settings.Seed, settings.NumGPUBlocks
	if settings.ToolCalls != "" {
		if err := c.cfg.Agent.ParseToolCallRange(settings.ToolCalls); err != nil {
			return fmt.Errorf("%s: %w", hruntime.EnvSimToolCalls, err)
		}
	}
	c.cfg.Agent.AllowWriteTools = settings.AllowWriteTools
	c.engineVersion, c.kvEventFault = settings.EngineVersion, settings.KVEventFault
	c.memAvailable = uint64(settings.MemAvailableGiB * (1 << 30))
	if v := getenv(envSGLangHealthTimeout); v != "" && c.flavor == hruntime.KindSGLang {
		s, err := strconv.Atoi(v)
		if err != nil || s <= 0 {
			return fmt.Errorf("%s=%q: want a number of seconds", envSGLangHealthTimeout, v)
		}
		c.healthTimeout = time.Duration(s) * time.Second
	}
	if c.flavor == hruntime.KindSGLang && c.hierarchical {
		if err := c.hostTier(m); err != nil {
			return err
		}
		if c.hicacheStorage == "file" {
			c.storeDir = getenv(hruntime.SGLangFileStorageDirEnv)
			if c.storeDir == "" {
				c.storeDir = "/tmp/hicache" // SGLang's default
			}
		}
	}
	return nil
}

// hostTier sizes SGLang's host KV pool: --hicache-size in GB (1e9 bytes,
// as SGLang reads it) for each tensor-parallel rank, else --hicache-ratio (default 2) times the GPU pool.
func (c *engineCommand) hostTier(m catalog.Model) error {
	if c.hicacheGB > 0 {
		// Each tensor-parallel rank allocates --hicache-size GB.
		c.cfg.CPUOffloadGiB = float64(c.hicacheGB) * 1e9 / (1 << 30) * float64(max(c.cfg.TP, 1))
		c.serverArgs["hicache_size"] = c.hicacheGB
		return nil
	}
	ratio := c.hicacheRatio
	if ratio == 0 {
		ratio = 2
	}
	c.serverArgs["hicache_ratio"] = ratio
	gpu, ok := catalog.LookupGPU(c.cfg.GPU)
	if !ok {
		return nil // Validate reports the GPU
	}
	blockSize, batched, util := c.cfg.BlockSize, c.cfg.MaxNumBatchedTokens, c.cfg.GPUMemoryUtilization
	if batched == 0 {
		batched = catalog.DefaultMaxBatchedTokens
	}
	if util == 0 {
		util = catalog.DefaultMemoryFraction
	}
	blocks := c.cfg.NumGPUBlocks
	if blocks == 0 && blockSize > 0 {
		blocks = catalog.KVCacheBlocks(gpu, m, blockSize, batched, util)
	}
	c.cfg.NumCPUBlocks = int(float64(blocks) * ratio)
	return nil
}

// listen is the HTTP address: the host as given ("" for every interface).
func (c *engineCommand) listen() string { return net.JoinHostPort(c.host, strconv.Itoa(c.port)) }

// checkHostMemory refuses a HiCache host pool as SGLang's HostKVCache does
// (python/sglang/srt/mem_cache/pool_host/base.py at
// 712c06178f7f56e9f8d10b011ff4312f1270f8cf, untagged): each tensor-parallel
// rank's process allocates --hicache-size GB and fails when that exceeds
// MemAvailable less 10 GiB (HICACHE_HOST_MEMORY_RESERVE_BYTES). The ranks
// are taken to allocate one after another, so the last one sees the
// others' pools taken. The memory available is the environment's figure
// when it states one (runtime.EnvSimMemAvailableGiB), so that tests do not
// depend on the machine, else the machine's; memory that cannot be read is
// not weighed.
func (c *engineCommand) checkHostMemory() error {
	if c.flavor != hruntime.KindSGLang || !c.hierarchical || c.hicacheGB <= 0 {
		return nil
	}
	available := c.memAvailable
	if available == 0 {
		var err error
		if available, err = procMemAvailable(); err != nil {
			return nil
		}
	}
	perRank := float64(c.hicacheGB) * 1e9
	free := float64(available) - hruntime.SGLangHostKeepFree - float64(max(c.cfg.TP, 1)-1)*perRank
	if perRank > free {
		return fmt.Errorf("Not enough host memory available. Requesting %.2f GB but only have %.2f GB free. "+
			"Please reduce the size of the hierarchical cache.", perRank/1e9, free/1e9)
	}
	return nil
}

// procMemAvailable reads MemAvailable from /proc/meminfo, in bytes.
func procMemAvailable() (uint64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/meminfo: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("/proc/meminfo: no MemAvailable")
}
