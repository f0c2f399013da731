package sim

import (
	"crypto/sha256"

	"github.com/hearth-llm/hearth/kvevents"
)

// NodeStore is the node-wide SSD tier below host RAM: one store shared by
// every engine of a machine, in which blocks are named by their engine hash
// (equal content hashes equally in every engine of a model, so a block one
// engine wrote is one another engine can load). The engine is its only
// user here; what implements it owns capacity, eviction and integrity.
//
// It models the storage tier of the engines' own offloading (vLLM's
// file-system tier below its CPU tier, SGLang's HiCache file backend):
//
//   - Write-through: every full block a step computes is written, after the
//     host-RAM tier is offered it, unless the store holds it already.
//     Stores cost no step time (they run on the other direction of the
//     link and on the store's own threads, overlapping later steps).
//   - Lookup continues where the GPU and host-RAM matches stop. Each block
//     found is read and verified before it counts; the first block that
//     fails (gone, torn, corrupt) ends the match and the rest is
//     recomputed. A read costs the block's bytes at the store's bandwidth
//     plus its PCIe copy, charged to the step that schedules the request.
//   - Loaded blocks become GPU blocks like computed ones (GPU BlockStored)
//     and are not written back.
//   - Events (medium DISK): one BlockStored per written block, by hash
//     only (as the host-RAM tier's). The engine does not evict: the
//     store's owner does, and tells the router itself.
type NodeStore interface {
	// Has reports whether the store holds the block.
	Has(p Page) bool
	// Load reads the block's bytes and verifies them; an error means the
	// block cannot be used and must be recomputed.
	Load(p Page, bytes int64) error
	// Store writes a block of the given size through to the store, which
	// makes room as it sees fit. An error (a full disk) stores nothing.
	Store(p Page, bytes int64) error
}

// Page names a block to a NodeStore: its hash, and for the SGLang flavour
// the page's full SHA-256 digest, which SGLang's file backend names its
// files by (zero for vLLM).
type Page struct {
	Hash   uint64
	Digest [sha256.Size]byte
}

// HashStore is a store that names blocks by their hash alone (Hearth's
// node store spaces, kvbm.Space).
type HashStore interface {
	Has(hash uint64) bool
	Load(hash uint64, bytes int64) error
	Store(hash uint64, bytes int64) error
}

// ByHash makes a HashStore a NodeStore.
func ByHash(s HashStore) NodeStore { return byHash{s} }

type byHash struct{ s HashStore }

func (b byHash) Has(p Page) bool                 { return b.s.Has(p.Hash) }
func (b byHash) Load(p Page, bytes int64) error  { return b.s.Load(p.Hash, bytes) }
func (b byHash) Store(p Page, bytes int64) error { return b.s.Store(p.Hash, bytes) }

// page is r's i-th block as the node store names it.
func (c *Core) page(r *request, i int) Page {
	p := Page{Hash: c.blockHash(r, i)}
	if i < len(r.digests) {
		p.Digest = r.digests[i]
	}
	return p
}

// loadFromStore continues r's match in the node store from block `from`
// and returns how many blocks it loaded. Blocks read once stay read while
// the request waits (r.storeRead), so a request that waits for GPU room
// is not read again every step.
func (c *Core) loadFromStore(r *request, from, maxBlocks int) int {
	n := 0
	for i := from; i < maxBlocks; i++ {
		if i >= r.storeRead {
			p := c.page(r, i)
			if !c.store.Has(p) {
				break
			}
			if err := c.store.Load(p, c.blockBytes); err != nil {
				c.stats.DiskLoadErrors++
				break
			}
			r.storeRead = i + 1
		}
		n++
	}
	return n
}

// writeThrough writes r's full blocks [r.numWritten, full) that the store
// does not hold, with their events.
func (c *Core) writeThrough(r *request, full int) {
	for ; r.numWritten < full; r.numWritten++ {
		p := c.page(r, r.numWritten)
		h := p.Hash
		if c.store.Has(p) {
			continue
		}
		if err := c.store.Store(p, c.blockBytes); err != nil {
			c.stats.DiskStoreErrors++
			return // retried next step
		}
		c.stats.DiskStoredBlocks++
		c.events = append(c.events, kvevents.Event{
			Kind:        kvevents.BlockStored,
			BlockHashes: c.pool.arenaHash(h),
			Medium:      kvevents.MediumDisk,
		})
	}
}
