package router

// u64Table is a small open-addressing hash map from a non-zero uint64 key
// to a uint64 value (linear probing, backward-shift deletion, power-of-two
// size). The active set updates one entry per prompt block on every route
// and free; this keeps those updates to a few nanoseconds without the
// overhead of a general map.
type u64Table struct {
	keys []uint64 // 0 marks an empty slot
	vals []uint64
	n    int
	mask int
}

func (t *u64Table) slot(key uint64) int {
	return int((key * 0x9e3779b97f4a7c15) >> 32 & uint64(t.mask))
}

// get returns key's value, or 0 when absent.
func (t *u64Table) get(key uint64) uint64 {
	if t.n == 0 {
		return 0
	}
	for i := t.slot(key); ; i = (i + 1) & t.mask {
		switch t.keys[i] {
		case key:
			return t.vals[i]
		case 0:
			return 0
		}
	}
}

// ref returns a pointer to key's value, inserting a zero value if absent.
// The pointer is valid until the next insertion or deletion.
func (t *u64Table) ref(key uint64) *uint64 {
	if (t.n+1)*2 > len(t.keys) { // load ≤ 1/2: short probes matter more than memory here
		t.grow()
	}
	for i := t.slot(key); ; i = (i + 1) & t.mask {
		switch t.keys[i] {
		case key:
			return &t.vals[i]
		case 0:
			t.keys[i] = key
			t.vals[i] = 0
			t.n++
			return &t.vals[i]
		}
	}
}

func (t *u64Table) grow() {
	size := max(2*len(t.keys), 256)
	old, oldVals := t.keys, t.vals
	t.keys = make([]uint64, size)
	t.vals = make([]uint64, size)
	t.mask = size - 1
	for i, k := range old {
		if k == 0 {
			continue
		}
		j := t.slot(k)
		for t.keys[j] != 0 {
			j = (j + 1) & t.mask
		}
		t.keys[j], t.vals[j] = k, oldVals[i]
	}
}

// del removes key if present.
func (t *u64Table) del(key uint64) {
	if i, ok := t.find(key); ok {
		t.deleteAt(i)
	}
}

// deleteAt empties slot i and shifts the rest of its probe run back.
func (t *u64Table) deleteAt(i int) {
	t.n--
	for j := i; ; {
		j = (j + 1) & t.mask
		k := t.keys[j]
		if k == 0 {
			break
		}
		h := t.slot(k)
		// Move k back to i unless its home lies cyclically in (i, j].
		if (j-h)&t.mask < (j-i)&t.mask {
			continue
		}
		t.keys[i], t.vals[i] = k, t.vals[j]
		i = j
	}
	t.keys[i], t.vals[i] = 0, 0
}

// len returns the number of keys.
func (t *u64Table) len() int { return t.n }

// andNot clears bits in key's value and deletes key once its value is 0,
// with one probe. It reports whether key was present.
func (t *u64Table) andNot(key, bits uint64) bool {
	i, ok := t.find(key)
	if !ok {
		return false
	}
	if t.vals[i] &^= bits; t.vals[i] == 0 {
		t.deleteAt(i)
	}
	return true
}

// decr subtracts 1 from key's value, deleting it at 0. It reports whether
// key was present.
func (t *u64Table) decr(key uint64) bool {
	i, ok := t.find(key)
	if !ok {
		return false
	}
	if t.vals[i]--; t.vals[i] == 0 {
		t.deleteAt(i)
	}
	return true
}

func (t *u64Table) find(key uint64) (int, bool) {
	if t.n == 0 {
		return 0, false
	}
	for i := t.slot(key); ; i = (i + 1) & t.mask {
		switch t.keys[i] {
		case key:
			return i, true
		case 0:
			return 0, false
		}
	}
}
