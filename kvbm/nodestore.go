package kvbm

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hearth-llm/hearth/console"
	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/router"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// The KV tiers hearth up gives its engines (--kvbm).
const (
	tiersOff    = "off"     // the GPU's prefix cache only
	tiersRAM    = "ram"     // and a host-RAM tier per engine
	tiersRAMSSD = "ram+ssd" // and the node's SSD store, shared by its engines
)

// engineStoreCapacity is the capacity an engine process opens the node
// store with: no bound of its own. The daemon holds the node's capacity
// and evicts (nodeStore.run); an engine, like the real engines' file
// tiers, writes until the disk is full, and a full disk costs it the
// write, not the request.
const engineStoreCapacity = 1 << 62

// nodeStoreRescan is how often the daemon looks at what the engines wrote
// to the node store, and evicts what is over its capacity.
const nodeStoreRescan = 2 * time.Second

// spaceOf is the node-store space of an engine's blocks: engines of one
// flavour and model hash blocks alike and share it.
func spaceOf(flavor sim.Flavor, model string, blockSize int) string {
	if blockSize == 0 {
		blockSize = sim.DefaultBlockSize
	}
	return kvbm.SpaceName(flavor.String(), model, blockSize)
}

// openEngineStore opens the node store in an engine process and returns
// its space for the engine's blocks.
func openEngineStore(dir string, cfg sim.Config, log *slog.Logger) (*kvbm.Store, *kvbm.Space, error) {
	st, err := kvbm.OpenStore(kvbm.StoreConfig{Dir: dir, CapacityBytes: engineStoreCapacity, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("node KV store: %w", err)
	}
	return st, st.Space(spaceOf(cfg.Flavor, cfg.Model, cfg.BlockSize)), nil
}

// nodeStore is the daemon's handle on the node's SSD KV store: it owns
// the capacity, tells the router which blocks left it, and reports to the
// console.
type nodeStore struct {
	store *kvbm.Store
	node  string
	dir   string

	mu sync.Mutex
	// onEvict tells the router that blocks left the store; set once the
	// router exists. Blocks leave through evictions, corrupt blocks
	// deleted, and files other processes deleted.
	onEvict func(space string, hashes []uint64)
}

// openNodeStore opens the node store at dir with capacityBytes (0: the
// default share of the free disk).
func openNodeStore(node, dir string, capacityBytes int64, log *slog.Logger) (*nodeStore, error) {
	n := &nodeStore{node: node, dir: dir}
	st, err := kvbm.OpenStore(kvbm.StoreConfig{
		Dir: dir, CapacityBytes: capacityBytes, Logger: log,
		OnEvict: n.evicted,
	})
	if err != nil {
		return nil, fmt.Errorf("node KV store: %w", err)
	}
	n.store = st
	return n, nil
}

func (n *nodeStore) evicted(space string, hashes []uint64) {
	n.mu.Lock()
	f := n.onEvict
	n.mu.Unlock()
	if f != nil {
		f(space, hashes)
	}
}

// tellEvictions sets where evictions are reported.
func (n *nodeStore) tellEvictions(f func(space string, hashes []uint64)) {
	n.mu.Lock()
	n.onEvict = f
	n.mu.Unlock()
}

// space is the part of the store an in-process engine uses.
func (n *nodeStore) space(spec hruntime.Spec) sim.NodeStore {
	cfg := sim.ConfigOf(spec)
	return n.store.Space(spaceOf(cfg.Flavor, cfg.Model, cfg.BlockSize))
}

// run rescans the store until ctx ends: blocks engine processes wrote join
// the catalog, and the store evicts down to its capacity.
func (n *nodeStore) run(ctx context.Context, log *slog.Logger) error {
	t := time.NewTicker(nodeStoreRescan)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := n.store.Rescan(); err != nil {
				log.Warn("rescanning the node KV store", "dir", n.dir, "err", err)
			}
		}
	}
}

// KVStores is the console's view of the store (console.KVStoreSource).
func (n *nodeStore) KVStores(context.Context) ([]console.KVStore, error) {
	s := n.store.Stats()
	t := s.Total
	return []console.KVStore{{
		Node: n.node, Dir: n.dir,
		UsedBytes: t.Bytes, CapacityBytes: s.CapacityBytes, FreeDiskBytes: s.FreeDiskBytes,
		Blocks: int(t.Blocks), Hits: t.Hits, Misses: t.Misses,
		EvictedBlocks: t.EvictedBlocks, CorruptDropped: t.CorruptBlocks,
		ReadBytes: t.ReadBytes, WrittenBytes: t.WrittenBytes,
	}}, nil
}

// nodeStoreEvictions tells the router which blocks left the node store, by
// the node and model of the engines whose space they were in. SGLang's own
// page files (kvbm.ForeignSpace) belong to every SGLang engine of the
// node: hashes of another model's pages match nothing in its tables.
func nodeStoreEvictions(rt *router.Router, specs []hruntime.Spec) func(space string, hashes []uint64) {
	type owner struct{ node, model string }
	owners := map[string][]owner{}
	for _, spec := range specs {
		if !spec.UsesKVStore() {
			continue
		}
		cfg := sim.ConfigOf(spec)
		o := owner{spec.GPU.Node, spec.Model}
		for _, space := range []string{spaceOf(cfg.Flavor, cfg.Model, cfg.BlockSize), kvbm.ForeignSpace} {
			if space == kvbm.ForeignSpace && spec.Engine != hruntime.KindSGLang || slices.Contains(owners[space], o) {
				continue
			}
			owners[space] = append(owners[space], o)
		}
	}
	return func(space string, hashes []uint64) {
		for _, o := range owners[space] {
			rt.RemoveNodeBlocks(o.node, o.model, hashes)
		}
	}
}
