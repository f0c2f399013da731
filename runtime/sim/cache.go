package sim

import (
	"encoding/binary"
	"slices"

	"github.com/hearth-llm/hearth/kvevents"
)

// The KV cache is a pool of fixed-size blocks managed the way vLLM V1's
// block pool and KV cache manager do:
//
//   - A request holds a list of blocks covering its computed tokens; blocks
//     are reference counted, so requests that share a prefix share blocks.
//   - A block becomes reusable ("cached") when it is full: it gets the
//     chained hash of its tokens and parent block, is entered in the hash
//     table, and a BlockStored event is emitted.
//   - A block whose count drops to zero joins the tail of an LRU free queue,
//     keeping its hash. A cache hit takes it out of the queue again.
//   - A new block is taken from the head of the free queue; if it still held
//     a hash, that KV is evicted (BlockRemoved).
//   - A request's blocks are freed last block first, so the deepest block of a
//     chain is nearer the head and evicted before its parents.
//
// One difference from vLLM: when a block becomes full and another block
// already holds the same hash (two requests computed the same prefix at once)
// vLLM keeps both under that hash and emits BlockStored twice; here the second
// block stays anonymous, so every stored hash is held by exactly one block and
// a consumer that keeps a set of hashes from the events stays exact.

const noBlock = -1

type block struct {
	refs       int32
	prev, next int32 // free-queue links, noBlock at the ends
	inFree     bool
	hashed     bool
	hash       uint64
}

// blockPool owns the blocks, the free queue and the hash table.
type blockPool struct {
	blocks     []block
	head, tail int32 // free queue: head is evicted first
	numFree    int
	// numCachedFree counts free blocks that still hold a hash.
	numCachedFree int
	byHash        map[uint64]int32
	events        *[]kvevents.Event // the core's event buffer for this step
	arena         []uint64          // backing store of BlockRemoved hashes, per step
	blockSize     int
}

func newBlockPool(n, blockSize int, events *[]kvevents.Event) *blockPool {
	p := &blockPool{
		blocks:    make([]block, n),
		head:      noBlock,
		tail:      noBlock,
		byHash:    make(map[uint64]int32, n),
		events:    events,
		blockSize: blockSize,
	}
	for i := range p.blocks {
		p.blocks[i] = block{prev: noBlock, next: noBlock}
		p.pushFree(int32(i))
	}
	return p
}

func (p *blockPool) pushFree(id int32) {
	b := &p.blocks[id]
	b.prev, b.next, b.inFree = p.tail, noBlock, true
	if p.tail != noBlock {
		p.blocks[p.tail].next = id
	} else {
		p.head = id
	}
	p.tail = id
	p.numFree++
	if b.hashed {
		p.numCachedFree++
	}
}

func (p *blockPool) removeFree(id int32) {
	b := &p.blocks[id]
	if b.prev != noBlock {
		p.blocks[b.prev].next = b.next
	} else {
		p.head = b.next
	}
	if b.next != noBlock {
		p.blocks[b.next].prev = b.prev
	} else {
		p.tail = b.prev
	}
	b.prev, b.next, b.inFree = noBlock, noBlock, false
	p.numFree--
	if b.hashed {
		p.numCachedFree--
	}
}

// lookup returns the block holding hash h.
func (p *blockPool) lookup(h uint64) (int32, bool) {
	id, ok := p.byHash[h]
	return id, ok
}

// touch takes a reference on a cached block, taking it out of the free
// queue if it was free.
func (p *blockPool) touch(id int32) {
	b := &p.blocks[id]
	if b.inFree {
		p.removeFree(id)
	}
	b.refs++
}

// allocate takes the least recently used free block, evicting the KV it
// held. The caller checks numFree first.
func (p *blockPool) allocate() int32 {
	id := p.head
	p.removeFree(id)
	b := &p.blocks[id]
	if b.hashed {
		p.evict(id)
	}
	b.refs = 1
	return id
}

func (p *blockPool) evict(id int32) {
	b := &p.blocks[id]
	delete(p.byHash, b.hash)
	b.hashed = false
	*p.events = append(*p.events, kvevents.Event{
		Kind:        kvevents.BlockRemoved,
		BlockHashes: p.arenaHash(b.hash),
		Medium:      kvevents.MediumGPU,
	})
}

// release drops one reference; a block nobody uses joins the free queue.
func (p *blockPool) release(id int32) {
	b := &p.blocks[id]
	b.refs--
	if b.refs == 0 {
		p.pushFree(id)
	}
}

// store makes a full block reusable under hash h. It reports false when
// another block already holds h (the block then stays anonymous).
func (p *blockPool) store(id int32, h uint64) bool {
	if _, dup := p.byHash[h]; dup {
		return false
	}
	b := &p.blocks[id]
	b.hashed, b.hash = true, h
	p.byHash[h] = id
	return true
}

// clear forgets every hash (vLLM's reset_prefix_cache). Blocks in use keep
// their KV but can no longer be hit, matching what AllBlocksCleared tells a
// consumer.
func (p *blockPool) clear() {
	clear(p.byHash)
	for i := range p.blocks {
		p.blocks[i].hashed = false
	}
	p.numCachedFree = 0
}

func (p *blockPool) hashes() []uint64 {
	out := make([]uint64, 0, len(p.byHash))
	for h := range p.byHash {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// arenaHash returns a one-element slice holding h for a BlockRemoved event,
// carved from a per-step arena so that evicting does not allocate. Slices
// handed out earlier stay valid when the arena grows (they keep the old
// array); the arena is rewound at the start of each step, after the sink has
// seen the previous step's events.
func (p *blockPool) arenaHash(h uint64) []uint64 {
	n := len(p.arena)
	p.arena = append(p.arena, h)
	return p.arena[n : n+1 : n+1]
}

// Block hashes: FNV-1a (64 bit) over the parent's hash and the block's token
// ids, both little-endian. They are the engine's own opaque ids, deliberately
// unlike the router's XXH3 scheme, as vLLM's sha256 hashes are.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// rootHash is the parent hash of a request's first block, derived from the
// engine's seed like vLLM's NONE_HASH from PYTHONHASHSEED.
func rootHash(seed int64) uint64 {
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], uint64(seed))
	h := uint64(fnvOffset)
	for _, c := range []byte("hearth-sim-root") {
		h = (h ^ uint64(c)) * fnvPrime
	}
	for _, c := range buf {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h
}

func chainHash(parent uint64, tokens []uint32) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < 8; i++ {
		h = (h ^ (parent >> (8 * i) & 0xff)) * fnvPrime
	}
	for _, t := range tokens {
		for i := 0; i < 4; i++ {
			h = (h ^ uint64(t>>(8*i)&0xff)) * fnvPrime
		}
	}
	return h
}

// chainSalt is the parent a salted request's first block chains from: the
// salt takes part in that block's hash as vLLM's first-block extra key does.
func chainSalt(root uint64, salt []byte) uint64 {
	h := root
	for _, c := range salt {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h
}

// vllmSaltExtraKeys is the extra_keys of a BlockStored of a salted
// request's first n blocks: ("salt",) for the first block, the only one
// whose hash covers it (vllm/v1/core/kv_cache_utils.py,
// generate_block_hash_extra_keys), None for the others.
func vllmSaltExtraKeys(salt []byte, n int) [][]byte {
	first := make([]byte, 0, len(salt)+4)
	first = append(first, 0x91) // a tuple of one
	switch {
	case len(salt) < 32:
		first = append(first, 0xa0|byte(len(salt)))
	case len(salt) < 256:
		first = append(first, 0xd9, byte(len(salt)))
	default:
		first = append(first, 0xda, byte(len(salt)>>8), byte(len(salt)))
	}
	first = append(first, salt...)
	keys := make([][]byte, n)
	keys[0] = first
	return keys
}
