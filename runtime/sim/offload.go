package sim

import (
	"slices"

	"github.com/hearth-llm/hearth/kvevents"
)

// The host-RAM tier models vLLM's native KV offloading (--kv-offloading-size
// GiB --kv-offloading-backend native: the OffloadingConnector with its CPU
// backend and LRU offloading manager), as read in vLLM's source (late 2026):
//
//   - Write-through on compute, not on eviction: after each scheduler step
//     the connector offers every request's newly computed full blocks to the
//     CPU manager, which skips hashes it already holds and stores the rest.
//     A block is therefore in host RAM long before the GPU evicts it, and
//     stays there independently of the GPU cache.
//   - The CPU pool is an LRU keyed by the engine's block hash. Storing into
//     a full pool first evicts least recently used entries; a store larger
//     than the whole pool is dropped (vLLM logs "cannot store" and retries
//     the next step). After a store, and whenever a waiting request is
//     looked up, the request's whole block list is touched last block first,
//     so a chain's first block is the most recently used and deeper blocks
//     are evicted before their parents.
//   - Lookup happens when a waiting request is scheduled: after the GPU
//     prefix hits, the match continues block by block in the CPU pool. Those
//     blocks are loaded into newly allocated GPU blocks and count as
//     computed; once loaded they are cached on the GPU like computed blocks
//     (GPU BlockStored). Blocks loaded are not stored back.
//   - Events (medium "CPU"), as vLLM v0.20's OffloadingConnectorScheduler
//     .take_events writes them (docs/engine-conformance.md V1-V3): the
//     evictions of a store are one BlockRemoved listing every evicted
//     block, and a store's new blocks one BlockStored (the manager's
//     complete_store event) with no parent, no token ids and block_size
//     0. Both name the blocks by their raw hashes, as bytes, whatever the
//     GPU events use: the GPU's int is the low 64 bits of those bytes
//     (kvevents.Event.BytesHashes). A consumer can only place them through
//     the GPU BlockStored events that carried the same hashes. An
//     offloaded block is one GPU block: Hearth sets no block_size in the
//     connector's config, so vLLM's block_size_factor is 1. The SGLang
//     flavour's host tier sends ints (SGLang's HiCache events).
//
// Simplifications, documented where they apply: vLLM loads asynchronously
// (the request waits in WAITING_FOR_REMOTE_KVS while the batch runs) and
// stores asynchronously after the forward pass; here a load's PCIe time is
// added to the step that schedules the request (delaying that step's whole
// batch, a conservative choice), stores complete within their step and cost
// nothing (device-to-host copies use the other direction of the link and
// overlap the next steps' compute), and the step's CPU events follow its
// GPU events.

// cpuPool is the host-RAM block pool: a fixed number of slots, a hash
// table and an intrusive LRU list (head is evicted first).
type cpuPool struct {
	slots      []cpuSlot
	byHash     map[uint64]int32
	head, tail int32
	free       []int32 // unused slot ids
	gpu        *blockPool
	events     *[]kvevents.Event
	// bytesHashes makes the events name blocks by their hashes as bytes,
	// as vLLM's offloading connector does.
	bytesHashes bool
}

type cpuSlot struct {
	hash       uint64
	prev, next int32
}

func newCPUPool(n int, gpu *blockPool, events *[]kvevents.Event, bytesHashes bool) *cpuPool {
	p := &cpuPool{
		slots:       make([]cpuSlot, n),
		byHash:      make(map[uint64]int32, n),
		head:        noBlock,
		tail:        noBlock,
		free:        make([]int32, n),
		gpu:         gpu,
		events:      events,
		bytesHashes: bytesHashes,
	}
	for i := range p.free {
		p.free[i] = int32(n - 1 - i) // pop order 0, 1, 2, ...
	}
	return p
}

func (p *cpuPool) has(h uint64) bool {
	_, ok := p.byHash[h]
	return ok
}

func (p *cpuPool) unlink(id int32) {
	s := &p.slots[id]
	if s.prev != noBlock {
		p.slots[s.prev].next = s.next
	} else {
		p.head = s.next
	}
	if s.next != noBlock {
		p.slots[s.next].prev = s.prev
	} else {
		p.tail = s.prev
	}
	s.prev, s.next = noBlock, noBlock
}

func (p *cpuPool) pushTail(id int32) {
	s := &p.slots[id]
	s.prev, s.next = p.tail, noBlock
	if p.tail != noBlock {
		p.slots[p.tail].next = id
	} else {
		p.head = id
	}
	p.tail = id
}

// touch marks the held blocks among hashes as recently used, the first one
// most recently.
func (p *cpuPool) touch(hashes []uint64) {
	for i := len(hashes) - 1; i >= 0; i-- {
		if id, ok := p.byHash[hashes[i]]; ok && id != p.tail {
			p.unlink(id)
			p.pushTail(id)
		}
	}
}

// store offloads the blocks of hashes it does not hold yet, evicting least
// recently used blocks to make room, and returns how many it stored. It
// reports false, storing nothing, when the new blocks outnumber the whole
// pool.
func (p *cpuPool) store(hashes []uint64) (stored int, ok bool) {
	n := 0
	for _, h := range hashes {
		if !p.has(h) {
			n++
		}
	}
	if n == 0 {
		return 0, true
	}
	if n > len(p.slots) {
		return 0, false
	}
	if evict := n - len(p.free); evict > 0 {
		start := len(p.gpu.arena)
		for range evict {
			id := p.head
			h := p.slots[id].hash
			p.unlink(id)
			delete(p.byHash, h)
			p.free = append(p.free, id)
			p.gpu.arena = append(p.gpu.arena, h)
		}
		end := len(p.gpu.arena)
		*p.events = append(*p.events, kvevents.Event{
			Kind:        kvevents.BlockRemoved,
			BlockHashes: p.gpu.arena[start:end:end],
			BytesHashes: p.bytesHashes,
			Medium:      kvevents.MediumCPU,
		})
	}
	start := len(p.gpu.arena)
	for _, h := range hashes {
		if p.has(h) {
			continue
		}
		id := p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		p.slots[id].hash = h
		p.byHash[h] = id
		p.pushTail(id)
		p.gpu.arena = append(p.gpu.arena, h)
	}
	end := len(p.gpu.arena)
	*p.events = append(*p.events, kvevents.Event{
		Kind:        kvevents.BlockStored,
		BlockHashes: p.gpu.arena[start:end:end],
		BytesHashes: p.bytesHashes,
		Medium:      kvevents.MediumCPU,
	})
	return n, true
}

// clear forgets every offloaded block (reset_prefix_cache; see Core.Reset).
func (p *cpuPool) clear() {
	clear(p.byHash)
	p.head, p.tail = noBlock, noBlock
	p.free = p.free[:0]
	for i := len(p.slots) - 1; i >= 0; i-- {
		p.slots[i] = cpuSlot{prev: noBlock, next: noBlock}
		p.free = append(p.free, int32(i))
	}
}

func (p *cpuPool) len() int { return len(p.byHash) }

func (p *cpuPool) hashes() []uint64 {
	out := make([]uint64, 0, len(p.byHash))
	for h := range p.byHash {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}
