package ingest

import "math/bits"

// ehTable maps one worker's engine block hashes to the router's sequence
// hashes, together with the tiers in which the engine holds each block.
// BlockRemoved events name blocks only by engine hash, and offloading
// connectors store blocks in lower tiers without their tokens, so the
// mapping must outlive the event that created it for as long as some tier
// still holds the block.
//
// It is an open-addressing table with linear probing and backward-shift
// deletion (no tombstones) over two parallel arrays: 16 bytes of key and
// value per slot plus one byte of tier bits, which also marks empty slots
// (a live entry is in at least one tier). The table grows by half when
// three quarters full and shrinks when under three eighths full, so it
// costs 17 bytes per slot at 37.5–75 % load: 23–46 bytes per (block,
// worker), about 26 in the ingest benchmark's steady state. A Go map would
// pad the tier byte into a 24-byte slot and double its table when it
// grows, which bounds its cost less tightly.
type ehTable struct {
	slots []ehSlot
	tiers []uint8 // bit t set: the engine holds the block in kvtier.Tier t; 0: empty slot
	n     int     // live entries
}

type ehSlot struct {
	key uint64 // engine block hash
	val uint64 // tokenizer.SeqHash of the block
}

const ehMinSlots = 64

// ehHome returns the preferred slot of key in a table of n slots. The
// multiply-shift range reduction works for any n, which lets the table grow
// by 1.5× instead of doubling.
func ehHome(key uint64, n int) int {
	// Engine hashes can be small integers (Python's hash of an int is the
	// int itself), so mix all bits into the high ones first.
	key ^= key >> 33
	key *= 0xff51afd7ed558ccd
	key ^= key >> 33
	hi, _ := bits.Mul64(key, uint64(n))
	return int(hi)
}

func (t *ehTable) len() int { return t.n }

// bytes is the memory held by the table's arrays.
func (t *ehTable) bytes() int { return len(t.slots)*16 + len(t.tiers) }

// find returns the slot holding key, or -1.
func (t *ehTable) find(key uint64) int {
	if t.n == 0 {
		return -1
	}
	n := len(t.slots)
	for i := ehHome(key, n); ; {
		if t.tiers[i] == 0 {
			return -1
		}
		if t.slots[i].key == key {
			return i
		}
		if i++; i == n {
			i = 0
		}
	}
}

// get returns the sequence hash key maps to.
func (t *ehTable) get(key uint64) (val uint64, ok bool) {
	if i := t.find(key); i >= 0 {
		return t.slots[i].val, true
	}
	return 0, false
}

// put maps key to val and adds tier bit to the tiers holding it. An engine
// hash that already maps to another value is remapped: the engine decides
// what its ids mean.
func (t *ehTable) put(key, val uint64, bit uint8) {
	if i := t.find(key); i >= 0 {
		t.slots[i].val = val
		t.tiers[i] |= bit
		return
	}
	if 4*(t.n+1) > 3*len(t.slots) {
		t.resize(max(ehMinSlots, len(t.slots)*3/2))
	}
	t.insertNew(key, val, bit)
}

// addTier adds tier bit to an existing entry and returns its value.
func (t *ehTable) addTier(key uint64, bit uint8) (val uint64, ok bool) {
	i := t.find(key)
	if i < 0 {
		return 0, false
	}
	t.tiers[i] |= bit
	return t.slots[i].val, true
}

// dropTier removes tier bit from key's entry and deletes the entry when no
// tier holds the block any more. ok is false when key was not held in that
// tier.
func (t *ehTable) dropTier(key uint64, bit uint8) (val uint64, ok bool) {
	i := t.find(key)
	if i < 0 || t.tiers[i]&bit == 0 {
		return 0, false
	}
	val = t.slots[i].val
	if t.tiers[i] &^= bit; t.tiers[i] == 0 {
		t.deleteAt(i)
		if len(t.slots) > ehMinSlots && 8*t.n < 3*len(t.slots) {
			t.resize(max(ehMinSlots, t.n*2))
		}
	}
	return val, true
}

// reset forgets every entry and returns the memory.
func (t *ehTable) reset() { *t = ehTable{} }

func (t *ehTable) insertNew(key, val uint64, bit uint8) {
	n := len(t.slots)
	i := ehHome(key, n)
	for t.tiers[i] != 0 {
		if i++; i == n {
			i = 0
		}
	}
	t.slots[i] = ehSlot{key, val}
	t.tiers[i] = bit
	t.n++
}

// deleteAt empties slot i and shifts later entries of its probe run back so
// that every entry stays reachable from its home slot.
func (t *ehTable) deleteAt(i int) {
	n := len(t.slots)
	j := i
	for {
		if j++; j == n {
			j = 0
		}
		if t.tiers[j] == 0 {
			break
		}
		h := ehHome(t.slots[j].key, n)
		// The entry at j may move to i only if its home is not cyclically
		// within (i, j]: otherwise i lies before its home.
		var stays bool
		if i <= j {
			stays = i < h && h <= j
		} else {
			stays = i < h || h <= j
		}
		if stays {
			continue
		}
		t.slots[i], t.tiers[i] = t.slots[j], t.tiers[j]
		i = j
	}
	t.slots[i], t.tiers[i] = ehSlot{}, 0
	t.n--
}

func (t *ehTable) resize(size int) {
	old, oldTiers := t.slots, t.tiers
	t.slots = make([]ehSlot, size)
	t.tiers = make([]uint8, size)
	t.n = 0
	for i, bit := range oldTiers {
		if bit != 0 {
			t.insertNew(old[i].key, old[i].val, bit)
		}
	}
}
