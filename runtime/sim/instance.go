package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"golang.org/x/sync/errgroup"

	"github.com/hearth-llm/hearth/kvevents"
)

// InstanceOptions describes one whole simulated vLLM server: the engine
// model, its HTTP API and its KV-event sockets.
type InstanceOptions struct {
	Engine Config
	// Listen is the HTTP address, e.g. "127.0.0.1:8100" (port 0 picks one).
	Listen string
	// KVEvents and KVReplay are ZMQ addresses, e.g. "tcp://127.0.0.1:5557";
	// an empty KVEvents publishes no events (and KVReplay must be empty).
	KVEvents, KVReplay string
	Topic              string
	Format             kvevents.Format
	// ServedModelName is the model id clients use; default Engine.Model.
	ServedModelName string
	// Speedup runs the modelled GPU this many times faster than real time;
	// default 1.
	Speedup   float64
	Tokenizer Tokenizer // required
	Logger    *slog.Logger
}

// Instance is a simulated vLLM server whose sockets are bound and which
// serves once Run is called.
type Instance struct {
	server    *Server
	core      *Core
	runner    *Runner
	publisher *Publisher // nil without KV events
	ln        net.Listener
	cfg       Config
	served    string
	speedup   float64
	log       *slog.Logger
}

// NewInstance validates opts and binds the instance's HTTP listener and ZMQ
// sockets, so their addresses are known before Run. A caller that never
// calls Run must call Close.
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
	if opts.Speedup <= 0 {
		opts.Speedup = 1
	}
	if opts.ServedModelName == "" {
		opts.ServedModelName = opts.Engine.Model
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	inst := &Instance{served: opts.ServedModelName, speedup: opts.Speedup, log: log}

	var sink EventSink // stays a nil interface without events
	if opts.KVEvents != "" {
		p, err := NewPublisher(PublisherOptions{
			Endpoint: opts.KVEvents, ReplayEndpoint: opts.KVReplay, Topic: opts.Topic,
			Format: opts.Format, Logger: log,
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
		NumCPUBlocks: inst.cfg.NumCPUBlocks, Speedup: opts.Speedup, Seed: inst.cfg.Seed, Logger: log,
	})
	if err != nil {
		inst.Close()
		return nil, fmt.Errorf("sim instance: %w", err)
	}
	if inst.ln, err = net.Listen("tcp", opts.Listen); err != nil {
		inst.Close()
		return nil, fmt.Errorf("sim instance: listen: %w", err)
	}
	return inst, nil
}

// Config is the engine's effective configuration, with derived values.
func (inst *Instance) Config() Config { return inst.cfg }

// BaseURL is the root of the instance's OpenAI API, e.g.
// "http://127.0.0.1:8100".
func (inst *Instance) BaseURL() string { return "http://" + inst.ln.Addr().String() }

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

// Run serves until ctx is done or a part fails, then releases every socket.
func (inst *Instance) Run(ctx context.Context) error {
	eff := inst.cfg
	inst.log.Info("effective config", "gpu", eff.GPU, "model", eff.Model, "served_model_name", inst.served,
		"num_gpu_blocks", eff.NumGPUBlocks, "block_size", eff.BlockSize, "max_num_seqs", eff.MaxNumSeqs,
		"max_num_batched_tokens", eff.MaxNumBatchedTokens, "max_model_len", eff.MaxModelLen,
		"gpu_memory_utilization", eff.GPUMemoryUtilization, "scheduling_policy", eff.SchedulingPolicy,
		"seed", eff.Seed, "speedup", inst.speedup, "kv_offloading_gib", eff.CPUOffloadGiB,
		"num_cpu_blocks", eff.NumCPUBlocks)
	inst.log.Info("listening", "http", inst.ln.Addr().String(),
		"kv_events", inst.KVEventsEndpoint(), "kv_replay", inst.KVReplayEndpoint())

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return inst.server.Run(ctx, inst.ln) })
	if inst.publisher != nil {
		g.Go(func() error { return inst.publisher.Run(ctx) })
	}
	return g.Wait()
}

// Close releases the sockets of an instance that will never Run.
func (inst *Instance) Close() {
	if inst.ln != nil {
		inst.ln.Close()
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
