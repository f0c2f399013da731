package sim

import "github.com/hearth-llm/hearth/kvevents"

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
	// Has reports whether the store holds the block (its catalog; no I/O).
	Has(hash uint64) bool
	// Load reads the block's bytes and verifies them; an error means the
	// block cannot be used and must be recomputed.
	Load(hash uint64, bytes int64) error
	// Store writes a block of the given size through to the store, which
	// makes room as it sees fit. An error (a full disk) stores nothing.
	Store(hash uint64, bytes int64) error
}

// loadFromStore continues r's match in the node store from block `from`
// and returns how many blocks it loaded. Blocks read once stay read while
// the request waits (r.storeRead), so a request that waits for GPU room
// is not read again every step.
func (c *Core) loadFromStore(r *request, from, maxBlocks int) int {
	n := 0
	for i := from; i < maxBlocks; i++ {
		if i >= r.storeRead {
			h := c.blockHash(r, i)
			if !c.store.Has(h) {
				break
			}
			if err := c.store.Load(h, c.blockBytes); err != nil {
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
		h := r.hashes[r.numWritten]
		if c.store.Has(h) {
			continue
		}
		if err := c.store.Store(h, c.blockBytes); err != nil {
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
