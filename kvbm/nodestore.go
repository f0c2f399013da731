package kvbm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// The KV tiers hearth up gives its engines (--kvbm).
const (
	TiersOff    = "off"     // the GPU's prefix cache only
	TiersRAM    = "ram"     // and a host-RAM tier per engine
	TiersRAMSSD = "ram+ssd" // and the node's SSD store, shared by its engines
)

// DefaultTiers is the tiers hearth up gives its engines without --kvbm,
// and so the ones hearth bench simulates: a context an agent's tool pause
// pushed out of the GPU is loaded again from host RAM or the node store
// rather than computed again.
const DefaultTiers = TiersRAMSSD

// DefaultSimRAMGiB is the host RAM each simulated engine offloads KV blocks
// to without --kv-offloading-size, in hearth up --sim and hearth bench
// alike: what a homelab rig has to spare. A two-GPU workstation usually
// has 64-128 GB of DDR4/DDR5; vLLM pins the offload buffer, so 32 GiB per
// engine leaves the rest of a 128 GB machine to the OS, the containers and
// the daemon. Real engines get theirs planned from the host's memory.
const DefaultSimRAMGiB = 32

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

// writeReserveWindow is how much of recent writing the store keeps room
// for when its writers hold no grant (AddWriter): such a writer announces
// a step's blocks when the step ends, so the bytes it has written and not
// yet announced are at most about a step's, well under a second's. A
// writer with a grant is bounded by it instead.
const writeReserveWindow = time.Second

// maxPendingWrites bounds the announced blocks waiting to be taken in;
// past it, announcements are dropped and the next turn of Run walks the
// directory instead.
const maxPendingWrites = 1 << 16

// NodeStore is the daemon's handle on the node's SSD KV store: it owns
// the capacity, grants each engine process that writes to it a write
// budget (AddWriter, see grantsDir), takes in the blocks they announce
// writing (Written, queued for Run), rescans for what they did not
// announce, and tells whoever asked (the router) which blocks left it.
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

	// Blocks engines announced, not yet taken in (Written), by space and
	// whether their writer holds a grant; overflow: some were dropped, a
	// walk must find them. writers: those granted a budget, by name.
	pmu      sync.Mutex
	pending  map[pendingKey][]uint64
	npending int
	overflow bool
	writers  map[string]*writer
	wake     chan struct{}

	// takenIn is what takeWritten took in over the last
	// writeReserveWindow, oldest first; only Run's goroutine uses it.
	takenIn []takeIn
}

// pendingKey sorts announced blocks: granted ones need no room beyond
// their writers' grants.
type pendingKey struct {
	space   string
	granted bool
}

// writer is an engine process granted a write budget.
type writer struct {
	announced int64 // blocks it announced (Written)
	published grant // its grant file as last written
	stale     bool  // the grant file needs writing
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
	n := &NodeStore{Node: node, Dir: cfg.Dir, log: cfg.Logger, pending: map[pendingKey][]uint64{},
		writers: map[string]*writer{}, wake: make(chan struct{}, 1)}
	cfg.OnEvict = n.evicted
	st, err := OpenStore(cfg)
	if err != nil {
		return nil, fmt.Errorf("node KV store: %w", err)
	}
	if err := removeGrants(cfg.Dir); err != nil {
		st.Close()
		return nil, fmt.Errorf("node KV store: %w", err)
	}
	n.Store = st
	return n, nil
}

// AddWriter grants the engine process named name a write budget in the
// store and publishes it, before the engine writes: an engine opened with
// that name (OpenEngineSpace) writes nothing until then. The writers share
// an eighth of the capacity equally, so each new writer's grant shrinks
// the others'. Adding a writer again keeps its count (a restarted engine).
func (n *NodeStore) AddWriter(name string) error {
	n.pmu.Lock()
	defer n.pmu.Unlock()
	if _, ok := n.writers[name]; ok {
		return nil
	}
	n.writers[name] = &writer{stale: true}
	budget := n.capacity / grantShare / int64(len(n.writers))
	for _, w := range n.writers {
		if w.published.budget != budget {
			w.stale = true
		}
	}
	return n.publishGrantsLocked(nil, budget)
}

// publishGrantsLocked writes the grant files of the writers that need it,
// with the counts taken in (a writer absent from counts keeps its
// published count: what it announced since has no room yet) and budget.
func (n *NodeStore) publishGrantsLocked(counts map[string]int64, budget int64) error {
	var errs []error
	for name, w := range n.writers {
		g := grant{announced: w.published.announced, budget: budget}
		if c, ok := counts[name]; ok {
			g.announced = c
		}
		if !w.stale && g == w.published {
			continue
		}
		if err := writeGrant(n.Dir, name, g); err != nil {
			errs = append(errs, err)
			continue
		}
		w.published, w.stale = g, false
	}
	return errors.Join(errs...)
}

// grantsLocked is the bytes of every writer's budget: the room the store
// keeps for what they may have written and not yet announced.
func (n *NodeStore) grantsLocked() int64 {
	var sum int64
	for _, w := range n.writers {
		sum += w.published.budget
	}
	return sum
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

// Written tells the store that the engine process named writer (its
// AddWriter name, or "" for one without a grant) wrote these blocks to
// space (the engine's KV events of medium DISK): Run takes them in,
// evicts down to the capacity and then credits the writer's grant. It
// copies hashes, never blocks and calls nothing back, so an ingester may
// call it while it holds its own locks.
func (n *NodeStore) Written(writer, space string, hashes []uint64) {
	if len(hashes) == 0 {
		return
	}
	n.pmu.Lock()
	w := n.writers[writer]
	if w != nil {
		w.announced += int64(len(hashes))
	}
	if n.npending+len(hashes) > maxPendingWrites {
		n.overflow = true
	} else {
		k := pendingKey{space, w != nil}
		n.pending[k] = append(n.pending[k], hashes...)
		n.npending += len(hashes)
	}
	n.pmu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// takeWritten enters the announced blocks, or walks the directory when
// some announcements were dropped; then it evicts until the blocks, the
// writers' grants and the recent writing of writers without one fit in
// the capacity, and only then credits the writers with what they
// announced, so a writer's next writes have their room.
func (n *NodeStore) takeWritten(ctx context.Context) error {
	n.pmu.Lock()
	pending, overflow := n.pending, n.overflow
	n.pending, n.npending, n.overflow = make(map[pendingKey][]uint64, len(pending)), 0, false
	counts := make(map[string]int64, len(n.writers))
	for name, w := range n.writers {
		counts[name] = w.announced
	}
	grants := n.grantsLocked()
	n.pmu.Unlock()
	now := n.clock.Now()
	if overflow {
		if err := n.RescanContext(ctx); err != nil {
			return err
		}
	} else {
		keys := make([]pendingKey, 0, len(pending))
		for k := range pending {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b pendingKey) int {
			if c := strings.Compare(a.space, b.space); c != 0 {
				return c
			}
			return cmpBool(a.granted, b.granted)
		})
		var ungranted int64
		for _, k := range keys {
			if err := ctx.Err(); err != nil {
				return err
			}
			if b := n.Store.takeIn(k.space, pending[k]); b > 0 && !k.granted {
				ungranted += b
			}
		}
		window := n.reserve(now)
		if ungranted > 0 {
			n.takenIn = append(n.takenIn, takeIn{now, ungranted})
		}
		// Room for as many bytes again as writers without a grant just
		// wrote, and for what they wrote over the window.
		grants += ungranted + window
	}
	n.Store.makeRoom(grants)
	n.pmu.Lock()
	defer n.pmu.Unlock()
	budget := int64(0)
	if len(n.writers) > 0 {
		budget = n.capacity / grantShare / int64(len(n.writers))
	}
	return n.publishGrantsLocked(counts, budget)
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
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
