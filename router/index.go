package router

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/tokenizer"
)

// MaxWorkers is the number of workers the router can track at once. Worker
// sets are 64-bit masks so that matching a request is a walk of AND
// operations; IDs of removed workers are reused.
const MaxWorkers = 64

// DefaultMaxIndexEntries bounds the index when the configuration says
// nothing: four million (block, worker, tier) entries, about 200 MB.
const DefaultMaxIndexEntries = 4 << 20

// indexSlot is one block of the open-addressing table: the block's sequence
// hash and, per tier, the set of workers that hold it. 32 bytes.
type indexSlot struct {
	key  uint64 // normalised SeqHash; 0 marks an empty slot
	mask [kvtier.Count]uint64
}

// workerBlocks is what the index knows per worker without walking the table.
type workerBlocks struct {
	count [kvtier.Count]int // blocks held per tier
	live  int               // blocks held in any tier
	// hashes lists every block the worker was seen to store, so that
	// ClearWorker costs O(its blocks). Removals leave stale hashes behind;
	// the list is compacted when stale ones outnumber live ones.
	hashes []tokenizer.SeqHash
}

// Index records which worker holds which KV block in which tier.
//
// It is one open-addressing hash table (linear probing, backward-shift
// deletion) from a block's sequence hash to a worker bitset per tier, so a
// request is matched by walking its hashes and intersecting the set of
// workers that still match, in O(matched blocks), without allocating.
//
// The table is bounded by a total number of (block, worker, tier) entries.
// Over the budget it evicts whole blocks (every worker's entry for them)
// with the CLOCK approximation of least-recently-used: a block matched by a
// request, or stored again, since the clock hand last passed gets a second
// chance. Newly stored blocks start without one, so blocks no request ever
// matched (one-off prompts, the tail of a finished answer) are dropped before
// shared prefixes that requests keep hitting.
//
// All methods are safe for concurrent use: writers (the event ingest, one
// goroutine per worker) take the write lock, Match takes the read lock and
// marks blocks as used with atomic operations.
type Index struct {
	mu         sync.RWMutex
	slots      []indexSlot
	ref        []uint64 // CLOCK reference bits, one per slot
	used       int      // occupied slots
	entries    int      // set bits over all slots and tiers
	maxEntries int
	hand       int // CLOCK hand

	workers [MaxWorkers]workerBlocks
	// peers[w] is the set of workers sharing w's node disk tier, w
	// included; 0 means w shares it with nobody. A disk block stored or
	// removed by one of them is stored or removed for all of them, so the
	// disk masks of a node's workers are always equal and matching needs
	// no expansion.
	peers [MaxWorkers]uint64

	evictedBlocks  atomic.Uint64
	evictedEntries atomic.Uint64
	rejected       atomic.Uint64 // updates for worker ids ≥ MaxWorkers
}

const (
	minIndexSlots = 1024
	// maxLoadNum/maxLoadDen is the load factor that triggers growth, and the
	// table grows by a quarter: load stays between 0.64 and 0.8, which keeps
	// linear probing short and the table at 40 to 50 bytes per block.
	maxLoadNum = 4
	maxLoadDen = 5
)

// NewIndex returns an empty index that holds at most maxEntries
// (block, worker, tier) entries; maxEntries ≤ 0 means DefaultMaxIndexEntries.
func NewIndex(maxEntries int) *Index {
	if maxEntries <= 0 {
		maxEntries = DefaultMaxIndexEntries
	}
	ix := &Index{maxEntries: maxEntries}
	ix.resize(minIndexSlots)
	return ix
}

// normKey maps a sequence hash to a table key; 0 is reserved for empty
// slots, so hash 0 shares a key with an arbitrary constant (a false match
// between those two has probability 2⁻⁶⁴ per block).
func normKey(h tokenizer.SeqHash) uint64 {
	if h == 0 {
		return 0x9e3779b97f4a7c15
	}
	return uint64(h)
}

// home returns the preferred slot of key in a table of n slots. Keys are
// mixed first so that small or sequential hashes (tests, hostile engines)
// still spread; the multiply-high maps onto any n, not only powers of two.
func home(key uint64, n int) int {
	hi, _ := bits.Mul64(key*0xbf58476d1ce4e5b9, uint64(n))
	return int(hi)
}

func (ix *Index) resize(n int) {
	old := ix.slots
	oldRef := ix.ref
	ix.slots = make([]indexSlot, n)
	ix.ref = make([]uint64, (n+63)/64)
	ix.used = 0
	ix.hand = 0
	for i := range old {
		if old[i].key == 0 {
			continue
		}
		j := ix.probeEmpty(old[i].key)
		ix.slots[j] = old[i]
		ix.used++
		if oldRef[i>>6]&(1<<(i&63)) != 0 {
			ix.ref[j>>6] |= 1 << (j & 63)
		}
	}
}

// lookup returns the slot holding key, or -1.
func (ix *Index) lookup(key uint64) int {
	n := len(ix.slots)
	i := home(key, n)
	for {
		k := ix.slots[i].key
		if k == key {
			return i
		}
		if k == 0 {
			return -1
		}
		i++
		if i == n {
			i = 0
		}
	}
}

// probeEmpty returns the first empty slot on key's probe path; key must not
// be in the table.
func (ix *Index) probeEmpty(key uint64) int {
	n := len(ix.slots)
	i := home(key, n)
	for ix.slots[i].key != 0 {
		i++
		if i == n {
			i = 0
		}
	}
	return i
}

// insert adds an empty record for key, which must not be in the table.
func (ix *Index) insert(key uint64) int {
	if (ix.used+1)*maxLoadDen > len(ix.slots)*maxLoadNum {
		ix.resize(len(ix.slots) + len(ix.slots)/4)
	}
	i := ix.probeEmpty(key)
	ix.slots[i].key = key
	ix.used++
	return i
}

func (ix *Index) setRef(i int) {
	w := &ix.ref[i>>6]
	bit := uint64(1) << (i & 63)
	if atomic.LoadUint64(w)&bit == 0 {
		atomic.OrUint64(w, bit)
	}
}

func (ix *Index) clearRef(i int) {
	atomic.AndUint64(&ix.ref[i>>6], ^(uint64(1) << (i & 63)))
}

func (ix *Index) hasRef(i int) bool {
	return atomic.LoadUint64(&ix.ref[i>>6])&(1<<(i&63)) != 0
}

// deleteSlot empties slot i and shifts later entries of its probe run back
// so that lookups never stop early.
func (ix *Index) deleteSlot(i int) {
	n := len(ix.slots)
	j := i
	for {
		j++
		if j == n {
			j = 0
		}
		if ix.slots[j].key == 0 {
			break
		}
		k := home(ix.slots[j].key, n)
		// The entry at j may move to i only if its home is not cyclically
		// within (i, j].
		if i <= j {
			if i < k && k <= j {
				continue
			}
		} else if i < k || k <= j {
			continue
		}
		ix.slots[i] = ix.slots[j]
		if ix.hasRef(j) {
			ix.setRef(i)
		} else {
			ix.clearRef(i)
		}
		i = j
	}
	ix.slots[i] = indexSlot{}
	ix.clearRef(i)
	ix.used--
}

func anyTier(s *indexSlot) uint64 {
	var m uint64
	for _, t := range s.mask {
		m |= t
	}
	return m
}

// Store records that worker w now holds the blocks in tier. A disk block
// of a worker that shares its node's disk tier is recorded for every worker
// of the node.
func (ix *Index) Store(w WorkerID, tier kvtier.Tier, hashes []tokenizer.SeqHash) {
	if w >= MaxWorkers || tier >= kvtier.Count {
		ix.rejected.Add(1)
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	holders := ix.holders(w, tier)
	for _, h := range hashes {
		key := normKey(h)
		i := ix.lookup(key)
		if i >= 0 {
			ix.setRef(i) // stored again: in use
		} else {
			i = ix.insert(key) // new blocks start unreferenced, see evict
		}
		ix.setBits(i, tier, holders, h)
	}
	if ix.entries > ix.maxEntries {
		ix.evict()
	}
}

// holders is the set of workers a Store or Remove by w in tier applies to:
// w, or w's node peers for the disk tier.
func (ix *Index) holders(w WorkerID, tier kvtier.Tier) uint64 {
	if tier == kvtier.Disk && ix.peers[w] != 0 {
		return ix.peers[w]
	}
	return 1 << w
}

// setBits adds the workers in set to slot i's mask for tier, h being the
// slot's hash.
func (ix *Index) setBits(i int, tier kvtier.Tier, set uint64, h tokenizer.SeqHash) {
	s := &ix.slots[i]
	added := set &^ s.mask[tier]
	if added == 0 {
		return
	}
	fresh := added &^ anyTier(s)
	s.mask[tier] |= added
	for m := added; m != 0; m &= m - 1 {
		w := bits.TrailingZeros64(m)
		wb := &ix.workers[w]
		wb.count[tier]++
		if fresh&(1<<w) != 0 {
			wb.live++
			wb.hashes = append(wb.hashes, h)
		}
	}
	ix.entries += bits.OnesCount64(added)
}

// clearBits drops the workers in set from slot i's mask for tier, deletes
// the slot when nobody holds the block any more and returns the workers it
// dropped.
func (ix *Index) clearBits(i int, tier kvtier.Tier, set uint64) uint64 {
	s := &ix.slots[i]
	dropped := set & s.mask[tier]
	if dropped == 0 {
		return 0
	}
	s.mask[tier] &^= dropped
	gone := dropped &^ anyTier(s)
	for m := dropped; m != 0; m &= m - 1 {
		w := bits.TrailingZeros64(m)
		ix.workers[w].count[tier]--
		if gone&(1<<w) != 0 {
			ix.workers[w].live--
		}
	}
	ix.entries -= bits.OnesCount64(dropped)
	if anyTier(s) == 0 {
		ix.deleteSlot(i)
	}
	return dropped
}

// Remove records that worker w no longer holds the blocks in tier. A disk
// block removed by a worker that shares its node's disk tier is gone for
// every worker of the node.
func (ix *Index) Remove(w WorkerID, tier kvtier.Tier, hashes []tokenizer.SeqHash) {
	if w >= MaxWorkers || tier >= kvtier.Count {
		ix.rejected.Add(1)
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	holders := ix.holders(w, tier)
	var touched uint64
	for _, h := range hashes {
		if i := ix.lookup(normKey(h)); i >= 0 {
			touched |= ix.clearBits(i, tier, holders)
		}
	}
	for m := touched | 1<<w; m != 0; m &= m - 1 {
		ix.maybeCompact(WorkerID(bits.TrailingZeros64(m)))
	}
}

// joinNode makes w share the disk tier of the workers in others (w not
// among them): each sees the disk blocks the others store or remove from
// now on, and w, which may join long after the node's disk filled, sees
// the disk blocks they hold now. Whatever w held on disk before (another
// node's disk) is dropped. others = 0 leaves w on a disk of its own.
func (ix *Index) joinNode(w WorkerID, others uint64) {
	if w >= MaxWorkers {
		return
	}
	others &^= 1 << w
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.leaveNodeLocked(w)
	if others == 0 {
		return
	}
	group := others | 1<<w
	for m := group; m != 0; m &= m - 1 {
		ix.peers[bits.TrailingZeros64(m)] = group
	}
	ix.copyDiskLocked(WorkerID(bits.TrailingZeros64(others)), w)
	if ix.entries > ix.maxEntries {
		ix.evict()
	}
}

// leaveNode takes w off its node's disk tier and drops w's disk blocks;
// the other workers of the node keep theirs.
func (ix *Index) leaveNode(w WorkerID) {
	if w >= MaxWorkers {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.leaveNodeLocked(w)
}

func (ix *Index) leaveNodeLocked(w WorkerID) {
	bit := uint64(1) << w
	if group := ix.peers[w]; group != 0 {
		rest := group &^ bit
		if bits.OnesCount64(rest) == 1 {
			rest = 0 // a node of one shares with nobody
		}
		for m := group &^ bit; m != 0; m &= m - 1 {
			ix.peers[bits.TrailingZeros64(m)] = rest
		}
		ix.peers[w] = 0
	}
	if ix.workers[w].count[kvtier.Disk] == 0 {
		return
	}
	for _, h := range ix.workers[w].hashes {
		if i := ix.lookup(normKey(h)); i >= 0 {
			ix.clearBits(i, kvtier.Disk, bit)
		}
	}
	ix.maybeCompact(w)
}

// copyDiskLocked gives to the disk blocks from holds, in O(from's blocks).
func (ix *Index) copyDiskLocked(from, to WorkerID) {
	if ix.workers[from].count[kvtier.Disk] == 0 {
		return
	}
	fromBit := uint64(1) << from
	for _, h := range ix.workers[from].hashes {
		i := ix.lookup(normKey(h))
		if i >= 0 && ix.slots[i].mask[kvtier.Disk]&fromBit != 0 {
			ix.setBits(i, kvtier.Disk, 1<<to, h)
		}
	}
}

// ClearWorker drops every block of worker w, in O(its blocks). A worker
// sharing its node's disk tier gets the node's disk blocks back at once:
// what its engine forgot (a restart, lost events, a cleared cache) is not
// what the node's disk holds.
func (ix *Index) ClearWorker(w WorkerID) {
	if w >= MaxWorkers {
		ix.rejected.Add(1)
		return
	}
	bit := uint64(1) << w
	ix.mu.Lock()
	defer ix.mu.Unlock()
	wb := &ix.workers[w]
	for _, h := range wb.hashes {
		i := ix.lookup(normKey(h))
		if i < 0 {
			continue
		}
		s := &ix.slots[i]
		for t := range s.mask {
			if s.mask[t]&bit != 0 {
				s.mask[t] &^= bit
				ix.entries--
			}
		}
		if anyTier(s) == 0 {
			ix.deleteSlot(i)
		}
	}
	*wb = workerBlocks{}
	if others := ix.peers[w] &^ bit; others != 0 {
		ix.copyDiskLocked(WorkerID(bits.TrailingZeros64(others)), w)
	}
}

// ClearWorkerTier forgets what worker w holds in tier and keeps its other
// tiers: an engine that drops its GPU cache (vLLM's AllBlocksCleared,
// which its GPU block pool sends on a prefix-cache reset and a sleep)
// still holds the blocks it offloaded to host RAM and its node's disk.
func (ix *Index) ClearWorkerTier(w WorkerID, tier kvtier.Tier) {
	if w >= MaxWorkers || tier >= kvtier.Count {
		ix.rejected.Add(1)
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	bit := uint64(1) << w
	for _, h := range ix.workers[w].hashes {
		if i := ix.lookup(normKey(h)); i >= 0 {
			ix.clearBits(i, tier, bit)
		}
	}
	ix.maybeCompact(w)
}

// maybeCompact drops stale hashes from w's list once they are a fifth of
// it, so the list costs at most about 10 bytes per live block. A compaction
// walks the list once and follows at least live/4 removals: O(1) amortized.
func (ix *Index) maybeCompact(w WorkerID) {
	wb := &ix.workers[w]
	if len(wb.hashes) <= wb.live+wb.live/4+64 {
		return
	}
	bit := uint64(1) << w
	seen := make(map[tokenizer.SeqHash]struct{}, wb.live)
	kept := make([]tokenizer.SeqHash, 0, wb.live+wb.live/8)
	for _, h := range wb.hashes {
		if _, dup := seen[h]; dup {
			continue
		}
		i := ix.lookup(normKey(h))
		if i < 0 || anyTier(&ix.slots[i])&bit == 0 {
			continue
		}
		seen[h] = struct{}{}
		kept = append(kept, h)
	}
	wb.hashes = kept
}

// evict drops least recently used blocks until the index is within budget.
func (ix *Index) evict() {
	n := len(ix.slots)
	touched := uint64(0)
	for ix.entries > ix.maxEntries && ix.used > 0 {
		if ix.hand >= n {
			ix.hand = 0
		}
		i := ix.hand
		s := &ix.slots[i]
		if s.key == 0 {
			ix.hand++
			continue
		}
		if ix.hasRef(i) {
			ix.clearRef(i)
			ix.hand++
			continue
		}
		var dropped uint64
		for t := range s.mask {
			m := s.mask[t]
			for m != 0 {
				w := bits.TrailingZeros64(m)
				m &= m - 1
				ix.workers[w].count[t]--
				dropped++
			}
		}
		all := anyTier(s)
		touched |= all
		for m := all; m != 0; m &= m - 1 {
			ix.workers[bits.TrailingZeros64(m)].live--
		}
		ix.entries -= int(dropped)
		ix.evictedEntries.Add(dropped)
		ix.evictedBlocks.Add(1)
		// The hand stays: deleteSlot may shift the next entry into i.
		ix.deleteSlot(i)
	}
	for m := touched; m != 0; m &= m - 1 {
		ix.maybeCompact(WorkerID(bits.TrailingZeros64(m)))
	}
}

// Match writes into out, per worker, how many leading blocks of hashes the
// worker holds in tier; workers that hold none get 0. It costs O(matched
// blocks) and does not allocate.
func (ix *Index) Match(hashes []tokenizer.SeqHash, tier kvtier.Tier, out *[MaxWorkers]int) {
	*out = [MaxWorkers]int{}
	if tier >= kvtier.Count || len(hashes) == 0 {
		return
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	alive := ^uint64(0)
	depth := 0
	for ; depth < len(hashes); depth++ {
		if depth%matchBatch == 0 {
			ix.touch(hashes[depth:min(depth+matchBatch, len(hashes))])
		}
		i := ix.lookup(normKey(hashes[depth]))
		if i < 0 {
			break
		}
		m := ix.slots[i].mask[tier] & alive
		for lost := alive &^ m; lost != 0; lost &= lost - 1 {
			out[bits.TrailingZeros64(lost)] = depth
		}
		alive = m
		if alive == 0 {
			return
		}
		ix.setRef(i)
	}
	for ; alive != 0; alive &= alive - 1 {
		out[bits.TrailingZeros64(alive)] = depth
	}
}

// MatchBeyond writes into out, per worker, how many blocks of hashes the
// worker holds in tier right after the from[worker] blocks an earlier
// match found in a faster tier: the prefix extension a lower tier adds,
// what an engine loads after its GPU hits (vLLM's offloading connector
// continues the lookup where the GPU's stopped, as Dynamo's lower-tier
// query does). Workers holding nothing in tier get 0. It costs O(blocks
// walked) and does not allocate.
func (ix *Index) MatchBeyond(hashes []tokenizer.SeqHash, tier kvtier.Tier, from, out *[MaxWorkers]int) {
	*out = [MaxWorkers]int{}
	if tier >= kvtier.Count || len(hashes) == 0 {
		return
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	// Workers with blocks in tier, by start depth (insertion sort: at most
	// MaxWorkers entries).
	var starts [MaxWorkers]WorkerID
	n := 0
	for w := range ix.workers {
		if ix.workers[w].count[tier] == 0 || from[w] < 0 || from[w] >= len(hashes) {
			continue
		}
		j := n
		for ; j > 0 && from[starts[j-1]] > from[w]; j-- {
			starts[j] = starts[j-1]
		}
		starts[j] = WorkerID(w)
		n++
	}
	alive := uint64(0)
	next := 0
	for depth := 0; depth < len(hashes); depth++ {
		if alive == 0 {
			if next == n {
				return
			}
			depth = max(depth, from[starts[next]])
		}
		for next < n && from[starts[next]] == depth {
			alive |= 1 << starts[next]
			next++
		}
		var m uint64
		if i := ix.lookup(normKey(hashes[depth])); i >= 0 {
			m = ix.slots[i].mask[tier] & alive
			if m != 0 {
				ix.setRef(i)
			}
		}
		for lost := alive &^ m; lost != 0; lost &= lost - 1 {
			w := bits.TrailingZeros64(lost)
			out[w] = depth - from[w]
		}
		alive = m
	}
	for ; alive != 0; alive &= alive - 1 {
		w := bits.TrailingZeros64(alive)
		out[w] = len(hashes) - from[w]
	}
}

// matchBatch is how many blocks Match touches ahead of its walk.
const matchBatch = 32

// touchSink keeps the loads of touch from being optimised away.
var touchSink atomic.Uint64

// touch reads the home slot of each hash before the walk needs it. The
// loads are independent, so the CPU overlaps their cache misses instead of
// taking them one after another in the walk, which depends on each result.
func (ix *Index) touch(hashes []tokenizer.SeqHash) {
	var sum uint64
	n := len(ix.slots)
	for _, h := range hashes {
		sum += ix.slots[home(normKey(h), n)].key
	}
	if sum == 1 {
		touchSink.Store(sum)
	}
}

// BlockCounts writes into out how many blocks each worker holds in tier.
func (ix *Index) BlockCounts(tier kvtier.Tier, out *[MaxWorkers]int) {
	*out = [MaxWorkers]int{}
	if tier >= kvtier.Count {
		return
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for w := range ix.workers {
		out[w] = ix.workers[w].count[tier]
	}
}

// IndexStats is a snapshot of the index's size and evictions.
type IndexStats struct {
	Blocks         int    // distinct blocks
	Entries        int    // (block, worker, tier) entries
	MaxEntries     int    // the budget
	Slots          int    // table size
	EvictedBlocks  uint64 // blocks dropped to stay within budget
	EvictedEntries uint64 // entries dropped with them
	Rejected       uint64 // updates ignored for worker ids ≥ MaxWorkers
}

// Stats returns the index's size and eviction counters.
func (ix *Index) Stats() IndexStats {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return IndexStats{
		Blocks:         ix.used,
		Entries:        ix.entries,
		MaxEntries:     ix.maxEntries,
		Slots:          len(ix.slots),
		EvictedBlocks:  ix.evictedBlocks.Load(),
		EvictedEntries: ix.evictedEntries.Load(),
		Rejected:       ix.rejected.Load(),
	}
}
