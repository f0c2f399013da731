package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/kvevents"
	"github.com/hearth-llm/hearth/tokenizer"
)

// TestKVProbeViewCauses: what the check says of events that decode but do
// not name the probe's blocks as Hearth predicts, each batch as an engine
// could publish the probe's 12 blocks (the first 4, then the other 8
// chained from them).
func TestKVProbeViewCauses(t *testing.T) {
	probe := make([]uint32, 12*16)
	for i := range probe {
		probe[i] = uint32(1000 + i)
	}
	stored := func(hashes []uint64, parent uint64, tokens []uint32, bs int, m kvevents.Medium) kvevents.Event {
		return kvevents.Event{Kind: kvevents.BlockStored, BlockHashes: hashes, ParentBlockHash: parent, HasParent: parent != 0,
			TokenIDs: tokens, BlockSize: bs, Medium: m}
	}
	hashes := func(from, n int) []uint64 {
		h := make([]uint64, n)
		for i := range h {
			h[i] = uint64(100 + from + i)
		}
		return h
	}
	tests := []struct {
		name    string
		events  []kvevents.Event
		matched int
		cause   string
	}{
		{"as predicted", []kvevents.Event{
			stored(hashes(0, 4), 0, probe[:64], 16, kvevents.MediumGPU),
			stored(hashes(4, 8), 103, probe[64:], 16, kvevents.MediumGPU),
		}, 12, ""},
		{"blocks of 32 tokens", []kvevents.Event{
			stored(hashes(0, 2), 0, probe[:64], 32, kvevents.MediumGPU),
			stored(hashes(2, 4), 101, probe[64:], 32, kvevents.MediumGPU),
		}, 0, "blocks of [32] tokens, Hearth hashes blocks of 16"},
		{"host memory only", []kvevents.Event{
			stored(hashes(0, 12), 0, probe, 16, kvevents.MediumCPU),
		}, 0, "in [CPU], none on the GPU"},
		{"tokens of other blocks", []kvevents.Event{
			stored(hashes(0, 4), 0, probe[64:128], 16, kvevents.MediumGPU),
		}, 0, "no event stored a block with its tokens"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newKVProbeView(kvevents.FormatMap, probe, 16, tokenizer.BlockHashes(probe, 16))
			v.add(kvevents.AppendBatch(nil, &kvevents.Batch{TS: 1, Events: tc.events}, kvevents.FormatMap))
			c := v.judge(time.Second)
			if c.Matched != tc.matched || c.Blocks != 12 || !strings.Contains(c.Cause, tc.cause) ||
				(tc.cause == "") != (c.State == KVEventsMatch) {
				t.Errorf("check %+v, want %d matched and a cause saying %q", c, tc.matched, tc.cause)
			}
		})
	}
}

// TestKVProbeViewCountsIndexedGroups: on a hybrid model each KV-cache
// group stores the probe's blocks in its own events, and only the groups
// the router indexes (full attention) count. A sliding-window group whose
// events chain as predicted must not hide a full-attention group whose
// chain breaks after the first request's 4 blocks.
func TestKVProbeViewCountsIndexedGroups(t *testing.T) {
	probe := make([]uint32, 12*16)
	for i := range probe {
		probe[i] = uint32(1000 + i)
	}
	hashes := func(from, n int) []uint64 {
		h := make([]uint64, n)
		for i := range h {
			h[i] = uint64(100 + from + i)
		}
		return h
	}
	stored := func(group int64, kind string, hashes []uint64, parent uint64, tokens []uint32) kvevents.Event {
		ev := kvevents.Event{Kind: kvevents.BlockStored, BlockHashes: hashes, ParentBlockHash: parent, HasParent: parent != 0,
			TokenIDs: tokens, BlockSize: 16, Medium: kvevents.MediumGPU, GroupIdx: group}
		if kind != "" {
			ev.SpecKind = []byte(kind)
		}
		return ev
	}
	tests := []struct {
		name         string
		window, full int64  // the groups' indices
		windowKind   string // "" when the events name no kind (older releases)
		fullKind     string
	}{
		// vLLM v0.33 names each group's kind; here the sliding window
		// is group 0.
		{"named kinds, window first", 0, 1, "sliding_window", "full_attention"},
		{"named kinds, full first", 1, 0, "sliding_window", "full_attention"},
		// Releases that name no kind put full attention in group 0.
		{"no kinds", 1, 0, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			events := []kvevents.Event{
				stored(tc.window, tc.windowKind, hashes(0, 4), 0, probe[:64]),
				stored(tc.full, tc.fullKind, hashes(0, 4), 0, probe[:64]),
				stored(tc.window, tc.windowKind, hashes(4, 8), 103, probe[64:]),
				// The full-attention group's second request names a
				// parent no block of it has.
				stored(tc.full, tc.fullKind, hashes(4, 8), 999, probe[64:]),
			}
			v := newKVProbeView(kvevents.FormatMap, probe, 16, tokenizer.BlockHashes(probe, 16))
			v.add(kvevents.AppendBatch(nil, &kvevents.Batch{TS: 1, Events: events}, kvevents.FormatMap))
			c := v.judge(time.Second)
			if c.State != KVEventsDiffer || c.Matched != 4 || c.FirstDifference != 4 || !strings.Contains(c.Cause, "parent hash 0x3e7") {
				t.Errorf("%s, %d of %d matched, first difference %d, cause %q; want 4 of 12 matched, the first difference at block 4, for the parent hash 0x3e7",
					c.State, c.Matched, c.Blocks, c.FirstDifference, c.Cause)
			}
		})
	}
	t.Run("window group alone", func(t *testing.T) {
		v := newKVProbeView(kvevents.FormatMap, probe, 16, tokenizer.BlockHashes(probe, 16))
		v.add(kvevents.AppendBatch(nil, &kvevents.Batch{TS: 1, Events: []kvevents.Event{
			stored(0, "sliding_window", hashes(0, 4), 0, probe[:64]),
			stored(0, "sliding_window", hashes(4, 8), 103, probe[64:]),
		}}, kvevents.FormatMap))
		c := v.judge(time.Second)
		if c.State != KVEventsDiffer || c.Matched != 0 || !strings.Contains(c.Cause, "only in KV-cache groups other than full attention") {
			t.Errorf("%s, %d matched, cause %q; want none matched, for the groups the router does not index", c.State, c.Matched, c.Cause)
		}
	})
}
