package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/bench"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// benchFlags is the command line of hearth bench agentic|trace.
type benchFlags struct {
	kind          string
	simSpec       string
	model         string
	target        string
	apiKey        string
	policies      string
	sessions      string
	duration      time.Duration
	totalSessions int
	steps         int
	prefixTokens  int
	osl           string
	toolPause     string
	subagents     int
	trace         string
	speed         float64
	limit         int
	seed          uint64
	eventLatency  time.Duration
	offloadGiB    float64
	tiers         string
	storeDir      string
	diskGBps      float64
	restartAt     time.Duration
	jsonPath      string
	inferHints    string // --infer-hints
	plotPath      string
	workload      string
	maxModelLen   int
	runs          int
	tp            int
	kvCacheDtype  string
	ropeScaling   bool
	layout        string
	// layoutGiven is whether a flag or the preset set the layout itself
	// (--tp, --kv-cache-dtype, --rope-scaling, --max-model-len).
	layoutGiven bool
}

// runBench compares routing policies on an agentic workload or a trace,
// on a simulated cluster in virtual time or against a live server.
func runBench(ctx context.Context, env *environment, args []string) error {
	if len(args) > 0 && args[0] == "plot" {
		return runBenchPlot(ctx, env, args[1:])
	}
	if len(args) == 0 || (args[0] != "agentic" && args[0] != "trace") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			printBenchUsage(env.stdout)
			return nil
		}
		printBenchUsage(env.stderr)
		if len(args) == 0 {
			return fmt.Errorf("%w: bench needs a workload: agentic or trace", errUsage)
		}
		return fmt.Errorf("%w: unknown workload %q (want agentic or trace)", errUsage, args[0])
	}
	f, err := parseBenchFlags(env, args[0], args[1:])
	if err != nil {
		return err
	}
	err = f.run(ctx, env)
	if bad, ok := err.(*bench.ConfigError); ok {
		return fmt.Errorf("%w: %v", errUsage, bad.Err)
	}
	return err
}

// run turns the flags into a comparison and runs it.
func (f *benchFlags) run(ctx context.Context, env *environment) error {
	live := f.target != ""
	c := bench.Comparison{Target: f.target, Model: f.model, APIKey: f.apiKey,
		EventLatency: f.eventLatency, KVOffloadingGiB: f.offloadGiB, Tiers: f.tiers, StoreDir: f.storeDir,
		DiskGBps: f.diskGBps, RestartAt: f.restartAt, MaxModelLen: f.maxModelLen, TP: f.tp, KVCacheDtype: f.kvCacheDtype,
		Seed: f.seed, Runs: f.runs, JSONPath: f.jsonPath, PlotPath: f.plotPath, Out: env.stdout, Progress: env.stderr,
		InferHints: f.inferHints != "off"}
	var err error
	if c.Policies, err = f.policyList(live); err != nil {
		return err
	}
	if p, ok := bench.LookupPreset(f.workload); ok && c.MaxModelLen == 0 {
		c.MaxModelLen = p.MaxModelLen
	}
	var agentic bench.AgenticConfig
	var levels []int
	switch f.kind {
	case "agentic":
		if agentic, err = f.agenticConfig(); err != nil {
			return err
		}
		if levels, err = f.levels(live); err != nil {
			return err
		}
	case "trace":
		if !(f.speed >= 0.001 && f.speed <= 1e6) {
			return fmt.Errorf("%w: --speed %v out of [0.001, 1e6]", errUsage, f.speed)
		}
	}
	if !live {
		spec := f.simSpec
		if spec == "" {
			spec = "2x4090"
		}
		gpus, err := nodes.ParseSimSpec(spec)
		if err != nil {
			return fmt.Errorf("%w: --sim: %v", errUsage, err)
		}
		for _, g := range gpus {
			c.GPUs = append(c.GPUs, g.Kind)
		}
		if err := f.chooseLayout(&c, gpus, env.stdout); err != nil {
			return err
		}
	}
	if f.kind == "trace" {
		return bench.RunTrace(ctx, c, bench.TraceConfig{Path: f.trace, Speed: f.speed, Limit: f.limit, Duration: f.duration})
	}
	return bench.RunAgentic(ctx, c, agentic, levels)
}

// chooseLayout sets a simulation's layout as hearth up chooses it: without
// layout flags (or a preset's context), --layout agent (the default) runs
// the layout for coding agents (catalog.DefaultAgentLayout, for the
// preset's client, else Claude Code) and says so in one line; --layout
// per-gpu one engine per GPU.
func (f *benchFlags) chooseLayout(c *bench.Comparison, gpus []nodes.GPU, out io.Writer) error {
	c.RopeScaling = f.ropeScaling
	if f.layoutGiven || f.layout == daemon.LayoutPerGPU || c.MaxModelLen > 0 {
		return nil
	}
	name := f.model
	if name == "" {
		name = bench.DefaultSimModel
	}
	model, ok := catalog.LookupModel(name)
	if !ok {
		return fmt.Errorf("%w: --model %q is not simulated", errUsage, name)
	}
	client := catalog.ClaudeCodeID
	if p, ok := bench.LookupPreset(f.workload); ok && p.Agentic.Client != "" {
		client = p.Agentic.Client
	}
	choice, err := catalog.DefaultAgentLayout(nodes.PlannerUses(gpus), model, client)
	if err != nil {
		return err
	}
	l := choice.Candidate.Layout
	c.TP, c.KVCacheDtype, c.RopeScaling = l.TPSize(), l.KVCacheDtypeOrAuto(), l.RopeScaling
	fmt.Fprintf(out, "layout %s (%s), as hearth up serves it; --layout per-gpu for one engine per GPU\n", l, choice.Reason)
	if choice.Shortfall != "" {
		fmt.Fprintln(out, choice.Shortfall)
	}
	return nil
}

func printBenchUsage(w io.Writer) {
	fmt.Fprintln(w, `Usage: hearth bench agentic [flags]
       hearth bench trace --trace FILE [flags]
       hearth bench plot --csv FILE --out FILE.svg

Runs routing policies side by side on the same workload: on a simulated
cluster in virtual time (--sim, the default) or against a live
OpenAI-compatible server (--target). Run 'hearth bench agentic --help'
for the flags. 'hearth bench plot' draws samples over time (the CSV
scripts/soak writes) as an SVG chart.`)
}

func parseBenchFlags(env *environment, kind string, args []string) (*benchFlags, error) {
	f := &benchFlags{kind: kind}
	fs := newFlagSet(env, "bench "+kind, "bench "+kind+" [flags]")
	fs.StringVar(&f.simSpec, "sim", "", "simulated cluster, e.g. 2x4090 or 1x4090+2x3090 (default 2x4090 unless --target)")
	fs.StringVar(&f.model, "model", "", "model: simulated ("+strings.Join(sim.ModelNames(), ", ")+"; default "+bench.DefaultSimModel+") or the live server's id (default: its first)")
	fs.StringVar(&f.target, "target", "", "OpenAI base URL of a live server, e.g. http://127.0.0.1:8000/v1")
	fs.StringVar(&f.apiKey, "api-key", "", "bearer token for --target")
	fs.StringVar(&f.policies, "policies", "", "comma-separated routing policies ("+strings.Join(router.PolicyNames(), ", ")+
		"); default round_robin,kv,hearth simulated, the target's own policy live")
	fs.StringVar(&f.sessions, "sessions", "", "comma-separated concurrency levels (agentic; default 1,20,40 simulated, 8 live)")
	fs.DurationVar(&f.duration, "duration", 0, "workload length (agentic default 10m unless --total-sessions; trace default all)")
	fs.IntVar(&f.totalSessions, "total-sessions", 0, "stop after this many sessions (agentic)")
	fs.IntVar(&f.steps, "steps", 0, "model calls per session (agentic, default 8)")
	fs.IntVar(&f.prefixTokens, "prefix-tokens", 0, "shared system prompt and tools, tokens (agentic, default 6000)")
	fs.StringVar(&f.osl, "osl", "", "output tokens per call, N or MIN-MAX (agentic, default 100-200)")
	fs.StringVar(&f.toolPause, "tool-pause", "", "tool time between calls, e.g. lognormal:3s,20s or const:10ms (agentic)")
	fs.IntVar(&f.subagents, "subagents", 0, "subagents each session spawns (agentic)")
	fs.StringVar(&f.trace, "trace", "", "Mooncake-format trace file (trace, required)")
	fs.Float64Var(&f.speed, "speed", 1, "replay speed: timestamps are divided by it (trace)")
	fs.IntVar(&f.limit, "limit", 0, "replay only the first N requests (trace)")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of the workload, engine hashes and router choices")
	fs.DurationVar(&f.eventLatency, "event-latency", bench.DefaultEventLatency, "delay of KV events from engine to router (simulated)")
	fs.Float64Var(&f.offloadGiB, "kv-offloading-size", bench.DefaultKVOffloadingGiB, "host RAM per simulated engine for offloaded KV blocks in GiB, vLLM's native offloading (0: off)")
	fs.StringVar(&f.tiers, "kvbm", kvbm.TiersRAM, "simulated KV tiers below the GPU: off, ram (--kv-offloading-size per engine) or ram+ssd (and a node SSD store shared by the engines, of sparse files under --kv-store-dir)")
	fs.StringVar(&f.storeDir, "kv-store-dir", "", "where ram+ssd runs keep their node store (default: the system's temp directory); each run's is removed after it")
	fs.Float64Var(&f.diskGBps, "disk-gbps", catalog.DefaultDiskGBps, "read bandwidth of the simulated node store in GB/s")
	fs.DurationVar(&f.restartAt, "restart-at", 0, "restart every simulated engine at this time into a run (their GPU and RAM caches lost, the node store kept), and report what the next turns loaded")
	fs.StringVar(&f.jsonPath, "json", "", "also write the report as JSON to FILE")
	fs.StringVar(&f.inferHints, "infer-hints", "on", "on or off, as hearth up's: side requests after the sessions' turns in the router's queue, engines scheduling by priority, a prefill of the next prompt in each tool pause, each request's output length estimated from the answers before it and its error reported (simulated)")
	fs.StringVar(&f.workload, "preset", "", "agentic preset: "+strings.Join(bench.PresetNames(), ", ")+
		"; flags set override its fields; a client's (claude-code, codex, opencode) compacts its sessions to fit the engines' context")
	fs.StringVar(&f.workload, "workload", "", "the older name of --preset")
	fs.IntVar(&f.maxModelLen, "max-model-len", 0, "every simulated engine's max_model_len, as vLLM's (default: the preset's, else the model's capped by the KV cache)")
	fs.IntVar(&f.tp, "tp", 1, "simulated GPUs per engine: one tensor-parallel engine per N GPUs of --sim")
	fs.StringVar(&f.kvCacheDtype, "kv-cache-dtype", catalog.KVCacheAuto, "simulated engines' KV cache dtype: auto or fp8 (half the bytes per token)")
	fs.BoolVar(&f.ropeScaling, "rope-scaling", false, "simulated engines serve the model's YaRN context where it has one (Qwen3: 131,072 tokens)")
	fs.StringVar(&f.layout, "layout", daemon.LayoutAgent, "the simulated engines' layout without --tp, --kv-cache-dtype, --rope-scaling or --max-model-len, as hearth up's: agent (the layout for coding agents hearth up serves by default) or per-gpu (one engine per GPU)")
	fs.IntVar(&f.runs, "runs", 1, "repeat every run with this many seeds (--seed, --seed+1, ...) and report the spread")
	fs.StringVar(&f.plotPath, "plot", "", "also write a chart of TTFT, slowest turn TTFT and task time to FILE.svg")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	return f, f.check(flagsSet(fs))
}

// check rejects flag combinations that make no sense.
func (f *benchFlags) check(set map[string]bool) error {
	if f.simSpec != "" && f.target != "" {
		return fmt.Errorf("%w: --sim and --target exclude each other", errUsage)
	}
	traceOnly := []string{"trace", "speed", "limit"}
	agenticOnly := []string{"sessions", "total-sessions", "steps", "prefix-tokens", "osl", "tool-pause", "subagents", "preset", "workload"}
	wrong := agenticOnly
	if f.kind == "agentic" {
		wrong = traceOnly
	}
	for _, name := range wrong {
		if set[name] {
			return fmt.Errorf("%w: --%s does not apply to the %s workload", errUsage, name, f.kind)
		}
	}
	if f.kind == "trace" && f.trace == "" {
		return fmt.Errorf("%w: bench trace needs --trace FILE", errUsage)
	}
	if set["preset"] && set["workload"] {
		return fmt.Errorf("%w: --preset and --workload are the same flag; give one", errUsage)
	}
	if f.workload != "" {
		if _, err := bench.PresetByName(f.workload); err != nil {
			return fmt.Errorf("%w: --preset: %v", errUsage, err)
		}
	}
	if f.inferHints != "on" && f.inferHints != "off" {
		return fmt.Errorf("%w: --infer-hints %q: want on or off", errUsage, f.inferHints)
	}
	if f.runs < 1 || f.runs > 100 {
		return fmt.Errorf("%w: --runs %d out of [1, 100]", errUsage, f.runs)
	}
	switch f.tiers {
	case kvbm.TiersOff, kvbm.TiersRAM, kvbm.TiersRAMSSD:
	default:
		return fmt.Errorf("%w: unknown --kvbm %q (known: off, ram, ram+ssd)", errUsage, f.tiers)
	}
	if !(f.diskGBps > 0) || f.restartAt < 0 {
		return fmt.Errorf("%w: --disk-gbps must be positive and --restart-at not negative", errUsage)
	}
	if f.tp < 1 {
		return fmt.Errorf("%w: --tp must be at least 1", errUsage)
	}
	if !slices.Contains(daemon.LayoutNames(), f.layout) {
		return fmt.Errorf("%w: --layout %q: want %s", errUsage, f.layout, strings.Join(daemon.LayoutNames(), " or "))
	}
	f.layoutGiven = set["tp"] || set["kv-cache-dtype"] || set["rope-scaling"] || set["max-model-len"]
	if f.layoutGiven && set["layout"] {
		return fmt.Errorf("%w: --layout chooses the layout that --tp, --kv-cache-dtype, --rope-scaling and --max-model-len give: keep one or the other", errUsage)
	}
	if err := (catalog.Layout{KVCacheDtype: f.kvCacheDtype}).Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	for _, name := range []string{"event-latency", "kv-offloading-size", "max-model-len", "kvbm", "kv-store-dir", "disk-gbps", "restart-at", "tp", "kv-cache-dtype", "rope-scaling", "layout", "infer-hints"} {
		if f.target != "" && set[name] {
			return fmt.Errorf("%w: --%s applies to a simulation only", errUsage, name)
		}
	}
	if f.offloadGiB < 0 || f.eventLatency < 0 || f.duration < 0 || f.totalSessions < 0 || f.steps < 0 || f.prefixTokens < 0 || f.subagents < 0 || f.limit < 0 || f.maxModelLen < 0 {
		return fmt.Errorf("%w: negative value", errUsage)
	}
	return nil
}

func (f *benchFlags) policyList(live bool) ([]string, error) {
	if f.policies == "" {
		if live {
			return []string{"target"}, nil
		}
		return []string{router.PolicyRoundRobin, router.PolicyKV, router.PolicyHearth}, nil
	}
	var out []string
	for _, p := range strings.Split(f.policies, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(router.PolicyNames(), p) && !(live && p == "target") {
			return nil, fmt.Errorf("%w: unknown policy %q (known: %s)", errUsage, p, strings.Join(router.PolicyNames(), ", "))
		}
		if slices.Contains(out, p) {
			return nil, fmt.Errorf("%w: policy %q listed twice", errUsage, p)
		}
		out = append(out, p)
	}
	return out, nil
}

func (f *benchFlags) levels(live bool) ([]int, error) {
	s := f.sessions
	if s == "" {
		s = "1,20,40"
		if live {
			s = "8"
		}
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: --sessions: %q is not a positive count", errUsage, part)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

func (f *benchFlags) agenticConfig() (bench.AgenticConfig, error) {
	var cfg bench.AgenticConfig
	if p, ok := bench.LookupPreset(f.workload); ok {
		cfg = p.Agentic
	}
	// A flag given overrides the preset; zero means the preset's value or
	// the default.
	for _, v := range []struct {
		dst *int
		val int
	}{{&cfg.PrefixTokens, f.prefixTokens}, {&cfg.TotalSessions, f.totalSessions}, {&cfg.Subagents, f.subagents}} {
		if v.val != 0 {
			*v.dst = v.val
		}
	}
	if f.steps != 0 {
		cfg.Steps, cfg.MaxSteps = f.steps, 0
	}
	if f.duration != 0 {
		cfg.Duration = f.duration
	}
	if f.osl != "" {
		r, err := bench.ParseIntRange(f.osl)
		if err != nil {
			return cfg, fmt.Errorf("%w: --osl: %v", errUsage, err)
		}
		cfg.AnswerTokens = r
	}
	if f.toolPause != "" {
		d, err := bench.ParseDist(f.toolPause)
		if err != nil {
			return cfg, fmt.Errorf("%w: --tool-pause: %v", errUsage, err)
		}
		cfg.ToolPause = d
	}
	return cfg, nil
}
