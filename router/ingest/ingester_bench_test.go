package ingest

import (
	"log/slog"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/hearth-llm/hearth/kvevents"
	"github.com/hearth-llm/hearth/kvtier"
)

// benchBatches makes a realistic steady-state stream for a worker whose
// cache holds about 8k blocks: each batch stores 16 sequences of 16 blocks
// of 16 tokens (ids of a 150k vocabulary) as two BlockStored events each,
// the second chained from the first, and removes the 16 sequences stored
// 32 batches earlier, as an engine evicts to make room. The stream is
// cyclic: after one warm-up pass every remove finds its blocks.
func benchBatches() (payloads [][]byte, storedPerPass int) {
	r := rand.New(rand.NewPCG(7, 7))
	e := newFakeEngine(1, 1)
	const (
		batches   = 64
		seqsPer   = 16
		blocksPer = 8
		window    = 32
	)
	seqs := make([][][]uint32, batches)
	for i := range seqs {
		for range seqsPer {
			toks := make([]uint32, 2*blocksPer*16)
			for j := range toks {
				toks[j] = r.Uint32N(150000)
			}
			seqs[i] = append(seqs[i], toks)
		}
	}
	for i := range batches {
		var evs []kvevents.Event
		for _, toks := range seqs[i] {
			evs = append(evs, e.store(toks, 0, blocksPer, ""), e.store(toks, blocksPer, 2*blocksPer, ""))
			storedPerPass += 2 * blocksPer
		}
		for _, toks := range seqs[(i+batches-window)%batches] {
			evs = append(evs, e.remove(toks, 0, 2*blocksPer, kvtier.GPU))
		}
		payloads = append(payloads, encodeBatch(1, evs...))
	}
	return payloads, storedPerPass
}

// BenchmarkIngest measures decode, re-hash, engine-hash mapping and index
// updates into a trivial index. blocks/s is stored blocks per second of
// wall time; blocks/cpu-s per second of the benchmark goroutine's own CPU
// time (pinned to its thread), which is what one core sustains even when
// the machine is busy with other work.
func BenchmarkIngest(b *testing.B) {
	payloads, storedPerPass := benchBatches()
	idx := &countingIndex{}
	in := NewIngester(IngesterConfig{WorkerID: 1, Logger: slog.New(slog.DiscardHandler)}, idx, nil)
	seq := uint64(0)
	pass := func() {
		for _, p := range payloads {
			in.apply(seq, p)
			seq++
		}
	}
	pass() // warm up: fill the mapping to its steady size
	before := in.Stats()
	size := 0
	for _, p := range payloads {
		size += len(p)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPUTime()
	b.ResetTimer()
	for b.Loop() {
		pass()
	}
	b.StopTimer()
	cpu := threadCPUTime() - cpu0
	after := in.Stats()
	if after.Malformed+after.Orphans+after.UnknownRemove != before.Malformed+before.Orphans+before.UnknownRemove {
		b.Fatalf("unexpected stats %+v", after)
	}
	blocks := float64(storedPerPass) * float64(b.N)
	b.ReportMetric(blocks/b.Elapsed().Seconds(), "blocks/s")
	if cpu > 0 {
		b.ReportMetric(blocks/cpu.Seconds(), "blocks/cpu-s")
	}
	b.ReportMetric(float64(after.MappingBytes)/float64(after.MappedBlocks), "mapB/block")
}
