// Package router decides which worker serves each request.
//
// It keeps an index of which worker holds which blocks (and in which tier),
// tracks the load of active requests per worker and scores every candidate
// with a routing policy. It must not talk HTTP to clients or engines; the
// gateway in package api does that and reports back first tokens and
// completions. Nor does it read the engines' KV-cache events: package
// router/ingest does, and writes them into the Index (Router.Index), which
// is safe for concurrent use. router must not import router/ingest; what it
// needs of an ingester (RemoveNodeBlocks, NodeBlockPriority) is the
// EngineBlockMap interface.
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
// there is no background goroutine.
//
// A drained worker (SetDrained: its node's owner took the GPU back) is no
// candidate for new requests while another worker of the model is not
// drained; it keeps its index and running requests (drain.go).
//
// # Policies
//
// A policy is a Policy registered by name (RegisterPolicy), one file each
// (policy_*.go), so that adding one is a file and its test. It says what
// it needs of the router in PolicyNeeds: the prompt's blocks in the lower
// tiers (a policy that does not ask sees none), and its own order of the
// router queue (without one its requests wait in arrival order). A router
// makes its own instance of each when it is made; Config.Policy picks the
// daemon's and Request.Policy may name another for one request.
// PolicyNames lists them for help texts and the console. The policies:
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
//     prefix (WorkerInfo.BlockBytes / LoadBytesPerSec per block) and the
//     SSD read plus PCIe time of the blocks its node's disk holds after GPU
//     and RAM (BlockBytes / DiskLoadBytesPerSec + BlockBytes /
//     LoadBytesPerSec per block; a recompute when either is unknown); decode
//     load as a share of KV capacity; the wait for room of the blocks that
//     would not fit, at the rate the worker's running requests have been
//     releasing blocks (an exponentially weighted average over the request
//     ends the router saw, HearthConfig.RoomWaitWindow, default 20 s),
//     between their refetch and recompute time, and at their refetch time
//     on the session's own worker, where its context is;
//     the refetch of paused agent sessions' context a new prompt would evict
//     from a full cache (refetch: a reload on a worker with a host-RAM tier,
//     which keeps a copy of everything computed, a recompute otherwise); a
//     bonus for a session's last worker unless it is saturated. See
//     hearthPolicy.Score. TestHearthAtLeastMatchesKVOnAgentSessions holds its
//     mean time to first token at or below kv's in a small agent-session
//     model (policy_sim_test.go).
//
// # Queue
//
// When every worker is saturated (running blocks ≥ SaturationFraction of
// capacity, or pending prefill ≥ SaturationPendingTokens) a request waits in
// a bounded queue; ErrQueueFull when it is full. Enqueue is the queue's one
// entry: it decides at once or returns a Ticket, whose Done closes when the
// router dispatches it. Dispatching happens synchronously inside the call
// that freed a worker (PrefillDone, Free, worker changes, lazy expiry), so a
// single-threaded caller, such as the benchmark's simulation in virtual
// time, sees each dispatch when that call returns; Ticket.Cancel takes a
// request back out. Route is Enqueue plus a wait on the ticket or ctx.
// Workers without KV events (WorkerInfo.Approximate) get their routed
// prompts stored in the index as if cached, for Config.ApproxTTL after they
// were last routed there.
//
// The queue orders by strict_priority, then by a deadline less the
// request's priority × Config.PriorityWait (default 2 s), earliest first:
// a side request (priority -1) goes after turns that arrive up to 2 s after
// it and before any later, so that its priority rises with its wait and a
// stream of turns never starves it (a negative PriorityWait makes priority
// strict). The deadline (PolicyNeeds.QueueDelay) is, for the hearth policy,
// the request's arrival plus
// HearthConfig.QueueStretch (default 5) times its own cost in seconds, for
// every other policy its arrival, FIFO as Dynamo's queue is. The own cost
// is, on the worker where it is least, the request's uncached prompt at
// that worker's prefill speed, the RAM load time of what host RAM holds,
// and its share of the worker's KV capacity (DecodeWeight × its blocks /
// capacity): a session's next turn whose context is still cached (GPU or
// RAM) costs 0.1 to 0.5 s, one that must recompute 12k tokens about 3 s.
// What the workers are doing when it arrives is left out: it is the same
// for every waiter and changes before any of them runs. The deadline is
// fixed at arrival, so the queue stays a heap, and it bounds overtaking: a
// request goes after a later one only if that one arrived within
// QueueStretch × its own cost (15 s for a 12k-token recompute).
//
// Why: shortest-job-first with a fixed aging rate (the order until
// 2026-12-01: estimated cost including the workers' load minus 0.02 × the
// seconds waited) halved the median TTFT under load by starving the turns
// that must recompute (p99 up to 1.8x round robin's on two 4090s at 20
// sessions and 2.8x at 40, seeds 1 to 5). With sessions that each wait for
// their turn before sending the next, the mean wait is fixed by throughput,
// so a lower median bought with unbounded overtaking is paid in the tail. Measured over seeds 1 to 5,
// stretch 5 holds p90 and p99 below round robin's and kv's on two 4090s at
// 20 and 40 sessions and on four at 40 and 80, with p50 0.67-0.85x round
// robin's at 20 sessions on two; larger stretches lower the median and
// break p99, smaller ones and FIFO lose the median. On a 4090 with a 3090
// and subagents no setting beat both at once: its tail is the start-up
// burst of subagents in a run bound by KV capacity, and round robin's low
// median is its starvation of the 3090. Pricing a block that does not fit
// at the wait for KV room (decode time / capacity) instead of its reload
// time lost hearth's lead on equal 4090s and did not help there.
// docs/perf-history.md ("Queue order") has the frontier and what each
// setting costs.
//
// The defaults (QueueStretch 5, DecodeWeight 1, SaturationFraction 0.95)
// were chosen by measuring the alternatives in the benchmark's simulation;
// the figures are in docs/perf.md.
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
// Memory per (block, worker) entry is bounded by construction: the worst
// case (each block on one worker, table just grown) is 32/0.64 + 0.2 bytes
// of table plus at most about 12.5 bytes of per-worker list (1.25 hashes
// per block, with append's spare capacity): about 63 bytes. A resize
// briefly holds the old and the new table.
//
// A node's disk tier is shared: workers with the same WorkerInfo.Node and
// Model read one directory per machine. The index keeps per worker the set
// of its node peers and applies a disk Store or Remove by any of them to
// all of them, so their disk sets stay equal and matching needs no
// expansion; a worker joining the node copies a peer's disk blocks (once,
// O(the peer's blocks)), one leaving or losing its view takes only its own
// entries. Each peer's entry counts against the budget. The node's store
// reports evictions by engine hash through Router.RemoveNodeBlocks, which
// maps them through the attached ingesters' tables (AttachIngester,
// EngineBlockMap).
//
// The store also asks, as it evicts, which priority of request covered a
// block (NodeBlockPriority, by engine hash, mapped the same way): with
// Config.BlockPriorities > 0 the router notes in a bounded direct-mapped
// record the highest Hints.Priority of the routed prompts that covered
// each block, most recent first, so that blocks only side requests
// covered can go before a turn's (kvbm's Store.WeighPriorities says how).
// Prefills the gateway sends in a tool pause are not routed and are not
// noted: their own blocks read as unknown until a turn covers them.
//
// # Performance
//
// Route plus Free allocates at most twice (the Decision's candidate slice
// and the running-request record) and Index.Match never; tests hold both
// (and router/ingest's that applying a KV-event batch never allocates once
// its buffers have grown).
// Decision latency, index memory per entry and ingest rate, with the
// commands that measure them, are in docs/perf.md.
package router
