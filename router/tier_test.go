package router

import (
	"fmt"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/tokenizer"
)

// TestKVCreditsLowerTiers: the kv policy credits blocks held in host RAM or
// on disk after the GPU prefix with Dynamo's host and disk weights.
func TestKVCreditsLowerTiers(t *testing.T) {
	h := chain("q", 8) // 8 blocks, 128 tokens
	tests := []struct {
		name       string
		host, disk float64
		// w0 holds 2 blocks on its GPU; w1 1 on its GPU, 4 more in RAM and
		// 2 more on disk.
		want   [2]float64
		winner WorkerID
	}{
		// w0: prefill (128-2·16)/16 = 6, decode 8. w1: credit 1+0.75·4+0.25·2 = 4.5,
		// prefill (128-72)/16 = 3.5, decode 8.
		{"dynamo defaults", 0, 0, [2]float64{14, 11.5}, 1},
		// credit 1+4+2 = 7: prefill 1.
		{"full credit", 1, 1, [2]float64{14, 9}, 1},
		// credit 1: prefill 7, the GPU-only formula.
		{"no credit", -1, -1, [2]float64{14, 15}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := newTestRouter(t, Config{Policy: PolicyKV, HostCacheHitWeight: tt.host, DiskCacheHitWeight: tt.disk},
				WorkerInfo{Name: "w0"}, WorkerInfo{Name: "w1"})
			r.Index().Store(0, kvtier.GPU, h[:2])
			r.Index().Store(1, kvtier.GPU, h[:1])
			r.Index().Store(1, kvtier.RAM, h[:5]) // a write-through copy: 4 beyond the GPU
			r.Index().Store(1, kvtier.Disk, h[5:7])
			d := route(t, r, &Request{ID: "r", Hashes: h, PromptTokens: 128})
			for i, c := range d.Candidates {
				if c.Cost != tt.want[i] {
					t.Errorf("worker %d: logit %v, want %v", c.WorkerID, c.Cost, tt.want[i])
				}
			}
			if c := d.Candidates[1]; c.CachedBlocks != 1 || c.RAMBlocks != 4 || c.DiskBlocks != 2 {
				t.Errorf("w1 seen as gpu %d ram %d disk %d, want 1, 4, 2", c.CachedBlocks, c.RAMBlocks, c.DiskBlocks)
			}
			if d.WorkerID != tt.winner {
				t.Fatalf("winner %d, want %d", d.WorkerID, tt.winner)
			}
			// Loaded blocks are not prefill work, and they count as
			// predicted hits.
			lower := []int{0, 6}[tt.winner]
			gpu := []int{2, 1}[tt.winner]
			if d.LowerTierBlocks != lower || d.PredictedHitRate != float64(gpu+lower)/8 {
				t.Errorf("lower %d, hit rate %v, want %d and %v", d.LowerTierBlocks, d.PredictedHitRate, lower, float64(gpu+lower)/8)
			}
			if got, want := load(t, r, d.WorkerID).PendingPrefillTokens, 128-16*(gpu+lower); got != want {
				t.Errorf("pending prefill %d, want %d", got, want)
			}
		})
	}
}

// TestHearthPricesRAMBlocksAsLoads: the hearth policy costs blocks in a
// worker's host RAM at their PCIe load time, not their recompute time.
func TestHearthPricesRAMBlocksAsLoads(t *testing.T) {
	const (
		speed      = 4000.0            // prefill tokens/s
		blockBytes = 2621440           // Qwen3-14B, 16 tokens
		pcie       = 25e9              // bytes/s
		load       = blockBytes / pcie // 0.105 ms per block
	)
	h := chain("ctx", 100) // 1600 tokens
	tests := []struct {
		name      string
		loadRate  float64
		wantCost1 float64 // w1: 10 blocks on GPU, 80 more in RAM
		winner    WorkerID
	}{
		// w0: 50 GPU blocks, 800 tokens to compute: 0.2 s. w1: 160
		// tokens to compute (0.04 s) and 80 blocks to load (8.4 ms).
		{"loads are cheap", pcie, 160/speed + 80*load, 1},
		// Without a load rate the RAM blocks are recomputed: 1440 tokens.
		{"unknown load rate", 0, 1440 / speed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc := HearthConfig{DecodeWeight: -1, AffinityBonus: -1, PausedEvictionWeight: -1}
			r, _ := newTestRouter(t, Config{Policy: PolicyHearth, Hearth: hc},
				WorkerInfo{Name: "w0", PrefillTokensPerSec: speed, BlockBytes: blockBytes, LoadBytesPerSec: tt.loadRate},
				WorkerInfo{Name: "w1", PrefillTokensPerSec: speed, BlockBytes: blockBytes, LoadBytesPerSec: tt.loadRate, RAMCapacityBlocks: 1000})
			r.Index().Store(0, kvtier.GPU, h[:50])
			r.Index().Store(1, kvtier.GPU, h[:10])
			r.Index().Store(1, kvtier.RAM, h[:90])
			d := route(t, r, &Request{ID: "r", Hashes: h, PromptTokens: 1600})
			if got, want := d.Candidates[0].Cost, 800/speed; !near(got, want) {
				t.Errorf("w0 cost %v, want %v", got, want)
			}
			if got := d.Candidates[1].Cost; !near(got, tt.wantCost1) {
				t.Errorf("w1 cost %v, want %v", got, tt.wantCost1)
			}
			if d.WorkerID != tt.winner {
				t.Errorf("winner %d, want %d (%+v)", d.WorkerID, tt.winner, d.Candidates)
			}
		})
	}
}

// TestHearthRAMTierCheapensEviction: on a worker whose host RAM keeps a
// copy of what the GPU evicts, pushing paused sessions' context out costs a
// reload, so a full worker with the request's context in RAM stays the
// better choice.
func TestHearthRAMTierCheapensEviction(t *testing.T) {
	const speed, blockBytes = 4000.0, 2621440
	tests := []struct {
		name      string
		ramBlocks int
		winner    WorkerID
	}{
		{"no tier: eviction of paused context weighs", 0, 1},
		{"tier: eviction is a reload", 5000, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc := HearthConfig{DecodeWeight: -1, AffinityBonus: -1, PausedEvictionWeight: 1}
			r, _ := newTestRouter(t, Config{Policy: PolicyHearth, Hearth: hc, QueueSize: -1},
				WorkerInfo{Name: "full", CapacityBlocks: 100, PrefillTokensPerSec: speed, BlockBytes: blockBytes, LoadBytesPerSec: 25e9, RAMCapacityBlocks: tt.ramBlocks},
				WorkerInfo{Name: "empty", CapacityBlocks: 100, PrefillTokensPerSec: speed, BlockBytes: blockBytes, LoadBytesPerSec: 25e9, RAMCapacityBlocks: tt.ramBlocks})
			// Worker 0's cache is full of a paused session's context.
			paused := chain("paused", 100)
			route(t, r, &Request{ID: "p", Hashes: paused, SessionID: "p", Policy: PolicyRoundRobin})
			r.Free("p")
			r.Index().Store(0, kvtier.GPU, paused)
			// The new request shares 20 blocks with worker 0's GPU... and
			// nothing with worker 1.
			q := append(append([]tokenizer.SeqHash(nil), paused[:20]...), chain("new", 60)...)
			d := route(t, r, &Request{ID: "q", Hashes: q, PromptTokens: 16 * 80})
			if d.WorkerID != tt.winner {
				t.Errorf("winner %d, want %d (%+v)", d.WorkerID, tt.winner, d.Candidates)
			}
		})
	}
}

func near(a, b float64) bool {
	d := a - b
	return d < 1e-9 && d > -1e-9
}

// roomTestRouter is a hearth router, room prices alone (RoomWaitWindow
// window), over two 100-block workers of a 4,000 tokens/s GPU with 2.5 MiB
// blocks and a 25 GB/s RAM tier: worker 0, named first, and "room".
func roomTestRouter(t *testing.T, window float64, first string) (*Router, *clock.Fake) {
	t.Helper()
	const speed, blockBytes = 4000.0, 2621440
	hc := HearthConfig{DecodeWeight: -1, AffinityBonus: -1, PausedEvictionWeight: -1, RoomWaitWindow: window}
	info := WorkerInfo{CapacityBlocks: 100, PrefillTokensPerSec: speed, BlockBytes: blockBytes, LoadBytesPerSec: 25e9, RAMCapacityBlocks: 5000}
	w0, w1 := info, info
	w0.Name, w1.Name = first, "room"
	return newTestRouter(t, Config{Policy: PolicyHearth, Hearth: hc, QueueSize: -1}, w0, w1)
}

// TestHearthPricesRoomAtReleaseRate: blocks that do not fit in a full
// worker's KV capacity cost the wait for its running requests to release
// them, at the rate it has been releasing blocks (at most their recompute
// time), not their reload time. A full worker that frees room slowly loses
// to a worker with room; one that frees it fast, or the session's own
// worker, keeps a request whose context it caches.
func TestHearthPricesRoomAtReleaseRate(t *testing.T) {
	type release struct {
		at     time.Duration // after the first
		blocks int
	}
	slow := []release{{0, 10}, {10 * time.Second, 0}}
	tests := []struct {
		name     string
		window   float64
		releases []release // on the full worker
		session  bool      // the session's last turn ran on the full worker
		winner   WorkerID
	}{
		// Worker 0 (60 running blocks, 50 of the request's 80 cached) is 40
		// blocks short: 480 tokens to compute at 3077 tokens/s, 0.16 s, plus
		// the wait. Worker 1 computes 1280 tokens in 0.32 s.
		// 10 blocks in 10 s: 0.77 blocks/s, a 52 s wait, capped at the 40
		// blocks' recompute time, 0.21 s: worker 1.
		{"slow release: the worker with room", 0, slow, false, 1},
		// 210 blocks in 0.5 s: 424 blocks/s, a 0.09 s wait: worker 0.
		{"fast release: the worker holding the context", 0, []release{{0, 10}, {500 * time.Millisecond, 200}}, false, 0},
		// The session's own worker keeps the reload price (4 ms).
		{"slow release, the session's worker: the reload price", 0, slow, true, 0},
		// Before any release the reload price stands: worker 0.
		{"no release seen: the reload price", 0, nil, false, 0},
		// Off: the reload price makes the full worker nearly free.
		{"off: the reload price", -1, slow, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, clk := roomTestRouter(t, tt.window, "full")
			on0 := []WorkerID{1}
			q := chain("ctx", 80)
			session := ""
			if tt.session {
				session = "s"
				route(t, r, &Request{ID: "turn1", Hashes: q[:40], PromptTokens: 16 * 40, SessionID: session, Exclude: on0})
				r.Free("turn1")
			}
			// Worker 0 runs 60 blocks and caches 50 of the new request's 80.
			route(t, r, &Request{ID: "run", Hashes: chain("run", 60), PromptTokens: 16 * 60, Exclude: on0})
			r.PrefillDone("run")
			for i, rel := range tt.releases {
				if i > 0 {
					clk.Advance(rel.at - tt.releases[i-1].at)
				}
				if rel.blocks == 0 {
					continue
				}
				id := fmt.Sprintf("done%d", i)
				route(t, r, &Request{ID: id, Hashes: chain(id, rel.blocks), PromptTokens: 16 * rel.blocks, Exclude: on0})
				r.Free(id)
			}
			r.Index().Store(0, kvtier.GPU, q[:50])
			d := route(t, r, &Request{ID: "q", Hashes: q, PromptTokens: 16 * 80, SessionID: session})
			if d.WorkerID != tt.winner {
				t.Errorf("winner %d, want %d (%+v)", d.WorkerID, tt.winner, d.Candidates)
			}
		})
	}
}

// TestHearthPricesOwnRoomAtExpectedDrain: on the session's own worker,
// blocks that do not fit cost the time the worker's running requests are
// expected to take to end (their expected output at the worker's learned
// decode time per token; one past its expected end as long again as it
// has decoded), not only their reload time. A turn stays where its
// context is when another session's answer there is about to end, and
// moves to a worker with room when that answer has long to go, as a
// compaction's summary has, or has already outrun its estimate; it stays
// when no other worker has room either, where it would wait too.
func TestHearthPricesOwnRoomAtExpectedDrain(t *testing.T) {
	tests := []struct {
		name    string
		learned bool          // an answer with an expected length ended on worker 0
		decoded time.Duration // how long the other session's answer has decoded
		full1   bool          // worker 1 runs 60 blocks: no room there either
		window  float64       // HearthConfig.RoomWaitWindow
		winner  WorkerID
	}{
		// The other answer expects 320 tokens at 20 ms each: 6.4 s.
		// Worker 0 is 60 blocks short and computes 320 tokens (0.11 s);
		// worker 1 has room and computes 1280 (0.32 s).
		{"about to end: the session's worker", true, 6300 * time.Millisecond, false, 0, 0},
		{"just started, 6.4 s to go: the worker with room", true, 0, false, 0, 1},
		{"20 s decoded, past its 6.4 s: the worker with room", true, 20 * time.Second, false, 0, 1},
		// No decode time to go by: the reload price (6 ms) stands.
		{"no decode time learned: the reload price", false, 0, false, 0, 0},
		// Worker 1 would be 40 blocks short too: the reload price stands.
		{"no room elsewhere: the reload price", true, 0, true, 0, 0},
		{"off: the reload price", true, 0, false, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, clk := roomTestRouter(t, tt.window, "own")
			on0 := []WorkerID{1}
			if tt.learned {
				// 100 expected tokens in 2 s: 20 ms a token.
				route(t, r, &Request{ID: "learn", Hashes: chain("learn", 10), PromptTokens: 160, Hints: Hints{OSL: 100}, Exclude: on0})
				r.PrefillDone("learn")
				clk.Advance(2 * time.Second)
				r.Free("learn")
			}
			q := chain("ctx", 80)
			route(t, r, &Request{ID: "turn1", Hashes: q[:60], PromptTokens: 16 * 60, SessionID: "s", Exclude: on0})
			r.Free("turn1")
			r.Index().Store(0, kvtier.GPU, q[:60])
			// Another session's answer holds 80 of worker 0's 100 blocks.
			route(t, r, &Request{ID: "other", Hashes: chain("other", 60), PromptTokens: 16 * 60, SessionID: "o", Hints: Hints{OSL: 320}, Exclude: on0})
			r.PrefillDone("other")
			if tt.full1 {
				route(t, r, &Request{ID: "busy1", Hashes: chain("busy1", 60), PromptTokens: 16 * 60, Exclude: []WorkerID{0}})
				r.PrefillDone("busy1")
			}
			clk.Advance(tt.decoded)
			d := route(t, r, &Request{ID: "turn2", Hashes: q, PromptTokens: 16 * 80, SessionID: "s"})
			if d.WorkerID != tt.winner {
				t.Errorf("winner %d, want %d (%+v)", d.WorkerID, tt.winner, d.Candidates)
			}
		})
	}
}
