// Package router decides which worker serves each request.
//
// It ingests the engines' KV-cache events, keeps an index of which worker
// holds which blocks (and in which tier), tracks the load of active requests
// per worker and scores every candidate with a routing policy. It must not
// talk HTTP to clients or engines; the gateway in package api does that and
// reports back first tokens and completions.
//
// # Decisions
//
// Route scores every live worker with a policy, records the request as
// running on the winner and returns a Decision (candidates with their
// overlap, load and cost, the winner, a constant reason string, predicted
// hit rate = (GPU + lower-tier blocks) / ceil(prompt tokens / block size)); the gateway
// turns it into x-hearth-* headers and the console reads the most recent
// ones from a bounded log (Decisions). The gateway then reports the first
// token (PrefillDone) and the end (Free); requests whose end is never
// reported expire after Config.ActiveTTL, checked lazily on each call, so
// there is no background goroutine. Policies, per daemon (Config.Policy) or
// per request (Request.Policy):
//
//   - round_robin, random (seeded), least_loaded (running + pending blocks);
//   - kv: Dynamo's KV router cost exactly: prefill_blocks = (ISL −
//     credit·block_size + pending prefill tokens) / block_size, credit =
//     GPU overlap + host_weight·RAM blocks + disk_weight·disk blocks,
//     decode_blocks = distinct active prompt blocks + request blocks not
//     already active there, logit = overlap_score_weight·prefill_blocks +
//     decode_blocks; lowest wins, ties to the worker with fewest indexed
//     blocks, then a seeded random pick; temperature T > 0 samples p ∝
//     exp(−(logit / (max−min)) / T). The lower-tier credit is what Dynamo's
//     selector does since it indexes offloaded blocks (its
//     host_cache_hit_weight 0.75 and disk_cache_hit_weight 0.25,
//     Config.HostCacheHitWeight and DiskCacheHitWeight); RAM and disk blocks
//     are tier-exclusive, counted after the GPU prefix where the engine's
//     lookup continues (Index.MatchBeyond). Without lower-tier events the
//     formula is the GPU-only one;
//   - hearth (default): cost in seconds: queued plus uncached prompt tokens
//     at the worker's own prefill speed, slowed by its decode load, plus the
//     PCIe time of loading the blocks its host RAM holds after the GPU
//     prefix (WorkerInfo.BlockBytes / LoadBytesPerSec per block); decode
//     load as a share of KV capacity and the refetch of what would not fit;
//     the refetch of paused agent sessions' context a new prompt would evict
//     from a full cache (refetch: a reload on a worker with a host-RAM tier,
//     which keeps a copy of everything computed, a recompute otherwise); a
//     bonus for a session's last worker unless it is saturated. See
//     scoreHearth. In the small agent-session model of
//     policy_sim_test.go (six sessions, twelve turns, tool pauses, two
//     equal GPUs of 1,900 blocks, 8 seeds) its mean time to first token is
//     1.00 s against kv 1.14 s, round_robin 1.34 s and random 1.53 s.
//
// When every worker is saturated (running blocks ≥ SaturationFraction of
// capacity, or pending prefill ≥ SaturationPendingTokens) Route waits in a
// bounded queue ordered by strict_priority, then priority, then arrival;
// ErrQueueFull when it is full, ctx ends a wait. Workers without KV events
// (WorkerInfo.Approximate) get their routed prompts stored in the index as
// if cached, for Config.ApproxTTL after they were last routed there.
//
// The saturation rule was measured in the benchmark's simulation (2 RTX
// 4090, 32 GiB host-RAM tier each, 20 and 40 agent sessions): with
// SaturationFraction 0.8, 0.95 (default) or 1, or no queue at all, TTFT p50
// of every policy moved by at most 10% either way; the engines were out of
// KV memory for running requests, not waiting on the router, so the rule
// was left as it is.
//
// # Block index
//
// Index is one open-addressing table (linear probing, backward-shift
// deletion) from a block's sequence hash to a 64-bit worker set per tier: 32
// bytes a block, the table kept between 64% and 80% full, plus one CLOCK
// reference bit per slot and, per worker, a list of the hashes it stored
// (8 bytes each, compacted when a fifth is stale) so that ClearWorker costs
// O(its blocks). Match walks a request's hashes intersecting the set of
// workers still matching and stops when it is empty: O(matched blocks), no
// allocation, the caller's result array. Hence at most MaxWorkers (64)
// workers at once; ids are reused.
//
// The index is bounded by Config.MaxIndexEntries (block, worker, tier)
// entries in total, whatever the number of workers. Over the budget it drops
// whole blocks, chosen by CLOCK: blocks no request matched since they were
// stored go first, then those not matched since the hand last passed; drops
// are counted in IndexStats and the hearth_router_index_evicted_blocks gauge.
//
// Memory per (block, worker) entry, measured by BenchmarkIndexMemory as the
// growth of runtime.MemStats.HeapAlloc (after runtime.GC) while building the
// index, divided by its entries (go1.26.8, amd64):
//
//	1M blocks, 16 workers, each block on 1 worker (worst case): 50.4 B
//	1M blocks, 16 workers, each block on 2 workers:            29.7 B
//	1M blocks,  2 workers, each block on 2 workers:            29.2 B
//	1M blocks, 64 workers, each block on 4 workers:            19.3 B
//	1k blocks, 16 workers, each block on 1 worker:             53.4 B
//
// By construction the worst case (each block on one worker, table just
// grown) is 32/0.64 + 0.2 bytes of table plus at most about 12.5 bytes of
// per-worker list (1.25 hashes per block, with append's spare capacity):
// about 63 bytes. A resize briefly holds the old and the new table.
//
// # Measured performance
//
// Measured on a shared 2-core virtual machine (AMD "Turin-like", load
// average 10 to 12 from other builds during the run, so the tails are
// mostly waiting for a CPU) with
//
//	go test -run XXX -bench 'BenchmarkRoute|BenchmarkIndexMatch' -benchtime 5000x -cpu 1 ./router/
//	go test -run XXX -bench 'BenchmarkIndexMemory|BenchmarkIndexClear' -benchtime 1x -cpu 1 ./router/
//
// One Route for an 8,000-token prompt (500 hashes) that one worker holds
// entirely, every worker running four 200-block requests; p50/p99 are Route
// alone, timed per call (wall clock; CPU time of the thread in brackets);
// ns/op is Route plus Free. "hot" repeats one prompt, "cold" cycles through
// all 2,000 stored prompts so the index lookups miss the CPU caches:
//
//	policy  blocks  workers        p50              p99              ns/op   allocs
//	kv      1k      16   hot   6.0 µs ( 7.8)   58.7 µs ( 60.6)   31.4 µs   2
//	kv      100k    16   hot   7.1 µs ( 8.9)   53.3 µs ( 50.6)   29.6 µs   2
//	kv      1M      16   hot  11.1 µs (13.2)   81.4 µs ( 72.4)   28.7 µs   2
//	kv      1M      16   cold 45.3 µs (47.9)  251.9 µs (189.8)  113.2 µs   2
//	kv      1M       2   hot   7.2 µs ( 8.9)   45.9 µs ( 50.5)   30.7 µs   2
//	kv      1M      64   hot  10.1 µs (11.9)   58.6 µs ( 63.1)   37.7 µs   2
//	hearth  1M      16   hot   7.9 µs ( 9.7)   53.8 µs ( 55.0)   33.9 µs   2
//	hearth  1M      16   cold 36.3 µs (38.5)  138.8 µs (137.7)  104.5 µs   2
//	hearth  1M      64   hot  10.4 µs (12.3)   61.0 µs ( 64.0)   33.3 µs   2
//
// The two allocations are the Decision's candidate slice (72 bytes a
// worker) and the running-request record; Index.Match allocates nothing
// (7.6 µs hot, 59.7 µs cold for 500 blocks of 1M). From 1k to 1M blocks a
// hot decision moves little (6 → 11 µs); what grows is the cost of cache
// misses once the table (about 50 MB at 1M blocks) leaves the CPU caches,
// which the cold rows show. From 2 to 64 workers it grows by the per-worker
// scoring and the candidate slice (7 → 10 µs). On this machine the p50 of a
// hot decision meets the 20 µs goal but neither the p99 nor a cold decision
// does; a quiet machine is needed to tell how much of the tail is the
// machine. ClearWorker of 62,500 blocks took 48 ms.
package router
