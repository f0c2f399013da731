package kvbm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// The KV tiers hearth up gives its engines (--kvbm).
const (
	TiersOff    = "off"     // the GPU's prefix cache only
	TiersRAM    = "ram"     // and a host-RAM tier per engine
	TiersRAMSSD = "ram+ssd" // and the node's SSD store, shared by its engines
)

// EngineStoreCapacity is the capacity a process opens the node store with
// when it must evict nothing (`hearth kvstore ls`). An engine keeps no
// catalog at all (OpenEngineSpace): the daemon holds the node's capacity
// and evicts (NodeStore.Run); an engine, like the real engines' file
// tiers, writes until the disk is full, and a full disk costs it the
// write, not the request.
const EngineStoreCapacity = 1 << 62

// How the daemon keeps the node store to its capacity. Engines announce
// the blocks they write (NodeStore.Written, from their KV events), and the
// store takes them in and evicts at once, without walking the directory;
// SGLang's own pages at the root, which no announcement names by file,
// are looked at every nodeStoreForeignEvery (one directory); and the whole
// tree is walked every nodeStoreReconcile, for what no announcement told
// (a lost event, a writer that announces nothing, files deleted by hand).
const (
	nodeStoreForeignEvery = 2 * time.Second
	nodeStoreReconcile    = time.Minute
)

// writeReserveWindow is how much of the engines' recent writing the store
// keeps room for (Store.Written's reserve): an engine announces a step's
// blocks when the step ends, so the bytes it has written and not yet
// announced are at most about a step's, well under a second's.
const writeReserveWindow = time.Second

// maxPendingWrites bounds the announced blocks waiting to be taken in;
// past it, announcements are dropped and the next turn of Run walks the
// directory instead.
const maxPendingWrites = 1 << 16

// NodeStore is the daemon's handle on the node's SSD KV store: it owns
// the capacity, takes in the blocks engine processes announce writing
// (Written, queued for Run; the embedded Store's Written takes them in at
// once), rescans for what they did not announce, and tells whoever asked
// (the router) which blocks left it.
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

	// Blocks engines announced, not yet taken in (Written), by space;
	// overflow: some were dropped, a walk must find them.
	pmu      sync.Mutex
	pending  map[string][]uint64
	npending int
	overflow bool
	wake     chan struct{}

	// takenIn is what takeWritten took in over the last
	// writeReserveWindow, oldest first; only Run's goroutine uses it.
	takenIn []takeIn
}

// takeIn is the bytes of announced blocks one take-in entered.
type takeIn struct {
	at    time.Time
	bytes int64
}

// reserve is the bytes taken in over the last writeReserveWindow, after
// dropping older take-ins.
func (n *NodeStore) reserve(now time.Time) int64 {
	i := 0
	for i < len(n.takenIn) && now.Sub(n.takenIn[i].at) > writeReserveWindow {
		i++
	}
	n.takenIn = append(n.takenIn[:0], n.takenIn[i:]...)
	var sum int64
	for _, t := range n.takenIn {
		sum += t.bytes
	}
	return sum
}

// OpenNodeStore opens the node store at dir with capacityBytes (0: the
// default share of the free disk).
func OpenNodeStore(node, dir string, capacityBytes int64, log *slog.Logger) (*NodeStore, error) {
	return openNodeStore(node, StoreConfig{Dir: dir, CapacityBytes: capacityBytes, Logger: log})
}

// openNodeStore is OpenNodeStore with the store's whole configuration
// (its clock, in tests); OnEvict is the NodeStore's.
func openNodeStore(node string, cfg StoreConfig) (*NodeStore, error) {
	n := &NodeStore{Node: node, Dir: cfg.Dir, log: cfg.Logger, pending: map[string][]uint64{}, wake: make(chan struct{}, 1)}
	cfg.OnEvict = n.evicted
	st, err := OpenStore(cfg)
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

// Written tells the store that an engine wrote these blocks to space
// (the engine's KV events of medium DISK): Run takes them in and evicts
// down to the capacity. It copies hashes, never blocks and calls nothing
// back, so an ingester may call it while it holds its own locks.
func (n *NodeStore) Written(space string, hashes []uint64) {
	if len(hashes) == 0 {
		return
	}
	n.pmu.Lock()
	if n.npending+len(hashes) > maxPendingWrites {
		n.overflow = true
	} else {
		n.pending[space] = append(n.pending[space], hashes...)
		n.npending += len(hashes)
	}
	n.pmu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// takeWritten enters the announced blocks (Store.Written), or walks the
// directory when some announcements were dropped.
func (n *NodeStore) takeWritten(ctx context.Context) error {
	n.pmu.Lock()
	pending, overflow := n.pending, n.overflow
	n.pending, n.npending, n.overflow = make(map[string][]uint64, len(pending)), 0, false
	n.pmu.Unlock()
	if overflow {
		return n.RescanContext(ctx)
	}
	spaces := make([]string, 0, len(pending))
	for sp := range pending {
		spaces = append(spaces, sp)
	}
	slices.Sort(spaces)
	for _, sp := range spaces {
		if err := ctx.Err(); err != nil {
			return err
		}
		now := n.clock.Now()
		if b := n.Store.Written(sp, pending[sp], n.reserve(now)); b > 0 {
			n.takenIn = append(n.takenIn, takeIn{now, b})
		}
	}
	return nil
}

// Run keeps the store to its capacity until ctx ends: it takes in the
// blocks engines announce as they come, holds SGLang's own pages every
// nodeStoreForeignEvery and walks the whole tree every
// nodeStoreReconcile (see those). It returns nil then.
func (n *NodeStore) Run(ctx context.Context) error {
	foreign, stopForeign := n.clock.NewTicker(nodeStoreForeignEvery)
	defer stopForeign()
	reconcile, stopReconcile := n.clock.NewTicker(nodeStoreReconcile)
	defer stopReconcile()
	for {
		var err error
		what := ""
		select {
		case <-ctx.Done():
			return nil
		case <-n.wake:
			what, err = "taking in announced blocks of", n.takeWritten(ctx)
		case <-foreign:
			what, err = "holding SGLang's pages in", n.holdForeign()
		case <-reconcile:
			what, err = "rescanning", n.RescanContext(ctx)
		}
		if err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed) && n.log != nil {
			n.log.Warn(what+" the node KV store", "dir", n.Dir, "err", err)
		}
	}
}
