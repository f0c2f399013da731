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
