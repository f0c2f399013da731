package router

import (
	"math/bits"
	"sync"

	"github.com/hearth-llm/hearth/tokenizer"
)

// blockPriorities remembers, for the blocks of recent prompts, the highest
// Hints.Priority of the requests whose prompts covered them, so that the
// node's SSD store can weigh priority when it evicts
// (NodeBlockPriority). Only the router sees requests: the store sees
// files, named by engine hash, that engines write with no request
// attached.
//
// It is a direct-mapped table of a power of two slots, 16 bytes each: a
// block's slot holds it until a block of another hash with the same slot
// is noted, so the record is bounded and keeps the most recent blocks
// first (a forgotten block reads as unknown, which the store treats as
// a block no turn covered). Noting and looking up are O(1) and never
// allocate.
type blockPriorities struct {
	mu    sync.Mutex
	shift uint8
	slots []prioSlot
}

type prioSlot struct {
	hash tokenizer.SeqHash
	prio int32
	used bool
}

// newBlockPriorities returns a record of at least n slots (rounded up to a
// power of two), or nil for n ≤ 0.
func newBlockPriorities(n int) *blockPriorities {
	if n <= 0 {
		return nil
	}
	b := bits.Len(uint(n - 1))
	return &blockPriorities{shift: uint8(64 - b), slots: make([]prioSlot, 1<<b)}
}

// slot is where h lives: sequence hashes are hashes already, but a
// multiplicative spread keeps chained ones from sharing low bits.
func (b *blockPriorities) slot(h tokenizer.SeqHash) *prioSlot {
	if b.shift == 64 {
		return &b.slots[0]
	}
	return &b.slots[(uint64(h)*0x9e3779b97f4a7c15)>>b.shift]
}

// note records that a request of priority prio covered the blocks hashes.
func (b *blockPriorities) note(hashes []tokenizer.SeqHash, prio int) {
	p := int32(max(min(prio, 1<<30), -1<<30))
	b.mu.Lock()
	for _, h := range hashes {
		s := b.slot(h)
		if s.used && s.hash == h {
			s.prio = max(s.prio, p)
			continue
		}
		*s = prioSlot{hash: h, prio: p, used: true}
	}
	b.mu.Unlock()
}

// of is the highest priority noted for h, false when h is not (or no
// longer) in the record.
func (b *blockPriorities) of(h tokenizer.SeqHash) (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.slot(h)
	if !s.used || s.hash != h {
		return 0, false
	}
	return int(s.prio), true
}
