package bench

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/models"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// Flags is the command line of hearth bench agentic|trace: Register puts
// its flags on a flag set, Prepare checks them and turns them into a Run.
type Flags struct {
	kind          string
	simSpec       string
	model         string
	target        string
	apiKey        string
	policies      string
	sessions      string
	duration      time.Duration
	ramp          time.Duration
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
	warmStart     string // --warm-start
	plotPath      string
	workload      string
	maxModelLen   int
	runs          int
	tp            int
	kvCacheDtype  string
	ropeScaling   bool
	layout        string
	swapModel     string        // --swap-model
	keepAlive     time.Duration // --keep-alive
	secondAgent   bool          // --second-agent
	// layoutGiven is whether a flag or the preset set the layout itself
	// (--tp, --kv-cache-dtype, --rope-scaling, --max-model-len).
	layoutGiven bool
}

// NewFlags is the command line of the agentic or the trace workload.
func NewFlags(kind string) *Flags { return &Flags{kind: kind} }

// Register puts the workload's flags on fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.simSpec, "sim", "", "simulated cluster, e.g. 2x4090 or 1x4090+2x3090 (default 2x4090 unless --target)")
	fs.StringVar(&f.model, "model", "", "model: simulated ("+strings.Join(sim.ModelNames(), ", ")+"; default "+DefaultSimModel+") or the live server's id (default: its first)")
	fs.StringVar(&f.target, "target", "", "OpenAI base URL of a live server, e.g. http://127.0.0.1:8000/v1")
	fs.StringVar(&f.apiKey, "api-key", "", "bearer token for --target")
	fs.StringVar(&f.policies, "policies", "", "comma-separated routing policies ("+strings.Join(router.PolicyNames(), ", ")+
		"); default round_robin,kv,hearth simulated, the target's own policy live")
	fs.StringVar(&f.sessions, "sessions", "", "comma-separated concurrency levels (agentic; default 1,20,40 simulated, 8 live)")
	fs.DurationVar(&f.duration, "duration", 0, "workload length (agentic default 10m unless --total-sessions; trace default all)")
	fs.DurationVar(&f.ramp, "ramp", 0, "start the first --sessions sessions one after another, spread evenly over this time (agentic; default 0: all at once, their first prompts together)")
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
	fs.DurationVar(&f.eventLatency, "event-latency", DefaultEventLatency, "delay of KV events from engine to router (simulated)")
	fs.Float64Var(&f.offloadGiB, "kv-offloading-size", DefaultKVOffloadingGiB, "host RAM per simulated engine for offloaded KV blocks in GiB, vLLM's native offloading (0: off)")
	fs.StringVar(&f.tiers, "kvbm", kvbm.DefaultTiers, "simulated KV tiers below the GPU, as hearth up's: off, ram (--kv-offloading-size per engine) or ram+ssd (and a node SSD store shared by the engines, of sparse files under --kv-store-dir, "+strconv.Itoa(DefaultStoreGiB)+" GiB: hearth up's share of a 1 TB drive)")
	fs.StringVar(&f.storeDir, "kv-store-dir", "", "where ram+ssd runs keep their node store (default: the system's temp directory); each run's is removed after it")
	fs.Float64Var(&f.diskGBps, "disk-gbps", catalog.DefaultDiskGBps, "read bandwidth of the simulated node store in GB/s")
	fs.DurationVar(&f.restartAt, "restart-at", 0, "restart every simulated engine at this time into a run (their GPU and RAM caches lost, the node store kept), and report what the next turns loaded")
	fs.StringVar(&f.jsonPath, "json", "", "also write the report as JSON to FILE")
	fs.StringVar(&f.inferHints, "infer-hints", "on", "on or off, as hearth up's: side requests after the sessions' turns in the router's queue, engines scheduling by priority, a prefill of the next prompt in each tool pause, each request's output length estimated from the answers before it and its error reported (simulated)")
	fs.StringVar(&f.warmStart, "warm-start", "off", "on or off: the simulated engines start with the prefixes that two sessions of an earlier run shared prefilled, as hearth up warms its engines from its second start on with the prefixes it learned; off, they start empty, as on hearth up's first start (agentic, simulated)")
	fs.StringVar(&f.workload, "preset", "", "agentic preset: "+strings.Join(PresetNames(), ", ")+
		"; flags set override its fields; a client's (claude-code, codex, opencode) compacts its sessions to fit the engines' context")
	fs.StringVar(&f.workload, "workload", "", "the older name of --preset")
	fs.IntVar(&f.maxModelLen, "max-model-len", 0, "every simulated engine's max_model_len, as vLLM's (default: the preset's, else the model's capped by the KV cache)")
	fs.IntVar(&f.tp, "tp", 1, "simulated GPUs per engine: one tensor-parallel engine per N GPUs of --sim")
	fs.StringVar(&f.kvCacheDtype, "kv-cache-dtype", catalog.KVCacheAuto, "simulated engines' KV cache dtype: auto or fp8 (half the bytes per token)")
	fs.BoolVar(&f.ropeScaling, "rope-scaling", false, "simulated engines serve the model's YaRN context where it has one (Qwen3: 131,072 tokens)")
	fs.StringVar(&f.layout, "layout", catalog.LayoutAgent, "the simulated engines' layout without --tp, --kv-cache-dtype, --rope-scaling or --max-model-len, as hearth up's: agent (the layout for coding agents hearth up serves by default) or per-gpu (one engine per GPU)")
	fs.IntVar(&f.runs, "runs", 1, "repeat every run with this many seeds (--seed, --seed+1, ...) and report the spread")
	fs.StringVar(&f.plotPath, "plot", "", "also write a chart of TTFT, slowest turn TTFT and task time to FILE.svg")
	if f.kind == "agentic" {
		fs.StringVar(&f.swapModel, "swap-model", "", "benchmark models on demand instead: --model's agent sessions and this model's side requests (and with --second-agent every second session) on the first GPU of --sim (default 1x4090), where they do not fit together, under --policies "+strings.Join(SwapPolicies, ", ")+" (default all; pinned gives each model a GPU of its own)")
		fs.BoolVar(&f.secondAgent, "second-agent", true, "with --swap-model: every second session is an agent on --swap-model")
		fs.DurationVar(&f.keepAlive, "keep-alive", models.DefaultKeepAlive, "with --swap-model: each model's keep-alive under the hearth policy, as hearth up's")
	}
}

// Run is what a command line asks for. The simulated GPUs are the
// caller's to add to Comparison.GPUs (from SimSpec), and, when
// DefaultLayout is set, the engines' layout (as hearth up chooses it, for
// Client's sessions): the planner's GPUs are not this package's.
type Run struct {
	Comparison Comparison
	Agentic    AgenticConfig
	Levels     []int
	Trace      *TraceConfig // the trace workload's; nil for agentic
	// SimSpec is --sim, defaulted; empty against a live target.
	SimSpec string
	// Model is the simulated model's name, defaulted.
	Model string
	// DefaultLayout is whether no flag and no preset set the layout.
	DefaultLayout bool
	// Client is the preset's client, else Claude Code's.
	Client string
	// Swap is the swap benchmark --swap-model asks for, nil otherwise;
	// its GPU is the caller's to set, from SimSpec. SwapPolicies are its
	// policies.
	Swap         *SwapConfig
	SwapPolicies []string
}

// Prepare checks the flags (set names those the command line gave) and
// turns them into a Run. A bad command line is a *ConfigError.
func (f *Flags) Prepare(set map[string]bool, out, progress io.Writer) (Run, error) {
	if err := f.check(set); err != nil {
		return Run{}, err
	}
	live := f.target != ""
	r := Run{Comparison: Comparison{Target: f.target, Model: f.model, APIKey: f.apiKey,
		EventLatency: f.eventLatency, KVOffloadingGiB: f.offloadGiB, Tiers: f.tiers, StoreDir: f.storeDir,
		DiskGBps: f.diskGBps, RestartAt: f.restartAt, MaxModelLen: f.maxModelLen, TP: f.tp, KVCacheDtype: f.kvCacheDtype,
		RopeScaling: f.ropeScaling, Seed: f.seed, Runs: f.runs, JSONPath: f.jsonPath, PlotPath: f.plotPath, Out: out, Progress: progress,
		InferHints: f.inferHints != "off", WarmStart: f.warmStart == "on"}, Model: f.model, Client: catalog.ClaudeCodeID}
	c := &r.Comparison
	var err error
	if f.swapModel != "" {
		return f.prepareSwap(r)
	}
	if c.Policies, err = f.policyList(live); err != nil {
		return r, err
	}
	if p, ok := LookupPreset(f.workload); ok {
		if c.MaxModelLen == 0 {
			c.MaxModelLen = p.MaxModelLen
		}
		if p.Agentic.Client != "" {
			r.Client = p.Agentic.Client
		}
	}
	switch f.kind {
	case "agentic":
		if r.Agentic, err = f.agenticConfig(); err != nil {
			return r, err
		}
		if r.Levels, err = f.levels(live); err != nil {
			return r, err
		}
	case "trace":
		if !(f.speed >= 0.001 && f.speed <= 1e6) {
			return r, configErrorf("--speed %v out of [0.001, 1e6]", f.speed)
		}
		r.Trace = &TraceConfig{Path: f.trace, Speed: f.speed, Limit: f.limit, Duration: f.duration}
	}
	if !live {
		r.SimSpec = f.simSpec
		if r.SimSpec == "" {
			r.SimSpec = "2x4090"
		}
		if r.Model == "" {
			r.Model = DefaultSimModel
		}
		r.DefaultLayout = !f.layoutGiven && f.layout != catalog.LayoutPerGPU && c.MaxModelLen == 0
	}
	return r, nil
}

// configErrorf is a bad command line's error.
func configErrorf(format string, args ...any) error {
	return &ConfigError{Err: fmt.Errorf(format, args...)}
}

// check rejects flag combinations that make no sense.
func (f *Flags) check(set map[string]bool) error {
	if f.simSpec != "" && f.target != "" {
		return configErrorf("--sim and --target exclude each other")
	}
	traceOnly := []string{"trace", "speed", "limit"}
	agenticOnly := []string{"sessions", "ramp", "total-sessions", "steps", "prefix-tokens", "osl", "tool-pause", "subagents", "preset", "workload"}
	wrong := agenticOnly
	if f.kind == "agentic" {
		wrong = traceOnly
	}
	for _, name := range wrong {
		if set[name] {
			return configErrorf("--%s does not apply to the %s workload", name, f.kind)
		}
	}
	if f.kind == "trace" && f.trace == "" {
		return configErrorf("bench trace needs --trace FILE")
	}
	if set["preset"] && set["workload"] {
		return configErrorf("--preset and --workload are the same flag; give one")
	}
	if f.workload != "" {
		if _, err := PresetByName(f.workload); err != nil {
			return configErrorf("--preset: %v", err)
		}
	}
	if f.inferHints != "on" && f.inferHints != "off" {
		return configErrorf("--infer-hints %q: want on or off", f.inferHints)
	}
	if f.warmStart != "on" && f.warmStart != "off" {
		return configErrorf("--warm-start %q: want on or off", f.warmStart)
	}
	if f.runs < 1 || f.runs > 100 {
		return configErrorf("--runs %d out of [1, 100]", f.runs)
	}
	switch f.tiers {
	case kvbm.TiersOff, kvbm.TiersRAM, kvbm.TiersRAMSSD:
	default:
		return configErrorf("unknown --kvbm %q (known: off, ram, ram+ssd)", f.tiers)
	}
	if !(f.diskGBps > 0) || f.restartAt < 0 {
		return configErrorf("--disk-gbps must be positive and --restart-at not negative")
	}
	if f.tp < 1 {
		return configErrorf("--tp must be at least 1")
	}
	if !slices.Contains(catalog.LayoutNames(), f.layout) {
		return configErrorf("--layout %q: want %s", f.layout, strings.Join(catalog.LayoutNames(), " or "))
	}
	f.layoutGiven = set["tp"] || set["kv-cache-dtype"] || set["rope-scaling"] || set["max-model-len"]
	if f.layoutGiven && set["layout"] {
		return configErrorf("--layout chooses the layout that --tp, --kv-cache-dtype, --rope-scaling and --max-model-len give: keep one or the other")
	}
	if err := (catalog.Layout{KVCacheDtype: f.kvCacheDtype}).Validate(); err != nil {
		return configErrorf("%v", err)
	}
	for _, name := range []string{"event-latency", "kv-offloading-size", "max-model-len", "kvbm", "kv-store-dir", "disk-gbps", "restart-at", "tp", "kv-cache-dtype", "rope-scaling", "layout", "infer-hints"} {
		if f.target != "" && set[name] {
			return configErrorf("--%s applies to a simulation only", name)
		}
	}
	if f.swapModel == "" && (set["keep-alive"] || set["second-agent"]) {
		return configErrorf("--keep-alive and --second-agent apply to --swap-model only")
	}
	if f.swapModel != "" {
		if f.target != "" {
			return configErrorf("--swap-model applies to a simulation only")
		}
		for _, name := range []string{"restart-at", "runs", "plot", "tp", "layout", "kv-cache-dtype", "rope-scaling", "max-model-len", "subagents"} {
			if set[name] {
				return configErrorf("--%s does not apply to --swap-model", name)
			}
		}
		if f.keepAlive <= 0 {
			return configErrorf("--keep-alive must be positive")
		}
	}
	if f.offloadGiB < 0 || f.eventLatency < 0 || f.duration < 0 || f.ramp < 0 || f.totalSessions < 0 || f.steps < 0 || f.prefixTokens < 0 || f.subagents < 0 || f.limit < 0 || f.maxModelLen < 0 {
		return configErrorf("negative value")
	}
	return nil
}

func (f *Flags) policyList(live bool) ([]string, error) {
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
			return nil, configErrorf("unknown policy %q (known: %s)", p, strings.Join(router.PolicyNames(), ", "))
		}
		if slices.Contains(out, p) {
			return nil, configErrorf("policy %q listed twice", p)
		}
		out = append(out, p)
	}
	return out, nil
}

func (f *Flags) levels(live bool) ([]int, error) {
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
			return nil, configErrorf("--sessions: %q is not a positive count", part)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

func (f *Flags) agenticConfig() (AgenticConfig, error) {
	var cfg AgenticConfig
	if p, ok := LookupPreset(f.workload); ok {
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
	cfg.Ramp = f.ramp
	if f.osl != "" {
		r, err := ParseIntRange(f.osl)
		if err != nil {
			return cfg, configErrorf("--osl: %v", err)
		}
		cfg.AnswerTokens = r
	}
	if f.toolPause != "" {
		d, err := ParseDist(f.toolPause)
		if err != nil {
			return cfg, configErrorf("--tool-pause: %v", err)
		}
		cfg.ToolPause = d
	}
	return cfg, nil
}

// prepareSwap turns the flags into the swap benchmark of --model and
// --swap-model. With --second-agent sessions alternate between the models
// (one level, default two: an agent on each); a workload without side requests gets a title
// request per session, as OpenCode sends, on --swap-model.
func (f *Flags) prepareSwap(r Run) (Run, error) {
	var err error
	if r.Agentic, err = f.agenticConfig(); err != nil {
		return r, err
	}
	if f.sessions == "" {
		f.sessions = "2"
	}
	levels, err := f.levels(false)
	if err != nil {
		return r, err
	}
	if len(levels) != 1 {
		return r, configErrorf("--swap-model runs one --sessions level, got %d", len(levels))
	}
	r.Agentic.Sessions, r.Agentic.Seed = levels[0], f.seed
	if len(r.Agentic.SideRequests) == 0 {
		r.Agentic.SideRequests = []SideRequest{DefaultSwapSideRequest}
	}
	if r.Model == "" {
		r.Model = DefaultSimModel
	}
	if _, ok := catalog.LookupModel(f.swapModel); !ok {
		return r, configErrorf("--swap-model %q: unknown (known: %s)", f.swapModel, strings.Join(sim.ModelNames(), ", "))
	}
	if f.policies == "" {
		r.SwapPolicies = slices.Clone(SwapPolicies)
	} else {
		for _, p := range strings.Split(f.policies, ",") {
			p = strings.TrimSpace(p)
			if !slices.Contains(SwapPolicies, p) || slices.Contains(r.SwapPolicies, p) {
				return r, configErrorf("--policies with --swap-model: %q is unknown or listed twice (known: %s)", p, strings.Join(SwapPolicies, ", "))
			}
			r.SwapPolicies = append(r.SwapPolicies, p)
		}
	}
	r.SimSpec = f.simSpec
	if r.SimSpec == "" {
		r.SimSpec = "1x4090"
	}
	r.Swap = &SwapConfig{Agent: r.Model, Side: f.swapModel, Workload: r.Agentic, KeepAlive: f.keepAlive,
		SecondAgent: f.secondAgent, DiskGBps: f.diskGBps, Seed: int64(f.seed)}
	if f.tiers == kvbm.TiersRAMSSD {
		r.Swap.StoreDir = f.storeDir
		if r.Swap.StoreDir == "" {
			r.Swap.StoreDir = os.TempDir()
		}
	}
	return r, nil
}
