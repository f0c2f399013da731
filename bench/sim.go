package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// DefaultEventLatency is how long a KV event batch takes from the engine
// that made it to the router's index in a simulation: ZMQ over loopback or
// a LAN plus the ingest loop.
const DefaultEventLatency = 5 * time.Millisecond

// DefaultSimModel is the model a simulated cluster serves by default.
const DefaultSimModel = "qwen3-14b-fp8"

// SimConfig describes a simulated cluster: one engine per GPU (per
// Engine.TP GPUs), all serving one model, behind one router. Zero fields
// take the documented defaults.
type SimConfig struct {
	// GPUs names the GPUs, as runtime/sim knows them ("rtx4090",
	// "rtx3090", "h100"): each engine runs on Engine.TP consecutive ones
	// (tensor parallelism; one GPU each by default), as their weakest kind
	// where they differ (engineKind). At least one engine, at most
	// router.MaxWorkers.
	GPUs []string
	// Model is the served model (DefaultSimModel).
	Model string
	// Engine is the template of every engine's configuration; its GPU and
	// Model are replaced by the fields above and its Seed by Seed, so that
	// every engine hashes blocks alike, as vLLM engines with one
	// PYTHONHASHSEED do. Its TP and KVCacheDtype are the layout of every
	// engine.
	Engine sim.Config
	// Router is the router's configuration; its Policy is replaced by the
	// policy of each run and its Seed by Seed.
	Router router.Config
	// KVOffloadingGiB is each engine's host-RAM KV tier, vLLM's
	// --kv-offloading-size (DefaultKVOffloadingGiB); a negative value turns
	// it off. Every engine gets the same, whatever the policy: the engine
	// does not know who routes to it.
	KVOffloadingGiB float64
	// StoreDir, when set, gives the engines a node SSD store below host
	// RAM, shared by all of them (one node): each run opens a fresh store
	// in a directory of its own under StoreDir, of real sparse files, and
	// removes it afterwards. StoreGiB is its capacity (DefaultStoreGiB)
	// and DiskGBps its read bandwidth (catalog.DefaultDiskGBps), which the
	// engines pay and the router is told.
	StoreDir string
	StoreGiB float64
	DiskGBps float64
	// RestartAt, when positive, restarts every engine at that virtual time
	// of a run, as a daemon restart or an upgrade does: the router stops
	// handing out requests (they wait), the running ones finish, then each
	// engine starts afresh with empty GPU and host-RAM caches; the node
	// store survives.
	RestartAt time.Duration
	// EventLatency is the delay from the end of the engine step that made a
	// KV event batch to the router applying it (DefaultEventLatency); a
	// negative value means none.
	EventLatency time.Duration
	// InferOSL estimates each request's output length from the answers
	// before it, as the gateway does for clients that send no osl hint
	// (package router/osl), passes the estimate to the router as the
	// request's osl hint and reports the estimates' error.
	InferOSL bool
	// Seed seeds the engines' block hashes and the router's random choices.
	Seed int64
	// InferHints does what the gateway does with inferred hints (hearth up
	// --infer-hints on): side requests get router.PrioritySide in the
	// router's queue (the engines get them at a turn's), the engines
	// schedule by priority as Hearth starts them, and every turn that ends
	// in a tool call is followed by a prefill of the next turn's prompt up
	// to the tool result on its worker, at background priority, cancelled
	// by the session's next turn (desprefill.go). Off, every request has
	// priority 0, the engines serve first come, first served and nothing
	// is prefilled.
	InferHints bool
	// Logger receives the router's and ingest's diagnostics (default:
	// discard).
	Logger *slog.Logger
	// WarmStart prefills, on every engine before a run's first request, the
	// hot prefixes that a router/warm Learner learned from the first
	// prompts of two sessions of an earlier run of the agentic workload
	// (sessions numbered after the run's own, so their tasks differ): what
	// a daemon that has served the client before warms its engines with
	// at start (deswarm.go). The prefill is part of the engines' start-up,
	// which the simulation does not time: it ends before time zero. A
	// first run, or one with a client never seen, starts cold as without.
	// The Learner goes on learning from the run's own first prompts, as
	// the gateway does, and after RestartAt every engine is sent what it
	// knows then, before the requests held for the restart.
	WarmStart bool
}

// DefaultKVOffloadingGiB is the host RAM each simulated engine offloads KV
// blocks to, hearth up --sim's (kvbm.DefaultSimRAMGiB). For Qwen3-14B it
// is 13,107 blocks (210k tokens), seven times a 4090's KV cache.
const DefaultKVOffloadingGiB = kvbm.DefaultSimRAMGiB

// DefaultStoreGiB is a simulated node store's capacity: what hearth up
// gives the node store without --kv-store-size (10% of the disk's free
// space, at most 256 GiB) on a 1 TB NVMe drive.
const DefaultStoreGiB = 100

// simNode is the node every simulated engine is on.
const simNode = "sim"

// ErrBadSim is wrapped by every error about a simulation's configuration.
var ErrBadSim = errors.New("bad simulation config")

// WithDefaults returns c with every zero field set to its default.
func (c SimConfig) WithDefaults() SimConfig {
	if c.Model == "" {
		c.Model = DefaultSimModel
	}
	switch {
	case c.KVOffloadingGiB == 0:
		c.KVOffloadingGiB = DefaultKVOffloadingGiB
	case c.KVOffloadingGiB < 0:
		c.KVOffloadingGiB = -1
	}
	if c.StoreGiB == 0 {
		c.StoreGiB = DefaultStoreGiB
	}
	if c.DiskGBps == 0 {
		c.DiskGBps = catalog.DefaultDiskGBps
	}
	switch {
	case c.EventLatency == 0:
		c.EventLatency = DefaultEventLatency
	case c.EventLatency < 0:
		c.EventLatency = 0
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate checks a config after WithDefaults: every engine must be able to
// start and the router must accept its configuration.
func (c SimConfig) Validate() error {
	tp := max(c.Engine.TP, 1)
	if len(c.GPUs)%tp != 0 {
		return fmt.Errorf("bench: sim: %w: --tp %d splits each engine over %d GPUs, and %d GPUs do not divide by it", ErrBadSim, tp, tp, len(c.GPUs))
	}
	for i := 0; i < len(c.GPUs); i += tp {
		if _, ok := engineKind(c.GPUs[i : i+tp]); !ok {
			return fmt.Errorf("bench: sim: %w: a tensor-parallel engine on %s: none of its GPUs is the smaller and slower on every figure, so the simulator cannot say which one paces it",
				ErrBadSim, strings.Join(c.GPUs[i:i+tp], " and "))
		}
	}
	engines := c.engineGPUs()
	if len(engines) == 0 || len(engines) > router.MaxWorkers {
		return fmt.Errorf("bench: sim: %w: %d engines, want 1 to %d", ErrBadSim, len(engines), router.MaxWorkers)
	}
	for _, gpu := range engines {
		if err := c.engineConfig(gpu).Validate(); err != nil {
			return fmt.Errorf("bench: sim: %w: %w", ErrBadSim, err)
		}
	}
	if c.StoreGiB < 0 || c.RestartAt < 0 {
		return fmt.Errorf("bench: sim: %w: negative store size or restart time", ErrBadSim)
	}
	if err := c.Router.Validate(); err != nil {
		return fmt.Errorf("bench: sim: %w: %w", ErrBadSim, err)
	}
	return nil
}

// engineGPUs is the GPU kind each engine is simulated on (engineKind).
func (c SimConfig) engineGPUs() []string {
	tp := max(c.Engine.TP, 1)
	var out []string
	for i := 0; i+tp <= len(c.GPUs); i += tp {
		kind, _ := engineKind(c.GPUs[i : i+tp])
		out = append(out, kind)
	}
	return out
}

// engineKind is the GPU kind an engine over gpus is simulated on: their one
// kind, or over kinds (a 4090 with a 3090) the weakest
// (catalog.WeakestGPU): the ranks of a tensor-parallel engine step together
// at the slowest one's pace, and vLLM sizes every rank's KV cache to the
// smallest one's free memory. False when no kind is weakest on every
// figure.
func engineKind(gpus []string) (string, bool) {
	if !slices.ContainsFunc(gpus, func(g string) bool { return g != gpus[0] }) {
		return gpus[0], true
	}
	return catalog.WeakestGPU(gpus)
}

func (c SimConfig) engineConfig(gpu string) sim.Config {
	ec := c.Engine
	ec.GPU, ec.Model, ec.Seed = gpu, c.Model, c.Seed
	ec.CPUOffloadGiB = max(c.KVOffloadingGiB, 0)
	ec.DiskGBps = c.DiskGBps
	if c.InferHints {
		ec.SchedulingPolicy = sim.PolicyPriority // vLLM's: lower values first
	}
	return ec
}

// Sim runs workloads on a simulated cluster in virtual time. Each run
// builds the cluster afresh (empty caches, a new router), so runs are
// independent and a run is a function of its workload, policy and config.
// The engines are runtime/sim's Core, the engine model of hearth
// sim-engine; the router is package router's, fed through its real event
// decoder. The engines do not know which policy routes to them.
type Sim struct {
	cfg SimConfig
	// profiles holds each GPU kind's measured profile (prefill speed, tier
	// sizes), told to the router as a deployment measures it at start-up.
	profiles map[string]catalog.Profile
}

// NewSim checks cfg and measures each GPU's prefill speed once.
func NewSim(cfg SimConfig) (*Sim, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sim{cfg: cfg, profiles: make(map[string]catalog.Profile)}
	for _, gpu := range cfg.engineGPUs() {
		if _, done := s.profiles[gpu]; done {
			continue
		}
		profile, err := catalog.ProfileOf(cfg.engineConfig(gpu).Perf())
		if err != nil {
			return nil, fmt.Errorf("bench: sim: %w", err)
		}
		s.profiles[gpu] = profile
	}
	return s, nil
}

// Config returns the effective configuration.
func (s *Sim) Config() SimConfig { return s.cfg }

// MaxModelLen returns the smallest max_model_len of the simulated engines:
// the context a prompt of the workload must fit on any of them.
func (s *Sim) MaxModelLen() int {
	n := 0
	for _, gpu := range s.cfg.GPUs {
		core, err := sim.NewCore(s.cfg.engineConfig(gpu), nil)
		if err != nil {
			continue // Validate started every engine once
		}
		if l := core.Config().MaxModelLen; n == 0 || l < n {
			n = l
		}
	}
	return n
}

// Describe says in one line what is simulated: the engines with their KV
// cache and measured prefill speed, the model and the event latency.
func (s *Sim) Describe() string {
	var b strings.Builder
	engines := s.cfg.engineGPUs()
	fmt.Fprintf(&b, "simulated %d engines, %s", len(engines), s.cfg.Model)
	if l := (catalog.Layout{TP: s.cfg.Engine.TP, KVCacheDtype: s.cfg.Engine.KVCacheDtype, RopeScaling: s.cfg.Engine.ModelOverrides != ""}); l.TPSize() > 1 || l.FP8KV() || l.RopeScaling {
		fmt.Fprintf(&b, " (%s)", l)
	}
	b.WriteString(":")
	seen := map[string]bool{}
	for _, gpu := range engines {
		if seen[gpu] {
			continue
		}
		seen[gpu] = true
		n := 0
		for _, g := range engines {
			if g == gpu {
				n++
			}
		}
		blocks, cpuBlocks := 0, 0
		if core, err := sim.NewCore(s.cfg.engineConfig(gpu), nil); err == nil {
			blocks, cpuBlocks = core.Config().NumGPUBlocks, core.Config().NumCPUBlocks
		}
		label := gpu
		if tp := max(s.cfg.Engine.TP, 1); tp > 1 {
			label = fmt.Sprintf("%dx%s", tp, gpu)
		}
		fmt.Fprintf(&b, " %dx %s (%d KV blocks", n, label, blocks)
		if cpuBlocks > 0 {
			fmt.Fprintf(&b, " + %d in %g GiB RAM", cpuBlocks, s.cfg.KVOffloadingGiB)
		}
		fmt.Fprintf(&b, ", prefill %.0f tok/s)", s.profiles[gpu].PrefillTokensPerSec)
	}
	fmt.Fprintf(&b, "; KV event latency %v", s.cfg.EventLatency)
	return b.String()
}

// EngineStats is what one engine counted during a run.
type EngineStats struct {
	GPU string `json:"gpu"`
	// NumGPUBlocks is the engine's KV cache size.
	NumGPUBlocks int `json:"num_gpu_blocks"`
	// PrefillTokensPerSec is the speed the router was told.
	PrefillTokensPerSec float64 `json:"prefill_tokens_per_sec"`
	// PrefixQueries and PrefixHits are vLLM's prefix-cache counters, in
	// tokens; like every engine counter here they include the prefills in
	// the tool pause (SimConfig.InferHints), which Requests, the requests
	// routed to the engine, does not.
	PrefixQueries int64 `json:"prefix_queries"`
	PrefixHits    int64 `json:"prefix_hits"`
	// NumCPUBlocks is the host-RAM tier's size, ExternalPrefixHits the
	// prompt tokens loaded from it (vLLM's external prefix-cache counter).
	NumCPUBlocks       int   `json:"num_cpu_blocks,omitempty"`
	ExternalPrefixHits int64 `json:"external_prefix_hits,omitempty"`
	// DiskLoadedBlocks counts blocks loaded from the node store and
	// DiskStoredBlocks blocks written to it.
	DiskLoadedBlocks int64 `json:"disk_loaded_blocks,omitempty"`
	DiskStoredBlocks int64 `json:"disk_stored_blocks,omitempty"`
	Preemptions      int64 `json:"preemptions"`
	Requests         int   `json:"requests"`
	Steps            int64 `json:"steps"`
}

// SimRun is the outcome of one simulated run.
type SimRun struct {
	Summary RunSummary
	Results []Result
	Engines []EngineStats
	// Elapsed is the virtual time from start to the last request's end.
	Elapsed time.Duration
	// Queued counts requests that waited in the router queue because
	// every worker was saturated; MaxQueue is the longest that queue got.
	Queued, MaxQueue int
	// EventBatches counts KV event batches delivered to the router.
	EventBatches int64
	// Restart is what the turns after the engines' restart found; nil
	// without SimConfig.RestartAt (or a run that ended before it).
	Restart *RestartSummary
}

// RestartSummary measures what survived a restart of every engine: the
// first request of each session after it, against the prompt and output
// of that session's last request before it (whole blocks: the context the
// turn could reuse).
type RestartSummary struct {
	At time.Duration `json:"at_ms"`
	// Turns counts those first requests; ContextTokens sums the context
	// they could reuse.
	Turns         int   `json:"turns"`
	ContextTokens int64 `json:"context_tokens"`
	// CachedTokens is what of their prompts the engines did not recompute,
	// SSDTokens the part loaded from the node store.
	CachedTokens int64 `json:"cached_tokens"`
	SSDTokens    int64 `json:"ssd_tokens"`
}

// ReusedShare is the share of the reusable context the turns did not
// recompute (at most 1).
func (r *RestartSummary) ReusedShare() float64 {
	if r.ContextTokens == 0 {
		return 0
	}
	return min(float64(r.CachedTokens)/float64(r.ContextTokens), 1)
}

// SSDShare is the share of the reusable context the turns loaded from the
// node store themselves.
func (r *RestartSummary) SSDShare() float64 {
	if r.ContextTokens == 0 {
		return 0
	}
	return float64(r.SSDTokens) / float64(r.ContextTokens)
}

// restartSummary finds, per session, the last successful request sent
// before at and the first sent after it.
func restartSummary(results []Result, at time.Duration) *RestartSummary {
	type pair struct{ before, after *Result }
	bySession := map[string]*pair{}
	for i := range results {
		r := &results[i]
		if r.Err != nil {
			continue
		}
		p := bySession[r.Session]
		if p == nil {
			p = &pair{}
			bySession[r.Session] = p
		}
		switch {
		case r.Sent < at && (p.before == nil || r.Sent > p.before.Sent):
			p.before = r
		case r.Sent >= at && (p.after == nil || r.Sent < p.after.Sent):
			p.after = r
		}
	}
	s := &RestartSummary{At: at}
	for _, p := range bySession {
		if p.before == nil || p.after == nil {
			continue
		}
		bs := tokenizer.DefaultBlockSize
		s.Turns++
		s.ContextTokens += int64(min(p.before.PromptTokens+p.before.OutputTokens, p.after.PromptTokens) / bs * bs)
		s.CachedTokens += int64(p.after.CachedTokens)
		s.SSDTokens += int64(p.after.SSDCachedTokens)
	}
	return s
}

// EngineHitRate returns the engines' GPU prefix-cache hit rate from their
// own counters: hit tokens over looked-up tokens. Tokens loaded from host
// RAM are not GPU hits; RAMHitRate counts them.
func (r *SimRun) EngineHitRate() float64 {
	var q, h int64
	for _, e := range r.Engines {
		q += e.PrefixQueries
		h += e.PrefixHits
	}
	if q == 0 {
		return 0
	}
	return float64(h) / float64(q)
}

// RAMHitRate returns the share of looked-up prompt tokens the engines loaded
// from their host-RAM tier.
func (r *SimRun) RAMHitRate() float64 {
	var q, h int64
	for _, e := range r.Engines {
		q += e.PrefixQueries
		h += e.ExternalPrefixHits
	}
	if q == 0 {
		return 0
	}
	return float64(h) / float64(q)
}

// Run runs workload w under policy on a fresh cluster until the workload
// finishes or ctx ends, and summarises it as concurrency level sessions.
// progress, if not nil, is called as requests end.
func (s *Sim) Run(ctx context.Context, w Workload, policy string, sessions int, progress func(ProgressState)) (*SimRun, error) {
	d, err := s.newDES(w, policy)
	if err != nil {
		return nil, err
	}
	defer d.close()
	d.progress = progress
	d.label = fmt.Sprintf("%s, %d sessions", policy, sessions)
	if err := d.run(ctx); err != nil {
		return nil, err
	}
	return d.result(policy, sessions), nil
}

// RunSummary runs like Run and returns only the summary; it makes *Sim a
// Runner for RunPlan.
func (s *Sim) RunSummary(ctx context.Context, w Workload, policy string, sessions int, progress func(ProgressState)) (RunSummary, error) {
	run, err := s.Run(ctx, w, policy, sessions, progress)
	if err != nil {
		return RunSummary{}, err
	}
	return run.Summary, nil
}
