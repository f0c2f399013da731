package kvevents

import (
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// unhex turns an annotated hex listing into bytes: "#" starts a comment that
// runs to the end of the line, and whitespace is ignored.
func unhex(t testing.TB, listing string) []byte {
	t.Helper()
	var sb strings.Builder
	for line := range strings.SplitSeq(listing, "\n") {
		line, _, _ = strings.Cut(line, "#")
		sb.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(sb.String())
	if err != nil {
		t.Fatalf("bad hex listing: %v", err)
	}
	return b
}

// readVector reads testdata/<name>.hex.
func readVector(t testing.TB, name string) []byte {
	t.Helper()
	listing, err := os.ReadFile(filepath.Join("testdata", name+".hex"))
	if err != nil {
		t.Fatal(err)
	}
	return unhex(t, string(listing))
}

// allVectors returns every payload in testdata, hand-written and generated,
// by file name.
func allVectors(t testing.TB) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*", "*.hex"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no vectors in testdata: %v", err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		rel, _ := filepath.Rel("testdata", p)
		out[rel] = readVector(t, strings.TrimSuffix(rel, ".hex"))
	}
	return out
}

// eventView is an Event in a form reflect.DeepEqual compares by value:
// empty slices are nil, byte strings are strings.
type eventView struct {
	Kind      Kind
	Hashes    []uint64
	Bytes     bool // BytesHashes
	Parent    uint64
	HasParent bool
	Tokens    []uint32
	BlockSize int
	LoRAID    int64
	HasLoRAID bool
	LoRAName  string
	Medium    Medium
	Group     int64
	Extra     []string // hex of each block's extra keys
	Salt      string
	Component string
	SpecKind  string
	Window    int64
}

type batchView struct {
	TS        uint64 // bits, so that NaN equals itself
	DPRank    int64
	HasDPRank bool
	Events    []eventView
}

func viewOf(ev *Event) eventView {
	v := eventView{
		Kind: ev.Kind, Bytes: ev.BytesHashes, Parent: ev.ParentBlockHash, HasParent: ev.HasParent, BlockSize: ev.BlockSize,
		LoRAID: ev.LoRAID, HasLoRAID: ev.HasLoRAID, LoRAName: string(ev.LoRAName),
		Medium: ev.Medium, Group: ev.GroupIdx, Salt: string(ev.CacheSalt),
		Component: string(ev.ComponentType), SpecKind: string(ev.SpecKind), Window: ev.SlidingWindow,
	}
	if len(ev.BlockHashes) > 0 {
		v.Hashes = append([]uint64{}, ev.BlockHashes...)
	}
	if len(ev.TokenIDs) > 0 {
		v.Tokens = append([]uint32{}, ev.TokenIDs...)
	}
	for _, raw := range ev.ExtraKeys {
		v.Extra = append(v.Extra, hex.EncodeToString(raw))
	}
	return v
}

func batchViewOf(b *Batch) batchView {
	v := batchView{TS: math.Float64bits(b.TS), DPRank: b.DPRank, HasDPRank: b.HasDPRank}
	for i := range b.Events {
		v.Events = append(v.Events, viewOf(&b.Events[i]))
	}
	return v
}

// carried reduces a view to the fields the event's class has in format f;
// the rest is not written, so it cannot come back.
func carried(v batchView, f Format) batchView {
	out := v
	out.Events = nil
	for _, ev := range v.Events {
		c := eventView{Kind: ev.Kind}
		switch ev.Kind {
		case BlockStored:
			c = ev
			if f.SGLang() {
				// SGLang's hashes are ints.
				c.LoRAName, c.Extra, c.Group, c.Bytes, c.SpecKind, c.Window = "", nil, 0, false, "", 0
			} else {
				c.Salt, c.Component = "", ""
			}
		case BlockRemoved:
			c.Hashes, c.Medium = ev.Hashes, ev.Medium
			if !f.SGLang() {
				c.Group, c.Bytes = ev.Group, ev.Bytes
			} else {
				c.Component = ev.Component
			}
		}
		out.Events = append(out.Events, c)
	}
	return out
}
