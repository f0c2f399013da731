package kvbm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// The KV tiers hearth up gives its engines (--kvbm).
const (
	TiersOff    = "off"     // the GPU's prefix cache only
	TiersRAM    = "ram"     // and a host-RAM tier per engine
	TiersRAMSSD = "ram+ssd" // and the node's SSD store, shared by its engines
)

// EngineStoreCapacity is the capacity an engine process opens the node
// store with: no bound of its own. The daemon holds the node's capacity
// and evicts (NodeStore.Run); an engine, like the real engines' file
// tiers, writes until the disk is full, and a full disk costs it the
// write, not the request.
const EngineStoreCapacity = 1 << 62

// nodeStoreRescan is how often the daemon looks at what the engines wrote
// to the node store, and evicts what is over its capacity.
const nodeStoreRescan = 2 * time.Second

// OpenEngineStore opens the node store in an engine process and returns
// the named space for the engine's blocks (SpaceName). The engine must run
// the store's RunPrunes (EnginePruneEvery) while it uses it.
func OpenEngineStore(dir, space string, log *slog.Logger) (*Store, *Space, error) {
	st, err := OpenStore(StoreConfig{Dir: dir, CapacityBytes: EngineStoreCapacity, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("node KV store: %w", err)
	}
	return st, st.Space(space), nil
}

// EnginePruneEvery is how often an engine process prunes its catalog of
// the node store. An engine evicts nothing itself (EngineStoreCapacity):
// the daemon deletes the files, and only a Get that misses or a prune
// takes them out of the engine's catalog, which would otherwise keep an
// entry for every block the engine ever wrote, and skip writing again a
// block it wrongly believes stored.
const EnginePruneEvery = 10 * time.Second

// RunPrunes prunes the store (Prune) every interval of its clock until
// ctx ends, so that the catalog holds no block the directory lost; it
// returns nil then.
func (s *Store) RunPrunes(ctx context.Context, every time.Duration) error {
	tick, stop := s.clock.NewTicker(every)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			if err := s.Prune(); err != nil && !errors.Is(err, ErrClosed) && s.log != nil {
				s.log.Warn("pruning the node KV store's catalog", "dir", s.root, "err", err)
			}
		}
	}
}

// NodeStore is the daemon's handle on the node's SSD KV store: it owns
// the capacity, rescans what engine processes wrote, and tells whoever
// asked (the router) which blocks left it.
type NodeStore struct {
	*Store
	Node string // the node the store belongs to
	Dir  string

	log *slog.Logger
	mu  sync.Mutex
	// onEvict tells the router that blocks left the store; set once the
	// router exists. Blocks leave through evictions, corrupt blocks
	// deleted, and files other processes deleted.
	onEvict func(space string, hashes []uint64)
}

// OpenNodeStore opens the node store at dir with capacityBytes (0: the
// default share of the free disk).
func OpenNodeStore(node, dir string, capacityBytes int64, log *slog.Logger) (*NodeStore, error) {
	n := &NodeStore{Node: node, Dir: dir, log: log}
	st, err := OpenStore(StoreConfig{
		Dir: dir, CapacityBytes: capacityBytes, Logger: log,
		OnEvict: n.evicted,
	})
	if err != nil {
		return nil, fmt.Errorf("node KV store: %w", err)
	}
	n.Store = st
	return n, nil
}

func (n *NodeStore) evicted(space string, hashes []uint64) {
	n.mu.Lock()
	f := n.onEvict
	n.mu.Unlock()
	if f != nil {
		f(space, hashes)
	}
}

// TellEvictions sets where evictions are reported.
func (n *NodeStore) TellEvictions(f func(space string, hashes []uint64)) {
	n.mu.Lock()
	n.onEvict = f
	n.mu.Unlock()
}

// Run rescans the store until ctx ends: blocks engine processes wrote join
// the catalog, and the store evicts down to its capacity.
func (n *NodeStore) Run(ctx context.Context) error {
	t := time.NewTicker(nodeStoreRescan)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := n.RescanContext(ctx); err != nil && ctx.Err() == nil && n.log != nil {
				n.log.Warn("rescanning the node KV store", "dir", n.Dir, "err", err)
			}
		}
	}
}
