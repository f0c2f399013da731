package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/hearth-llm/hearth/cluster"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/router/ingest"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// fleet puts engines into service as the supervisor reports them ready,
// and takes them out when they go down: each is a router worker, with the
// engine's address, that follows the engine's KV events.
type fleet struct {
	rt  *router.Router
	log *slog.Logger
	// storeReadBytesPerSec is the read bandwidth of the node's SSD KV
	// store; 0 without one. Engines that use the store share its tier in
	// the router, which prices loads from it at this speed.
	storeReadBytesPerSec float64
	// store, when the node has an SSD KV store, is told of the blocks
	// simulated engines write to it, from their KV events (medium DISK):
	// it keeps itself to its capacity by them, without walking its
	// directory. A real engine's DISK events name its own files (SGLang's
	// pages, by a digest's first 8 bytes), which the store finds by
	// listing them.
	store storeWrites

	// cluster, when this node belongs to one, is offered every engine
	// put into service, so that peers route to it too.
	cluster clusterOffer

	mu   sync.Mutex
	live map[string]*liveEngine // by engine name
	// drained drains every engine's worker, those attached later too.
	drained bool
	// warm prefills the hot prefixes of a model on an engine put into
	// service (api.Gateway.WarmEngine); nil: none. Set once the gateway
	// exists, under mu.
	warm func(ctx context.Context, baseURL, model string) (int, error)
}

// storeWrites is what the fleet needs of the node store (kvbm.NodeStore).
type storeWrites interface {
	AddWriter(name string) error
	Written(writer, space string, hashes []uint64)
}

// liveEngine is an engine in service.
type liveEngine struct {
	id  router.WorkerID
	sub *ingest.Subscriber
	// ctx ends when the engine leaves service; baseURL and model are
	// where it serves what, for its warm-up.
	ctx            context.Context
	baseURL, model string
}

// setWarm makes warm the warm-up of every engine put into service from
// now on and starts it on those in service already (engines may be ready
// before the gateway that warms them exists).
func (f *fleet) setWarm(warm func(ctx context.Context, baseURL, model string) (int, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.warm = warm
	for name, le := range f.live {
		go f.warmEngine(name, le, warm)
	}
}

// warmEngine prefills the hot prefixes on an engine in service: in
// service already, so that a session that comes meanwhile is served and
// shares the prefill's computation in the engine's prefix cache.
func (f *fleet) warmEngine(name string, le *liveEngine, warm func(ctx context.Context, baseURL, model string) (int, error)) {
	n, err := warm(le.ctx, le.baseURL, le.model)
	switch {
	case err != nil && le.ctx.Err() == nil:
		f.log.Warn("engine not warmed", "engine", name, "prefixes", n, "error", err)
	case n > 0:
		f.log.Info("engine warmed with the prefixes sessions shared", "engine", name, "prefixes", n)
	}
}

var _ hruntime.Attacher = (*fleet)(nil)

func newFleet(rt *router.Router, log *slog.Logger) *fleet {
	return &fleet{rt: rt, log: log, live: make(map[string]*liveEngine)}
}

// Attach registers the engine with the router, follows its KV events until
// ctx ends (a restarted engine gets a fresh subscription: its sequence
// numbers start again at 0) and tells the gateway where it is.
//
// An engine whose tokenization differs from Hearth's (the supervisor's
// self-check) has its KV events ignored: their token ids hash to blocks no
// request of Hearth's tokenization would find. It is routed as an engine
// without events, on the caches Hearth predicts from the prompts it sent
// there. So is an engine whose KV events do not name the blocks of the
// supervisor's probe as Hearth predicts (the KV-event self-check): the
// index would hold blocks no request finds, or none.
func (f *fleet) Attach(ctx context.Context, e hruntime.ReadyEngine) (func(), error) {
	name, p := e.Spec.Name, e.Profile
	kvEvents, kvReplay := e.Endpoints.KVEvents, e.Endpoints.KVReplay
	release, known := e.Spec.Release()
	if !known {
		f.log.Warn("engine release newer than any Hearth knows: spoken to as the pinned release",
			"engine", name, "version", e.Spec.EngineVersion, "pinned", release.Version)
	}
	if e.Tokenizer.State == hruntime.TokenizerDiffers || e.KVEvents.State == hruntime.KVEventsDiffer {
		kvEvents, kvReplay = "", ""
	}
	info := router.WorkerInfo{
		Name:                name,
		BaseURL:             e.Endpoints.BaseURL,
		Model:               e.Spec.Model,
		CapacityBlocks:      p.GPUBlocks,
		PrefillTokensPerSec: p.PrefillTokensPerSec,
		RAMCapacityBlocks:   p.CPUBlocks,
		BlockBytes:          p.BlockBytes,
		LoadBytesPerSec:     p.LoadBytesPerSec,
		Approximate:         kvEvents == "",
	}
	if e.Spec.UsesKVStore() && f.storeReadBytesPerSec > 0 {
		info.Node, info.DiskLoadBytesPerSec = e.Spec.GPU.Node, f.storeReadBytesPerSec
	}
	id, err := f.rt.AddWorker(info)
	if err != nil {
		return nil, err
	}
	var sub *ingest.Subscriber
	done := make(chan struct{})
	if kvEvents == "" {
		close(done)
	} else {
		sub, err = ingest.NewSubscriber(ingest.SubscriberConfig{
			Endpoint:       kvEvents,
			ReplayEndpoint: kvReplay,
			Topic:          e.Endpoints.Topic,
			EventFormat:    release.EventFormat,
			Workers:        []router.WorkerID{id},
			Logger:         f.log.With("worker", name),
			OnDiskStored:   f.diskStored(e.Spec),
		}, f.rt.Index())
		if err != nil {
			f.rt.RemoveWorker(id)
			return nil, fmt.Errorf("kv events of %s: %w", name, err)
		}
		// One rank, one worker: its table maps the engine hashes a node's
		// disk store reports evicted (Router.RemoveNodeBlocks).
		f.rt.AttachIngester(id, sub.Ingesters()[0])
		go func() {
			defer close(done)
			if err := sub.Run(ctx); err != nil && ctx.Err() == nil {
				f.log.Warn("kv events stopped", "worker", name, "error", err)
			}
		}()
	}
	withdraw := func() {}
	if f.cluster != nil {
		w, err := f.cluster.AddLocalEngine(cluster.LocalEngine{
			Worker: info, KVEvents: kvEvents, KVReplay: kvReplay, Topic: e.Endpoints.Topic,
			EventFormat: release.EventFormat,
		})
		if err != nil {
			f.log.Warn("engine not offered to the cluster", "engine", name, "error", err)
		} else {
			withdraw = w
		}
	}
	le := &liveEngine{id: id, sub: sub, ctx: ctx, baseURL: info.BaseURL, model: info.Model}
	f.mu.Lock()
	f.live[name] = le
	if f.drained {
		f.rt.SetDrained(id, true)
	}
	if f.warm != nil {
		go f.warmEngine(name, le, f.warm)
	}
	f.mu.Unlock()
	return func() {
		withdraw()
		// ctx has ended: the subscription stops; then the router forgets
		// the worker (its index entries, its running requests, which end
		// with the engine's connections). A request routed to it meanwhile
		// finds the engine gone before any byte and is retried on another
		// worker.
		<-done
		f.rt.RemoveWorker(id)
		f.mu.Lock()
		delete(f.live, name)
		f.mu.Unlock()
	}, nil
}

// setDrained drains the workers of every engine in service, and of
// those put into service while it holds, or returns them to routing.
func (f *fleet) setDrained(drained bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drained = drained
	for _, e := range f.live {
		f.rt.SetDrained(e.id, drained)
	}
}

// ingestStats lists the KV-event ingest counters of every engine in
// service.
func (f *fleet) ingestStats() []ingest.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ingest.Stats
	for _, e := range f.live {
		if e.sub != nil {
			out = append(out, e.sub.Stats()...)
		}
	}
	return out
}

// workerName returns the name of the engine a worker id serves.
func (f *fleet) workerName(id router.WorkerID) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, e := range f.live {
		if e.id == id {
			return name
		}
	}
	return fmt.Sprintf("worker%d", id)
}

// diskStored is what a simulated engine's KV events of medium DISK tell the
// node store: the blocks it wrote to its space, by the file names they
// have there, each credited to the engine's write grant, which it gets
// here (the engine, started with --kv-store-writer, writes nothing until
// then). nil for other engines, or without a store.
func (f *fleet) diskStored(spec hruntime.Spec) func([]uint64) {
	if f.store == nil || !spec.Simulated || !spec.UsesKVStore() {
		return nil
	}
	if err := f.store.AddWriter(spec.Name); err != nil {
		f.log.Warn("granting the engine a write budget in the node KV store", "engine", spec.Name, "err", err)
	}
	space, name := StoreSpace(sim.ConfigOf(spec)), spec.Name
	return func(hashes []uint64) { f.store.Written(name, space, hashes) }
}
