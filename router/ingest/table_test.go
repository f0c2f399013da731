package ingest

import (
	"math/rand/v2"
	"testing"
)

type tableModelEntry struct {
	val   uint64
	tiers uint8
}

// checkTable fails unless t holds exactly the model's entries, each
// reachable from its home slot.
func checkTable(t *testing.T, tab *ehTable, model map[uint64]tableModelEntry) {
	t.Helper()
	if tab.len() != len(model) {
		t.Fatalf("len %d, model %d", tab.len(), len(model))
	}
	live := 0
	for i, bit := range tab.tiers {
		if bit != 0 {
			live++
			if tab.find(tab.slots[i].key) != i {
				t.Fatalf("entry %x in slot %d is not reachable", tab.slots[i].key, i)
			}
		}
	}
	if live != len(model) {
		t.Fatalf("%d occupied slots, model %d", live, len(model))
	}
	for k, m := range model {
		i := tab.find(k)
		if i < 0 || tab.slots[i].val != m.val || tab.tiers[i] != m.tiers {
			t.Fatalf("key %x: slot %d, want %+v", k, i, m)
		}
	}
	if len(tab.slots) > ehMinSlots && 4*len(model) > 3*len(tab.slots) {
		t.Fatalf("load %d/%d above 3/4", len(model), len(tab.slots))
	}
}

func TestEngineHashTableAgainstModel(t *testing.T) {
	tests := []struct {
		name string
		keys func(r *rand.Rand) uint64
	}{
		{"small keys, including 0", func(r *rand.Rand) uint64 { return r.Uint64N(300) }},
		{"random keys", func(r *rand.Rand) uint64 { return r.Uint64()>>r.UintN(64) | 1<<63*(r.Uint64()&1) }},
		{"keys that differ only in high bits", func(r *rand.Rand) uint64 { return r.Uint64N(200) << 50 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var tab ehTable
			model := map[uint64]tableModelEntry{}
			for step := range 20000 {
				k := tc.keys(r)
				bit := uint8(1) << r.UintN(3)
				// Grow for the first half, then shrink, so both resizes run.
				op := r.UintN(10)
				if step > 10000 {
					op = r.UintN(7) + 3
				}
				switch {
				case op < 3:
					v := r.Uint64()
					tab.put(k, v, bit)
					m := model[k]
					model[k] = tableModelEntry{v, m.tiers | bit}
				case op < 5:
					v, ok := tab.addTier(k, bit)
					m, had := model[k]
					if ok != had || ok && v != m.val {
						t.Fatalf("addTier(%x) = %x, %v; model %+v, %v", k, v, ok, m, had)
					}
					if had {
						m.tiers |= bit
						model[k] = m
					}
				case op < 8:
					v, ok := tab.dropTier(k, bit)
					m, had := model[k]
					wantOK := had && m.tiers&bit != 0
					if ok != wantOK || ok && v != m.val {
						t.Fatalf("dropTier(%x, %d) = %x, %v; model %+v", k, bit, v, ok, m)
					}
					if wantOK {
						if m.tiers &^= bit; m.tiers == 0 {
							delete(model, k)
						} else {
							model[k] = m
						}
					}
				default:
					v, ok := tab.get(k)
					m, had := model[k]
					if ok != had || ok && v != m.val {
						t.Fatalf("get(%x) = %x, %v; model %+v, %v", k, v, ok, m, had)
					}
				}
				if step%97 == 0 {
					checkTable(t, &tab, model)
				}
			}
			checkTable(t, &tab, model)
			tab.reset()
			if tab.len() != 0 || tab.bytes() != 0 {
				t.Errorf("after reset: len %d, %d bytes", tab.len(), tab.bytes())
			}
		})
	}
}

func TestEngineHashTableMemory(t *testing.T) {
	// The budget the doc comment promises: at most 46 bytes per mapped
	// block once past the minimum size, whatever the history.
	var tab ehTable
	for k := range uint64(100000) {
		tab.put(k, k, 1)
		if n := tab.len(); n > 1000 && tab.bytes() > 46*n {
			t.Fatalf("%d entries use %d bytes", n, tab.bytes())
		}
	}
	for k := range uint64(99000) {
		tab.dropTier(k, 1)
		if n := tab.len(); n > 1000 && tab.bytes() > 46*n {
			t.Fatalf("after removals: %d entries use %d bytes", n, tab.bytes())
		}
	}
}
