package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// driveCore runs n requests through core in virtual time: prompts share a
// few long prefixes, so some blocks are hit and, with a small cache, others
// are evicted.
func driveCore(t *testing.T, core *Core, rng *rand.Rand, now *time.Duration, n int, prefixes [][]uint32) {
	t.Helper()
	for i := range n {
		prompt := append([]uint32(nil), prefixes[rng.IntN(len(prefixes))]...)
		for range 8 + rng.IntN(120) {
			prompt = append(prompt, uint32(rng.IntN(150000)))
		}
		out := make([]uint32, 4+rng.IntN(24))
		id := fmt.Sprintf("req-%d-%d", *now, i)
		if err := core.Add(*now, &Request{ID: id, Prompt: prompt, Output: out}); err != nil {
			t.Fatalf("add: %v", err)
		}
		// Let a few requests overlap before stepping them all through.
		if i%3 != 2 {
			continue
		}
		for core.HasWork() {
			res := core.Step(*now)
			*now += res.Duration + time.Millisecond
		}
	}
	for core.HasWork() {
		res := core.Step(*now)
		*now += res.Duration + time.Millisecond
	}
}

// TestPublisherMirrorsCoreCache subscribes late and drops messages on
// purpose, and still rebuilds exactly the core's cached blocks from the
// events and the replay socket alone.
func TestPublisherMirrorsCoreCache(t *testing.T) {
	for _, format := range allFormats {
		t.Run(format.String(), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p, done := startPublisher(t, ctx, PublisherOptions{Format: format})
			core, err := NewCore(Config{GPU: "rtx4090", Model: "qwen3-8b", NumGPUBlocks: 64, MaxModelLen: 1024}, p)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(7, uint64(format)))
			prefixes := make([][]uint32, 4)
			for i := range prefixes {
				for range 100 + rng.IntN(200) {
					prefixes[i] = append(prefixes[i], uint32(rng.IntN(150000)))
				}
			}
			var now time.Duration

			driveCore(t, core, rng, &now, 20, prefixes) // nobody listens yet
			sub, mirror := subscribe(t, ctx, p)
			driveCore(t, core, rng, &now, 20, prefixes)
			core.Reset(now)
			driveCore(t, core, rng, &now, 40, prefixes)

			p.mu.Lock()
			last := p.nextSeq - 1
			p.mu.Unlock()
			receiveUntil(t, sub, mirror, last, 5)

			if mirror.replays == 0 {
				t.Error("no replay happened, so the gap path was not exercised")
			}
			if mirror.removed == 0 {
				t.Error("no BlockRemoved seen: the workload did not evict")
			}
			want := core.CachedBlockHashes()
			if len(want) == 0 {
				t.Fatal("core caches nothing; the workload is too small")
			}
			wantSet := make(map[uint64]bool, len(want))
			for _, h := range want {
				wantSet[h] = true
			}
			if !mapsEqual(mirror.blocks, wantSet) {
				t.Errorf("mirror has %d blocks, core %d; the sets differ", len(mirror.blocks), len(wantSet))
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}
