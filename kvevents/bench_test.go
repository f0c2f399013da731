package kvevents

import (
	"math/rand/v2"
	"testing"
)

// benchBatch is a busy step of a cache holding thousands of blocks: 16
// sequences of 16 blocks of 16 tokens (ids of a 150k vocabulary) stored as
// two chained BlockStored events each, and as many blocks removed.
func benchBatch() *Batch {
	r := rand.New(rand.NewPCG(7, 7))
	b := &Batch{TS: 1_700_000_000, HasDPRank: true}
	var removed []uint64
	for range 16 {
		var parent uint64
		for half := range 2 {
			ev := Event{Kind: BlockStored, BlockSize: 16, ParentBlockHash: parent, HasParent: half > 0}
			for range 8 {
				h := r.Uint64()
				ev.BlockHashes = append(ev.BlockHashes, h)
				removed = append(removed, h^1)
				for range 16 {
					ev.TokenIDs = append(ev.TokenIDs, r.Uint32N(150000))
				}
			}
			parent = ev.BlockHashes[len(ev.BlockHashes)-1]
			b.Events = append(b.Events, ev)
		}
	}
	for i := 0; i < len(removed); i += 16 {
		b.Events = append(b.Events, Event{Kind: BlockRemoved, BlockHashes: removed[i : i+16]})
	}
	return b
}

// BenchmarkDecode decodes one benchBatch payload; blocks/s counts stored
// blocks.
func BenchmarkDecode(b *testing.B) {
	for _, f := range allFormats {
		b.Run(f.String(), func(b *testing.B) {
			p := AppendBatch(nil, benchBatch(), f)
			var dec Decoder
			var batch Batch
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			for b.Loop() {
				if err := dec.Decode(p, &batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(16*16*b.N)/b.Elapsed().Seconds(), "blocks/s")
		})
	}
}

// BenchmarkAppendBatch encodes one benchBatch into a fresh buffer, as a
// publisher that keeps every payload for replay does.
func BenchmarkAppendBatch(b *testing.B) {
	for _, f := range allFormats {
		b.Run(f.String(), func(b *testing.B) {
			batch := benchBatch()
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n = len(AppendBatch(nil, batch, f))
			}
			b.SetBytes(int64(n))
		})
	}
}
