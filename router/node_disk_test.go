package router

import (
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/tokenizer"
)

// diskCounts returns how many disk blocks the index holds per worker, for
// the first n workers, and checks that the per-worker counts of every tier
// add up to the index's entries.
func diskCounts(t *testing.T, ix *Index, n int) []int {
	t.Helper()
	total := 0
	var out [MaxWorkers]int
	for tier := kvtier.Tier(0); tier < kvtier.Count; tier++ {
		ix.BlockCounts(tier, &out)
		for _, c := range out {
			total += c
		}
	}
	if st := ix.Stats(); st.Entries != total {
		t.Errorf("index holds %d entries, per-worker counts add up to %d", st.Entries, total)
	}
	ix.BlockCounts(kvtier.Disk, &out)
	return append([]int(nil), out[:n]...)
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestNodeDiskShared: a disk block one worker stores is held by every
// worker of its node serving its model, including one that joins later; a
// disk removal by any of them clears it for all; other nodes and other
// models never see it; a worker that leaves takes nothing from the others.
func TestNodeDiskShared(t *testing.T) {
	r, _ := newTestRouter(t, Config{},
		WorkerInfo{Name: "a", Node: "n1", Model: "m"},
		WorkerInfo{Name: "b", Node: "n1", Model: "m"},
		WorkerInfo{Name: "c", Node: "n2", Model: "m"},
		WorkerInfo{Name: "d", Node: "n1", Model: "other"},
		WorkerInfo{Name: "e", Model: "m"}, // no node: a disk of its own
	)
	ix := r.Index()
	h := chain("disk", 10)
	ix.Store(0, kvtier.GPU, h[:2])
	ix.Store(0, kvtier.Disk, h[:6])
	ix.Store(4, kvtier.Disk, h[:1])
	if got, want := diskCounts(t, ix, 5), []int{6, 6, 0, 0, 1}; !equalInts(got, want) {
		t.Fatalf("disk blocks per worker %v, want %v", got, want)
	}
	// Storing again from the other worker of the node adds nothing.
	ix.Store(1, kvtier.Disk, h[:6])
	if st := ix.Stats(); st.Entries != 2+6+6+1 {
		t.Errorf("entries %d after storing the node's blocks again, want 15", st.Entries)
	}

	// A worker joining the node later sees what its disk holds.
	late, err := r.AddWorker(WorkerInfo{Name: "f", Node: "n1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := diskCounts(t, ix, 6), []int{6, 6, 0, 0, 1, 6}; !equalInts(got, want) {
		t.Fatalf("after a join: disk blocks per worker %v, want %v", got, want)
	}
	var from, out [MaxWorkers]int
	ix.MatchBeyond(h, kvtier.Disk, &from, &out)
	if out[late] != 6 || out[2] != 0 {
		t.Errorf("disk match: late joiner %d, other node %d; want 6, 0", out[late], out[2])
	}

	// A removal by the late joiner clears the blocks for the whole node.
	ix.Remove(late, kvtier.Disk, h[4:6])
	if got, want := diskCounts(t, ix, 6), []int{4, 4, 0, 0, 1, 4}; !equalInts(got, want) {
		t.Fatalf("after a removal: disk blocks per worker %v, want %v", got, want)
	}

	// The worker that wrote the blocks leaves: the node keeps them.
	r.RemoveWorker(0)
	if got, want := diskCounts(t, ix, 6), []int{0, 4, 0, 0, 1, 4}; !equalInts(got, want) {
		t.Fatalf("after the writer left: disk blocks per worker %v, want %v", got, want)
	}

	// A worker whose view is reset (engine restart) keeps the node's disk.
	ix.Store(1, kvtier.GPU, h[:3])
	ix.ClearWorker(1)
	var gpu [MaxWorkers]int
	ix.BlockCounts(kvtier.GPU, &gpu)
	if got := diskCounts(t, ix, 6); got[1] != 4 || gpu[1] != 0 {
		t.Errorf("after a view reset: worker 1 holds %d disk and %d GPU blocks, want 4 and 0", got[1], gpu[1])
	}

	// The late joiner leaves and comes back on another node, under the
	// lowest free id (the writer's): it holds none of the old node's disk
	// and none of what the id's previous holder had.
	r.RemoveWorker(late)
	moved, err := r.AddWorker(WorkerInfo{Name: "f", Node: "n2", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := diskCounts(t, ix, 6), []int{0, 4, 0, 0, 1, 0}; moved != 0 || !equalInts(got, want) {
		t.Fatalf("after a move: id %d, disk blocks per worker %v; want id 0, %v", moved, got, want)
	}
	// ... and shares the new node's from then on.
	ix.Store(2, kvtier.Disk, h[:2])
	if got, want := diskCounts(t, ix, 6), []int{2, 4, 2, 0, 1, 0}; !equalInts(got, want) {
		t.Fatalf("after a store on the new node: disk blocks per worker %v, want %v", got, want)
	}

	// The last workers leave: nothing is left behind.
	for _, id := range []WorkerID{1, 2, 3, 4, moved} {
		r.RemoveWorker(id)
	}
	if st := ix.Stats(); st.Entries != 0 || st.Blocks != 0 {
		t.Errorf("empty router's index holds %d entries, %d blocks", st.Entries, st.Blocks)
	}
}

// TestNodeDiskEviction: the index budget evicts a node's disk block for
// every worker of the node at once, and the counts stay right.
func TestNodeDiskEviction(t *testing.T) {
	r, err := New(Config{MaxIndexEntries: 12})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		if _, err := r.AddWorker(WorkerInfo{Name: name, Node: "n1"}); err != nil {
			t.Fatal(err)
		}
	}
	ix := r.Index()
	ix.Store(0, kvtier.Disk, chain("x", 6)) // 18 entries: over budget
	st := ix.Stats()
	if st.Entries > 12 || st.Entries%3 != 0 {
		t.Fatalf("entries %d after eviction, want at most 12 and whole blocks", st.Entries)
	}
	got := diskCounts(t, ix, 3)
	if got[0] != st.Entries/3 || got[1] != got[0] || got[2] != got[0] {
		t.Errorf("disk blocks per worker %v, want %d each", got, st.Entries/3)
	}
}

// diskPricingRouter has three idle workers: a and b on node n1, c on n2.
// a wrote a 64-block prefix to n1's disk. Requests exclude a, so the
// choice is between b (the prefix on its node's disk) and c (nothing).
func diskPricingRouter(t *testing.T, diskBW float64, m *Metrics) (*Router, []tokenizer.SeqHash) {
	t.Helper()
	w := func(name, node string) WorkerInfo {
		return WorkerInfo{Name: name, Node: node, PrefillTokensPerSec: 5000,
			BlockBytes: 2 << 20, LoadBytesPerSec: 25e9, DiskLoadBytesPerSec: diskBW}
	}
	var opts []Option
	if m != nil {
		opts = append(opts, WithMetrics(m))
	}
	r, err := New(Config{Policy: PolicyHearth, QueueSize: -1}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range []WorkerInfo{w("a", "n1"), w("b", "n1"), w("c", "n2")} {
		if _, err := r.AddWorker(info); err != nil {
			t.Fatal(err)
		}
	}
	h := chain("prefix", 64)
	r.Index().Store(0, kvtier.Disk, h)
	return r, h
}

// TestHearthPricesNodeDisk: the hearth policy prices a disk block at its
// SSD read plus its PCIe copy, picks the node-disk holder when that beats
// recomputing the prompt, the idle worker elsewhere when the disk is slow,
// and treats disk blocks as uncached when the worker's disk bandwidth is
// unknown. A worker on another node never sees n1's disk.
func TestHearthPricesNodeDisk(t *testing.T) {
	const bb = 2 << 20
	recompute := 1024.0 / 5000 // 64 blocks of 16 tokens at 5000 tokens/s
	tests := []struct {
		name     string
		diskBW   float64
		wantCost float64 // worker b's
		winner   WorkerID
	}{
		// 64 × (2 MiB / 5 GB/s + 2 MiB / 25 GB/s) = 32 ms < 205 ms.
		{"fast disk", 5e9, 64 * (bb/5e9 + bb/25e9), 1},
		// 64 × (2 MiB / 100 MB/s + ...) = 1.35 s > 205 ms.
		{"slow disk", 100e6, 64 * (bb/100e6 + bb/25e9), 2},
		// Unknown bandwidth: a recompute, a tie broken at random.
		{"unknown bandwidth", 0, recompute, 255},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, h := diskPricingRouter(t, tt.diskBW, nil)
			d := route(t, r, &Request{ID: "r", Hashes: h, PromptTokens: 1024, Exclude: []WorkerID{0}})
			if len(d.Candidates) != 2 {
				t.Fatalf("%d candidates, want b and c", len(d.Candidates))
			}
			b, c := d.Candidates[0], d.Candidates[1]
			if b.DiskBlocks != 64 || c.DiskBlocks != 0 || c.CachedBlocks != 0 || c.RAMBlocks != 0 {
				t.Errorf("b sees %d disk blocks, c sees %d/%d/%d; want 64 and none", b.DiskBlocks, c.CachedBlocks, c.RAMBlocks, c.DiskBlocks)
			}
			if math.Abs(b.Cost-tt.wantCost) > 1e-12 || math.Abs(c.Cost-recompute) > 1e-12 {
				t.Errorf("costs b %v, c %v; want %v, %v", b.Cost, c.Cost, tt.wantCost, recompute)
			}
			if tt.winner != 255 && d.WorkerID != tt.winner {
				t.Errorf("winner %d (%s), want %d", d.WorkerID, d.Reason, tt.winner)
			}
			wantDisk := 0
			if d.WorkerID == 1 {
				wantDisk = 64
			}
			if d.DiskBlocks != wantDisk || d.RAMBlocks != 0 || d.LowerTierBlocks != wantDisk {
				t.Errorf("decision tiers ram %d disk %d lower %d, want disk %d", d.RAMBlocks, d.DiskBlocks, d.LowerTierBlocks, wantDisk)
			}
		})
	}
}

// TestQueueCostPricesNodeDisk: a queued hearth request's own cost counts
// disk blocks at their load time where that is known.
func TestQueueCostPricesNodeDisk(t *testing.T) {
	const bb = 2 << 20
	for _, tt := range []struct {
		name   string
		diskBW float64
		want   float64
	}{
		{"fast disk", 5e9, 64 * (bb/5e9 + bb/25e9)},
		{"slow disk", 100e6, 1024.0 / 5000}, // c's recompute is the least
		{"unknown bandwidth", 0, 1024.0 / 5000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, h := diskPricingRouter(t, tt.diskBW, nil)
			hearth := r.policies[PolicyHearth]
			w := &waiter{req: &Request{ID: "q", Hashes: h, Exclude: []WorkerID{0}}, hashes: h, isl: 1024, policy: hearth}
			r.mu.Lock()
			got := hearth.Policy.(*hearthPolicy).queueCost(r.queueInputLocked(w))
			r.mu.Unlock()
			if math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("queue cost %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRoutedBlocksMetric: each decision adds the winner's blocks per tier.
func TestRoutedBlocksMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	r, h := diskPricingRouter(t, 5e9, m)
	r.Index().Store(1, kvtier.GPU, h[:10])
	r.Index().Store(1, kvtier.RAM, h[10:14])
	d := route(t, r, &Request{ID: "r1", Hashes: h, PromptTokens: 1024, Exclude: []WorkerID{0}})
	if d.WorkerID != 1 || d.CachedBlocks != 10 || d.RAMBlocks != 4 || d.DiskBlocks != 50 {
		t.Fatalf("decision on %d with gpu %d ram %d disk %d, want 1 with 10, 4, 50", d.WorkerID, d.CachedBlocks, d.RAMBlocks, d.DiskBlocks)
	}
	route(t, r, &Request{ID: "r2", Hashes: h[:12], PromptTokens: 192, Exclude: []WorkerID{0}})
	want := `
# HELP hearth_router_routed_blocks_total Prompt blocks the chosen worker was predicted to hold, by tier: its GPU prefix (gpu), then host RAM (ram), then disk (ssd).
# TYPE hearth_router_routed_blocks_total counter
hearth_router_routed_blocks_total{tier="gpu"} 20
hearth_router_routed_blocks_total{tier="ram"} 6
hearth_router_routed_blocks_total{tier="ssd"} 50
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hearth_router_routed_blocks_total"); err != nil {
		t.Error(err)
	}
}
