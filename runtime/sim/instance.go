package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/kvevents"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// InstanceOptions describes one whole simulated server: the engine model,
// its HTTP API and its KV-event sockets, and how it starts.
type InstanceOptions struct {
	// Engine is the engine model; Engine.Kind picks the engine the
	// instance stands in for (vLLM or SGLang).
	Engine Config
	// Listen is the HTTP address, e.g. "127.0.0.1:8100" (port 0 picks one).
	// A vLLM-flavoured instance with a fixed port binds it only when its
	// start-up ends, so that the port refuses connections while the engine
	// loads, as vLLM's does; port 0 is bound at once, so that the address
	// is known. An SGLang-flavoured instance binds at once and answers 503
	// until its warm-up ends.
	Listen string
	// KVEvents and KVReplay are ZMQ addresses, e.g. "tcp://127.0.0.1:5557"
	// or "tcp://*:5557" (all interfaces); an empty KVEvents publishes no
	// events (and KVReplay must be empty).
	KVEvents, KVReplay string
	Topic              string
	// Format is the KV-event payload layout (default vLLM's current map
	// form); the SGLang flavour writes one of SGLang's (positional unless
	// FormatSGLangMap).
	Format kvevents.Format
	// EngineVersion is the engine release the instance plays, e.g.
	// "0.20.0": when set, it decides the event layout as that release
	// does (runtime.EngineKind.ReleaseFor) instead of Format.
	EngineVersion string
	// KVEventFault, one of runtime.SimKVEventFaults, has the publisher
	// play a fault of the events; "" for none.
	KVEventFault string
	// KVEventComponentTypes labels the events of an SGLang-flavoured
	// instance with their component type, as SGLang's
	// --enable-kv-events-component-types does; other flavours ignore it.
	KVEventComponentTypes bool
	// ServedModelName is the model id clients use; default Engine.Model.
	ServedModelName string
	// ModelPath is what the engine was told to load (a Hugging Face
	// repository or a path), shown in its start-up lines and SGLang's
	// /server_info; default Engine.Model.
	ModelPath string
	// Speedup runs the modelled GPU this many times faster than real time;
	// default 1.
	Speedup float64
	// StartupDelay is how long the simulated start-up takes (downloading
	// and loading weights, profiling, capturing CUDA graphs); 0 starts at
	// once, printing the same lines.
	StartupDelay time.Duration
	// Failure makes the start-up fail: FailureOOM while loading the weights,
	// FailureExit after; Run then returns an error wrapping
	// ErrStartupFailed.
	Failure Failure
	// Console receives the engine's own output lines, formatted as the real
	// engine prints them (start-up progress, errors); nil discards them.
	Console io.Writer
	// ServerArgs are further SGLang server arguments (by SGLang's field
	// names, e.g. "tool_call_parser") shown in /server_info and the
	// start-up lines of the SGLang flavour.
	ServerArgs map[string]any
	// HealthCheckTimeout bounds SGLang's /health_generate; default 20s.
	HealthCheckTimeout time.Duration
	// Profile serves Go's runtime profiles (ServerOptions.Profile).
	Profile bool
	// SleepMode serves the kind's sleep endpoints (vLLM's
	// --enable-sleep-mode under VLLM_SERVER_DEV_MODE=1, SGLang's
	// --enable-memory-saver), timed by catalog.SwapTimesOf; WeightsBackup
	// is SGLang's --enable-weights-cpu-backup (SleepOptions).
	SleepMode, WeightsBackup bool
	Tokenizer                Tokenizer // required
	Logger                   *slog.Logger
}

// Instance is a simulated vLLM or SGLang server whose sockets are bound
// (the HTTP one possibly only when it has started, see
// InstanceOptions.Listen) and which serves once Run is called.
type Instance struct {
	opts      InstanceOptions
	server    *Server
	core      *Core
	runner    *Runner
	publisher *Publisher // nil without KV events
	cfg       Config
	log       *slog.Logger

	mu sync.Mutex
	ln net.Listener // nil until bound
}

// EventFormat is the layout of the instance's KV events.
func (i *Instance) EventFormat() kvevents.Format { return i.opts.Format }

// NewInstance validates opts and binds the instance's ZMQ sockets and,
// unless it binds later (see InstanceOptions.Listen), its HTTP listener, so
// that their addresses are known before Run. A caller that never calls Run
// must call Close.
func NewInstance(opts InstanceOptions) (*Instance, error) {
	if err := opts.Engine.Validate(); err != nil {
		return nil, err
	}
	if opts.KVReplay != "" && opts.KVEvents == "" {
		return nil, errors.New("sim instance: a replay address needs a KV-events address")
	}
	if opts.Tokenizer == nil {
		return nil, errors.New("sim instance: no tokenizer")
	}
	if _, err := ParseFailure(string(opts.Failure)); err != nil {
		return nil, fmt.Errorf("sim instance: %w", err)
	}
	if opts.StartupDelay < 0 {
		return nil, errors.New("sim instance: negative start-up delay")
	}
	if opts.Speedup <= 0 {
		opts.Speedup = 1
	}
	if opts.ServedModelName == "" {
		opts.ServedModelName = opts.Engine.Model
	}
	if opts.ModelPath == "" {
		opts.ModelPath = opts.Engine.Model
	}
	if opts.EngineVersion != "" {
		// The release decides its own layout.
		opts.Format = EventFormatOf(opts.Engine.Kind, opts.EngineVersion)
	}
	if opts.Engine.Kind == hruntime.KindSGLang && !opts.Format.SGLang() {
		// SGLang's layouts are its own: positional (up to v0.5.19) or map
		// events (v0.5.23).
		opts.Format = hruntime.KindSGLang.Descriptor().EventFormat
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	inst := &Instance{opts: opts, log: log}

	var sink EventSink // stays a nil interface without events
	if opts.KVEvents != "" {
		p, err := NewPublisher(PublisherOptions{
			Endpoint: opts.KVEvents, ReplayEndpoint: opts.KVReplay, Topic: opts.Topic,
			Format: opts.Format, SpecKinds: namesSpecKinds(opts.Engine.Kind, opts.EngineVersion, opts.Format),
			ComponentTypes: opts.KVEventComponentTypes && opts.Engine.Kind == hruntime.KindSGLang,
			Fault:          opts.KVEventFault, Logger: log,
		})
		if err != nil {
			return nil, fmt.Errorf("sim instance: %w", err)
		}
		inst.publisher, sink = p, p
	}
	core, err := NewCore(opts.Engine, sink)
	if err != nil {
		inst.Close()
		return nil, fmt.Errorf("sim instance: %w", err)
	}
	inst.core, inst.cfg = core, core.Config()
	runner := NewRunner(core, RunnerOptions{Speedup: opts.Speedup, Logger: log})
	inst.runner = runner
	inst.server, err = NewServer(ServerOptions{
		Engine: runner, Tokenizer: opts.Tokenizer, ServedModelName: opts.ServedModelName,
		ModelName: inst.cfg.Model, MaxModelLen: inst.cfg.MaxModelLen, NumGPUBlocks: inst.cfg.NumGPUBlocks,
		BlockSize: inst.cfg.BlockSize, GPUMemoryUtilization: inst.cfg.GPUMemoryUtilization,
		NumCPUBlocks: inst.cfg.NumCPUBlocks, NodeStore: inst.cfg.Store != nil, Speedup: opts.Speedup, Seed: inst.cfg.Seed, Agent: inst.cfg.Agent,
		Kind: inst.cfg.Kind, ModelPath: opts.ModelPath, HealthCheckTimeout: opts.HealthCheckTimeout,
		Profile: opts.Profile, Sleep: inst.sleepOptions(), Logger: log,
	})
	if err != nil {
		inst.Close()
		return nil, fmt.Errorf("sim instance: %w", err)
	}
	if !inst.bindsLate() {
		if err := inst.listen(); err != nil {
			inst.Close()
			return nil, err
		}
	}
	inst.server.opts.Version = opts.EngineVersion
	if inst.cfg.Kind == hruntime.KindSGLang {
		inst.server.opts.ServerInfo = inst.serverInfo()
	}
	return inst, nil
}

// sleepOptions are the server's sleep endpoints when asked for: the
// catalog's swap times of the modelled model and GPU, the engine's
// reservation of GPU memory while awake, and a reset of its prefix cache
// when it sleeps.
func (inst *Instance) sleepOptions() *SleepOptions {
	if !inst.opts.SleepMode {
		return nil
	}
	gpu, model := inst.core.GPU(), inst.core.Model()
	times := catalog.SwapTimesOf(gpu, model, catalog.Layout{})
	return &SleepOptions{
		Times:         times,
		AwakeBytes:    uint64(float64(gpu.MemoryBytes) * inst.cfg.GPUMemoryUtilization),
		ResidualBytes: uint64(times.ResidualBytes),
		WeightsBackup: inst.opts.WeightsBackup,
		Reset:         inst.runner.Reset,
	}
}

// bindsLate reports whether the HTTP listener is bound only once the
// engine has started: a vLLM flavour with a fixed port.
func (inst *Instance) bindsLate() bool {
	if inst.cfg.Kind != hruntime.KindVLLM {
		return false
	}
	_, port, err := net.SplitHostPort(inst.opts.Listen)
	return err == nil && port != "" && port != "0"
}

func (inst *Instance) listen() error {
	ln, err := net.Listen("tcp", inst.opts.Listen)
	if err != nil {
		return fmt.Errorf("sim instance: listen: %w", err)
	}
	inst.mu.Lock()
	inst.ln = ln
	inst.mu.Unlock()
	inst.log.Info("listening", "http", ln.Addr().String(),
		"kv_events", inst.KVEventsEndpoint(), "kv_replay", inst.KVReplayEndpoint())
	return nil
}

func (inst *Instance) listener() net.Listener {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.ln
}

// Config is the engine's effective configuration, with derived values.
func (inst *Instance) Config() Config { return inst.cfg }

// BaseURL is the root of the instance's OpenAI API, e.g.
// "http://127.0.0.1:8100". An instance listening on all interfaces is
// reached on loopback.
func (inst *Instance) BaseURL() string {
	addr := inst.opts.Listen
	if ln := inst.listener(); ln != nil {
		addr = ln.Addr().String()
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// KVEventsEndpoint and KVReplayEndpoint are the bound ZMQ addresses, or ""
// when the instance publishes no events or has no replay socket.
func (inst *Instance) KVEventsEndpoint() string {
	if inst.publisher == nil {
		return ""
	}
	return inst.publisher.Endpoint()
}

// KVReplayEndpoint: see KVEventsEndpoint.
func (inst *Instance) KVReplayEndpoint() string {
	if inst.publisher == nil {
		return ""
	}
	return inst.publisher.ReplayEndpoint()
}

// Run starts the engine (printing its start-up lines over StartupDelay),
// serves until ctx is done or a part fails, then releases every socket. A
// start-up told to fail returns an error wrapping ErrStartupFailed; ctx
// ending, during start-up or after, returns nil.
func (inst *Instance) Run(ctx context.Context) error {
	eff := inst.cfg
	inst.log.Info("effective config", "flavor", eff.Kind, "gpu", eff.GPU, "model", eff.Model,
		"served_model_name", inst.opts.ServedModelName,
		"num_gpu_blocks", eff.NumGPUBlocks, "block_size", eff.BlockSize, "max_num_seqs", eff.MaxNumSeqs,
		"max_num_batched_tokens", eff.MaxNumBatchedTokens, "max_model_len", eff.MaxModelLen,
		"gpu_memory_utilization", eff.GPUMemoryUtilization, "scheduling_policy", eff.SchedulingPolicy,
		"seed", eff.Seed, "speedup", inst.opts.Speedup, "kv_offloading_gib", eff.CPUOffloadGiB,
		"num_cpu_blocks", eff.NumCPUBlocks, "startup_delay", inst.opts.StartupDelay, "failure", inst.opts.Failure)

	g, gctx := errgroup.WithContext(ctx)
	if inst.publisher != nil {
		g.Go(func() error { return inst.publisher.Run(gctx) })
	}
	var served atomic.Bool
	serve := func(ln net.Listener) {
		served.Store(true)
		g.Go(func() error { return inst.server.Run(gctx, ln) })
	}
	st := inst.newStartup()
	if inst.cfg.Kind == hruntime.KindSGLang {
		inst.server.starting.Store(true)
		serve(inst.listener())
		g.Go(func() error { return inst.startSGLang(gctx, st) })
	} else {
		g.Go(func() error {
			ok, err := st.runVLLM(gctx)
			if !ok || err != nil {
				return err
			}
			if inst.listener() == nil {
				if err := inst.listen(); err != nil {
					return err
				}
			}
			serve(inst.listener())
			st.vllmServing()
			return nil
		})
	}
	err := g.Wait()
	if ln := inst.listener(); ln != nil {
		ln.Close() // not served when start-up ended early
	}
	if err == nil && served.Load() && (inst.cfg.Kind == hruntime.KindVLLM || !inst.server.starting.Load()) {
		st.shutdown()
	}
	return err
}

// startSGLang runs SGLang's start-up while its HTTP server answers 503,
// then its warm-up request, and opens the server.
func (inst *Instance) startSGLang(ctx context.Context, st *startup) error {
	ok, err := st.runSGLang(ctx, inst.sglangServerArgsLine())
	if !ok || err != nil {
		return err
	}
	st.sglangServing()
	warmup := inst.opts.Tokenizer.Encode("The capital city of France is")
	if len(warmup) == 0 {
		warmup = []uint32{0}
	}
	if !st.pause(ctx, phaseServe) {
		return nil
	}
	if err := inst.server.generateOne(ctx, "WARMUP", warmup); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("sim instance: warm-up request: %w", err)
	}
	inst.server.starting.Store(false)
	st.sglangReady(len(warmup))
	return nil
}

// newStartup prepares the start-up lines for the instance's flavour.
func (inst *Instance) newStartup() *startup {
	host, port := inst.announced()
	return &startup{
		kind: inst.cfg.Kind, delay: inst.opts.StartupDelay, failure: inst.opts.Failure,
		c:   &console{w: inst.opts.Console, clk: clock.Real{}, pid: os.Getpid()},
		cfg: inst.cfg, gpu: inst.core.GPU(), model: inst.core.Model(),
		modelPath: inst.opts.ModelPath, served: inst.opts.ServedModelName,
		host: host, port: port,
	}
}

// announced is the host and port the server names in its start-up lines:
// what it was told to listen on, the bound port when it picked one.
func (inst *Instance) announced() (string, int) {
	host, portStr, _ := net.SplitHostPort(inst.opts.Listen)
	port, _ := strconv.Atoi(portStr)
	if ln := inst.listener(); ln != nil {
		if a, ok := ln.Addr().(*net.TCPAddr); ok {
			port = a.Port
		}
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port
}

// serverInfo is SGLang's /server_info beyond what the server fills in
// itself: the server arguments and scheduler info the instance knows.
func (inst *Instance) serverInfo() map[string]any {
	cfg := inst.cfg
	host, port := inst.announced()
	info := map[string]any{
		"host": host, "port": port,
		"max_running_requests": cfg.MaxNumSeqs, "chunked_prefill_size": cfg.MaxNumBatchedTokens,
		"max_prefill_tokens": 16384, "schedule_policy": cfg.SchedulingPolicy,
		"tp_size": cfg.TP, "dp_size": 1, "dtype": "auto", "kv_cache_dtype": cfg.KVCacheDtype,
		"enable_hierarchical_cache": cfg.NumCPUBlocks > 0,
		// The release played, as SGLang reports its own.
		"version": playedVersion(hruntime.KindSGLang, inst.opts.EngineVersion),
		"internal_states": []map[string]any{{
			"last_gen_throughput": 0.0,
			"memory_usage": map[string]any{
				"weight":         round2(inst.core.Model().WeightBytes / float64(cfg.TP) / gibF),
				"kvcache":        round2(float64(cfg.NumGPUBlocks*cfg.Perf().RankBlockBytes()) / gibF),
				"token_capacity": cfg.NumGPUBlocks * cfg.BlockSize,
				"graph":          0.35,
			},
		}},
	}
	for k, v := range inst.opts.ServerArgs {
		if _, set := info[k]; !set {
			info[k] = v
		}
	}
	return info
}

func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }

// sglangServerArgsLine renders the server arguments as SGLang's start-up
// line prints its ServerArgs dataclass.
func (inst *Instance) sglangServerArgsLine() string {
	cfg := inst.cfg
	host, port := inst.announced()
	fields := []struct {
		name string
		v    any
	}{
		{"model_path", inst.opts.ModelPath}, {"tokenizer_path", inst.opts.ModelPath},
		{"context_length", cfg.MaxModelLen}, {"host", host}, {"port", port},
		{"mem_fraction_static", cfg.GPUMemoryUtilization}, {"max_running_requests", cfg.MaxNumSeqs},
		{"chunked_prefill_size", cfg.MaxNumBatchedTokens}, {"schedule_policy", cfg.SchedulingPolicy},
		{"page_size", cfg.BlockSize}, {"served_model_name", inst.opts.ServedModelName},
		{"random_seed", cfg.Seed}, {"enable_metrics", true},
		{"enable_hierarchical_cache", cfg.NumCPUBlocks > 0},
	}
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		parts = append(parts, f.name+"="+pyRepr(f.v))
	}
	return strings.Join(parts, ", ")
}

// pyRepr writes a value as Python's repr would.
func pyRepr(v any) string {
	switch x := v.(type) {
	case string:
		return "'" + x + "'"
	case bool:
		if x {
			return "True"
		}
		return "False"
	}
	return fmt.Sprint(v)
}

// Close releases the sockets of an instance that will never Run.
func (inst *Instance) Close() {
	if ln := inst.listener(); ln != nil {
		ln.Close()
	}
	if inst.publisher != nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = inst.publisher.Run(ctx) // closes the sockets on return
	}
}

// Core returns the instance's engine core. It is owned by the running
// engine loop: read it only after Run has returned.
func (inst *Instance) Core() *Core { return inst.core }

// Stats returns the engine's counters as of its last step. Safe from any
// goroutine.
func (inst *Instance) Stats() Stats { return inst.runner.Stats() }
