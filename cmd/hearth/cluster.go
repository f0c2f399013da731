package main

import (
	"context"
	"fmt"
	"log/slog"

	"golang.org/x/sync/errgroup"

	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// simWorker is one simulated engine on loopback and the router worker it
// serves as.
type simWorker struct {
	name       string
	gpu        nodes.GPU
	id         router.WorkerID
	instance   *sim.Instance
	subscriber *router.Subscriber
}

// simCluster is a set of simulated engines, one per simulated GPU, each
// registered with the router and followed over its ZMQ KV-event stream, as
// real engines on real GPUs would be.
type simCluster struct {
	workers []*simWorker
}

type simClusterOptions struct {
	GPUs  []nodes.GPU
	Model string
	// NumGPUBlocks overrides the KV cache size the engines derive from GPU
	// memory (0 keeps it).
	NumGPUBlocks int
	// KVOffloadingGiB is each engine's host-RAM KV tier (0: none), as
	// vLLM's --kv-offloading-size.
	KVOffloadingGiB float64
	Speedup         float64
	Seed            int64
	Tokenizer       sim.Tokenizer
	Logger          *slog.Logger
}

// newSimCluster binds every engine's sockets on loopback and registers the
// engines with rt. Nothing runs until Run; on error nothing is left open.
func newSimCluster(rt *router.Router, opts simClusterOptions) (*simCluster, error) {
	c := &simCluster{}
	for _, gpu := range opts.GPUs {
		name := fmt.Sprintf("%s/gpu%d", gpu.Node, gpu.Index)
		log := opts.Logger.With("worker", name)
		engine := sim.Config{
			GPU: gpu.Kind, Model: opts.Model, NumGPUBlocks: opts.NumGPUBlocks,
			CPUOffloadGiB: opts.KVOffloadingGiB, Seed: opts.Seed + int64(gpu.Index),
		}
		// What a deployment measures of each engine at start-up, so the
		// router weighs a 3090 next to a 4090 right.
		profile, err := sim.ProfileOf(engine)
		if err != nil {
			c.close(rt)
			return nil, fmt.Errorf("engine %s: %w", name, err)
		}
		inst, err := sim.NewInstance(sim.InstanceOptions{
			Engine:   engine,
			Listen:   "127.0.0.1:0",
			KVEvents: "tcp://127.0.0.1:0",
			KVReplay: "tcp://127.0.0.1:0",
			Speedup:  opts.Speedup, Tokenizer: opts.Tokenizer, Logger: log,
		})
		if err != nil {
			c.close(rt)
			return nil, fmt.Errorf("engine %s: %w", name, err)
		}
		id, sub, err := attachEngine(rt, name, profile, inst.KVEventsEndpoint(), inst.KVReplayEndpoint(), log)
		if err != nil {
			inst.Close()
			c.close(rt)
			return nil, fmt.Errorf("engine %s: %w", name, err)
		}
		c.workers = append(c.workers, &simWorker{name: name, gpu: gpu, id: id, instance: inst, subscriber: sub})
	}
	return c, nil
}

// attachEngine registers an engine measured as profile with rt under name,
// and builds the subscriber that follows its KV events (run it with Run).
func attachEngine(rt *router.Router, name string, profile sim.Profile, events, replay string, log *slog.Logger) (router.WorkerID, *router.Subscriber, error) {
	id, err := rt.AddWorker(router.WorkerInfo{
		Name:                name,
		CapacityBlocks:      profile.GPUBlocks,
		PrefillTokensPerSec: profile.PrefillTokensPerSec,
		RAMCapacityBlocks:   profile.CPUBlocks,
		BlockBytes:          profile.BlockBytes,
		LoadBytesPerSec:     profile.LoadBytesPerSec,
	})
	if err != nil {
		return 0, nil, err
	}
	sub, err := router.NewSubscriber(router.SubscriberConfig{
		Endpoint:       events,
		ReplayEndpoint: replay,
		Topic:          "kv-events",
		Workers:        []router.WorkerID{id},
		Logger:         log,
	}, rt.Index())
	if err != nil {
		rt.RemoveWorker(id)
		return 0, nil, err
	}
	return id, sub, nil
}

// close releases the sockets of a cluster that will never run.
func (c *simCluster) close(rt *router.Router) {
	for _, w := range c.workers {
		w.instance.Close()
		rt.RemoveWorker(w.id)
	}
}

// Run runs every engine and every event subscriber until ctx is done or one
// of them fails.
func (c *simCluster) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, w := range c.workers {
		g.Go(func() error { return w.instance.Run(ctx) })
		g.Go(func() error { return w.subscriber.Run(ctx) })
	}
	return g.Wait()
}

// ingestStats lists the KV-event ingest counters of every worker.
func (c *simCluster) ingestStats() []router.IngestStats {
	var out []router.IngestStats
	for _, w := range c.workers {
		out = append(out, w.subscriber.Stats()...)
	}
	return out
}

// workerName returns the name a worker was registered under.
func (c *simCluster) workerName(id router.WorkerID) string {
	for _, w := range c.workers {
		if w.id == id {
			return w.name
		}
	}
	return fmt.Sprintf("worker%d", id)
}
