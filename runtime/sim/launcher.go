package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

// Launcher runs simulated engines inside the daemon's process, each on
// loopback ports of its own: real HTTP and ZMQ, no child process.
type Launcher struct {
	Tokenizer Tokenizer // required
	// HTTPClient probes readiness; default hruntime.NewProbeClient().
	HTTPClient *http.Client
	Logger     *slog.Logger
	// LogLines is how many of an engine's log lines are kept; default 200.
	LogLines int
	// NodeStore, when set, gives an engine whose spec names a KV store
	// directory (Spec.KVStoreDir) its part of the node's store, which the
	// daemon opened once for all its engines.
	NodeStore func(spec hruntime.Spec) NodeStore
}

var _ hruntime.Launcher = (*Launcher)(nil)

// Name is "sim".
func (l *Launcher) Name() string { return "sim" }

// ConfigOf is the simulated engine's configuration for a spec: one engine
// over the spec's GPUs (tensor parallel over all of them) running as the
// GPU the sizing picks (runtime.EngineConfigOf: the weakest of them), its
// KV cache dtype as the flavour spells it, and its model overrides.
func ConfigOf(spec hruntime.Spec) Config {
	e := hruntime.EngineConfigOf(spec)
	c := Config{
		GPU: e.GPU.Kind, Model: spec.Model, NumGPUBlocks: e.NumGPUBlocks,
		MaxModelLen: e.MaxModelLen, GPUMemoryUtilization: e.MemoryFraction,
		CPUOffloadGiB: e.CPUOffloadGiB, Seed: spec.Seed, Kind: spec.Engine,
		TP:             e.TP,
		ModelOverrides: spec.ModelOverrides,
		Agent:          AgentOptions{AllowWriteTools: spec.AllowWriteTools, MinToolCalls: spec.MinToolCalls, MaxToolCalls: spec.MaxToolCalls},
	}
	if k, ok := hruntime.Lookup(spec.Engine); ok {
		c.KVCacheDtype = k.KVCacheDtypeFlag(spec.KVCacheDtype)
		// Priority scheduling on, as the engine's command line turns it on.
		if k.Priority != nil {
			c.SchedulingPolicy, c.PriorityHigherFirst = PolicyPriority, !k.Priority.LowerFirst
		}
	}
	return c
}

// Launch binds the engine's sockets and runs it until Stop.
func (l *Launcher) Launch(ctx context.Context, spec hruntime.Spec) (hruntime.Handle, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if !spec.Simulated || !Plays(spec.Engine) {
		return nil, fmt.Errorf("sim launcher: engine %s is not a simulated vLLM or SGLang engine", spec.Name)
	}
	lines := l.LogLines
	if lines <= 0 {
		lines = 200
	}
	ring := hruntime.NewLogRing(lines, nil)
	parent := l.Logger
	if parent == nil {
		parent = slog.New(slog.DiscardHandler)
	}
	// The engine's own log lines go to the daemon's log and to the ring
	// that the engines API shows, as a child process's output would.
	log := slog.New(slog.NewMultiHandler(parent.Handler(), slog.NewTextHandler(ring, nil))).With("engine", spec.Name)
	engine := ConfigOf(spec)
	if spec.UsesKVStore() && l.NodeStore != nil {
		engine.Store = l.NodeStore(spec)
	}
	inst, err := NewInstance(InstanceOptions{
		Engine:   engine,
		Listen:   "127.0.0.1:0",
		KVEvents: "tcp://127.0.0.1:0",
		KVReplay: "tcp://127.0.0.1:0",
		Topic:    hruntime.KVEventsTopic,
		Speedup:  spec.Speedup, Tokenizer: l.Tokenizer, Logger: log,
		// The sleep flags the real engine would be started with
		// (EngineSleep.Flags) turn the simulated one's on too.
		SleepMode:     slices.Contains(spec.ExtraArgs, "--enable-sleep-mode") || slices.Contains(spec.ExtraArgs, "--enable-memory-saver"),
		WeightsBackup: slices.Contains(spec.ExtraArgs, "--enable-weights-cpu-backup"),
	})
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	client := l.HTTPClient
	if client == nil {
		client = hruntime.NewProbeClient()
	}
	h := &simHandle{
		inst: inst, model: spec.Model, ring: ring, client: client, cancel: cancel, exited: make(chan struct{}),
		endpoints: hruntime.Endpoints{
			BaseURL: inst.BaseURL(), KVEvents: inst.KVEventsEndpoint(), KVReplay: inst.KVReplayEndpoint(),
			Topic: hruntime.KVEventsTopic,
		},
	}
	go func() {
		h.err = inst.Run(runCtx)
		close(h.exited)
	}()
	return h, nil
}

// simHandle is one in-process simulated engine.
type simHandle struct {
	inst      *Instance
	model     string
	endpoints hruntime.Endpoints
	ring      *hruntime.LogRing
	client    *http.Client
	cancel    context.CancelFunc
	exited    chan struct{}
	err       error // set before exited closes
	stopOnce  sync.Once
}

func (h *simHandle) Endpoints() hruntime.Endpoints { return h.endpoints }

func (h *simHandle) Identity() hruntime.Identity { return hruntime.Identity{} }

func (h *simHandle) Logs() []string { return h.ring.Lines() }

// Ready probes the engine over HTTP like any other, so that the in-process
// engine goes through the readiness path real engines take.
func (h *simHandle) Ready(ctx context.Context) error {
	return hruntime.WaitReady(ctx, h.client, h.endpoints.BaseURL, h.model, h.exited)
}

// Wait returns nil after Stop: the engine ended because it was asked to.
func (h *simHandle) Wait() error {
	<-h.exited
	if errors.Is(h.err, context.Canceled) {
		return nil
	}
	return h.err
}

// Stop ends the engine's loop; an in-process engine stops at once.
func (h *simHandle) Stop(ctx context.Context) error {
	h.stopOnce.Do(h.cancel)
	select {
	case <-h.exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop: %w", context.Cause(ctx))
	}
}

// Instance is the running engine, for in-process readers of its counters.
func (h *simHandle) Instance() *Instance { return h.inst }

// LogsSince returns the lines logged after seq, for a reader that follows
// the engine's log (runtime.LogFollower).
func (h *simHandle) LogsSince(seq uint64) ([]string, uint64, <-chan struct{}) {
	return h.ring.LinesSince(seq)
}
