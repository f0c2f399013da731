// Package bench generates agentic workloads, replays public traces and runs
// routing policies side by side, either live against an OpenAI-compatible
// endpoint or in a deterministic discrete-event simulation in virtual time.
//
// Nothing in the daemon imports it.
//
// # Workloads
//
// A Workload hands out Requests through a Driver:
//
//   - Agentic is closed-loop: coding agents in a ReAct loop, every session
//     starting from one shared prefix (system prompt and tool definitions),
//     each turn's prompt the previous prompt plus the model's answer plus a
//     tool result, the next turn due one tool pause after the answer, with
//     optional subagents that start from the parent's context.
//   - Trace is open-loop: a Mooncake-format trace (ReadTrace), each 512-token
//     hash id expanded into 32 synthetic 16-token blocks, replayed at a
//     chosen speed.
//
// A Driver owns no clock: a runner asks it what is due at the runner's time
// (virtual or real) and reports when each request ended, so the same
// workload drives the simulation and a live run. A runner's loop:
//
//	d := workload.NewDriver()
//	for !d.Finished() {
//		for req := d.Next(now); req != nil; req = d.Next(now) {
//			send(req) // when it ends: d.Complete(req, end, failed)
//		}
//		// wait until d.Wake() (if it reports a time) or a request ends
//	}
//
// All content is drawn from a fixed vocabulary of 256 words that are single
// Qwen3 tokens, so a prompt's token ids (for the simulated engine) and its
// text (for a live server) are the same prompt. Everything is a function of
// the seed: the same config gives the same tokens and lengths on every
// platform, and the same pauses up to the last bit of the math library's
// logarithm, rounded away to whole milliseconds.
//
// # Results
//
// Runners turn what they measured into Results; Summarize (or a Recorder)
// makes the RunSummary of a run, WriteTable and WriteJSON report runs side
// by side, WriteSVG charts TTFT across concurrency levels and Progress shows
// a run on a terminal.
//
// The parts in workload, agentic, trace, stats, report, plot and progress
// do no I/O beyond reading a trace file and writing to the io.Writer they
// are given, start no goroutines and never sleep.
//
// # Runners
//
// Sim (sim.go, des.go) runs a workload on a simulated cluster in virtual
// time: one runtime/sim Core per GPU, the same engine model as hearth
// sim-engine, behind package router's Router. A discrete-event loop jumps
// from event to event (a request falls due, an engine step ends, a KV event
// batch arrives); nothing sleeps, so ten minutes of twenty agents take
// about half a second. Each step's KV events are encoded as vLLM's wire
// payload and handed to the router's Ingester EventLatency after the step
// that made them, so the router decides on a view that lags the engines as
// a real one does. When every worker is saturated the router holds a
// request in its own queue: the simulation hands every request to
// Router.Enqueue, keeps the Ticket of one that was queued, and after each
// call that can dispatch (PrefillDone, Free, Enqueue itself) starts the
// requests whose tickets are done, in the router's dispatch order
// (Ticket.Order), so the queue order a policy uses is the one measured and
// a run stays a function of its seed. TTFT counts from when the request
// fell due, queueing included. Engines never learn the policy.
//
// Live (live.go) sends the workload to an OpenAI-compatible server as
// streaming chat completions in real time, one goroutine per request in
// flight, tool pauses as real waits; with a Hearth gateway it names the
// policy in the x-hearth-policy header and reads the router's prediction
// back from x-hearth-cached-blocks. RunPlan (run.go) runs every policy at
// every concurrency level on the identical workload.
//
// # Measured
//
// hearth bench agentic --sim 2x4090 --sessions 1,20,40 --policies
// round_robin,kv,hearth (Qwen3-14B-FP8, default workload: 6,000-token
// shared prefix, 8 turns, tool pauses log-normal with median 3 s and p90
// 20 s, 10 minutes, seed 0; each engine with the default 32 GiB host-RAM KV
// tier, DefaultKVOffloadingGiB; about 8 s of wall time on the 2-core
// development VM). "hit engine" counts the prompt tokens the engines did
// not compute, GPU hits and host-RAM loads (vLLM's cached_tokens):
//
//	sessions  policy       requests  errors  ttft p50  ttft p90  ttft p99  out tok/s  hit engine  ttft vs rr
//	       1  round_robin        56       0    1102.9    1501.4    2023.1       14.0       74.2%       1.00x
//	       1  kv                 61       0     574.5     829.2    1159.2       15.1       86.8%       0.52x
//	       1  hearth             61       0     574.5     829.2    1159.2       15.1       86.8%       0.52x
//	      20  round_robin       528       0   11254.8   19463.5   25671.4      125.0       78.0%       1.00x
//	      20  kv                535       0   10903.0   16609.4   21389.6      128.6       79.4%       0.97x
//	      20  hearth            575       0    5291.2   18089.6   68197.2      139.5       84.4%       0.47x
//	      40  round_robin       535       0   31026.6   69719.2   83270.0      120.0       69.2%       1.00x
//	      40  kv                547       0   30458.7   70673.2   82590.8      124.1       72.4%       0.98x
//	      40  hearth            595       0    7052.4   90602.2  191940.2      135.5       79.3%       0.23x
//
// At 20 and 40 sessions two 24 GB cards are out of KV memory for running
// turns (about three 12k-token turns each), so requests wait, mostly in the
// router queue (380 to 533 of them; peaks 13 and 36), and TTFT is mostly
// that wait. What cuts hearth's median is the order of that queue: the
// router's queue orders hearth requests by estimated cost with aging (see
// package router), so turns whose context is cached on GPU or in host RAM
// go before those that must recompute theirs. With the queue in arrival
// order hearth measured 9,722 ms (0.86x) and 27,237 ms (0.88x), p99 20.0 s
// and 74.8 s, out 137.6 and 137.2 tokens/s. Shortest-first trades the tail
// for the median: at 40 sessions hearth's p90 is 90.6 s and p99 191.9 s
// against round robin's 69.7 s and 83.3 s, at 20 sessions p99 68.2 s
// against 25.7 s, since requests that must recompute a long context (at 40
// sessions the 32 GiB tiers no longer hold every session's context) wait
// behind cheaper ones for up to their cost difference / QueueAging. Output
// tokens/s stays above round robin's (+12% and +13%); at 40 sessions it is
// 1.2% below hearth's with a FIFO queue. kv and round_robin keep a FIFO
// queue: their rows are the same as when the simulation kept its own FIFO,
// except kv at 40 sessions (29,284 ms then), since dispatches now happen
// inside PrefillDone rather than after a whole engine step's outputs.
//
// Without the tier (--kv-offloading-size 0, measured before the router
// queue was ordered) the runs gave round_robin 20,156 ms, kv 18,617 ms and
// hearth 20,683 ms at 20 sessions and 38,010, 37,054 and 36,630 ms at 40,
// every hit rate about 49-51% (the shared prefix only): each 4090 holds
// 29,856 tokens, a turn's context averages 12,400, so paused sessions'
// contexts were evicted and recomputed. The tier keeps them (32 GiB is
// 13,107 blocks, 210k tokens, per GPU; a 12k-token context loads in about
// 80 ms over PCIe instead of 2.6 s of prefill).
//
// With the memory to run more turns at once, --sim 4x4090 --sessions 20,40:
//
//	sessions  policy       requests  errors  ttft p50  ttft p90  ttft p99  out tok/s  hit engine  ttft vs rr
//	      20  round_robin       744       0    2056.7    8462.3   17327.3      184.9       67.5%       1.00x
//	      20  kv                841       0    1001.6    4260.4    7681.6      208.3       75.6%       0.49x
//	      20  hearth            902       0     691.6    3640.9    7937.8      223.3       85.6%       0.34x
//	      40  round_robin       893       0   13220.1   27084.4   40555.0      214.6       66.2%       1.00x
//	      40  kv                975       0   11194.0   19759.8   25392.5      236.3       71.6%       0.85x
//	      40  hearth           1137       0    5584.9   14813.7   64686.8      278.0       82.9%       0.42x
//
// At 20 sessions almost nothing queues (6 hearth requests), so the rows are
// those of routing alone; at 40 sessions hearth with a FIFO queue measured
// 8,720 ms (0.66x), p99 18.8 s, 271.7 tokens/s.
//
// The Mooncake conversation trace (12,031 requests over 59 minutes, mean
// input 12,035 tokens), hearth bench trace --trace
// mooncake-conversation.jsonl --sim 4x4090 --speed 0.3, 32 GiB tier: every
// policy is overloaded and the tier cannot help, since the RAM of a worker
// turns over many times while a request waits (TTFT p50 1,117 s
// round_robin, 1,093 s kv (0.98x), 850 s hearth (0.76x, its queue ordered
// by cost; p99 1,986 s, 1,262 s and 1,561 s); hit rates 6.8%, 7.6%, 9.3%;
// output 243, 254 and 258 tokens/s; the router queue fills: 1,169, 1,345
// and 1,188 requests refused with ErrQueueFull, and 909, 920 and 921
// prompts exceed the 29,856 tokens a 4090 holds, so no policy runs without
// errors; about 3 minutes of wall time for the three). With the
// simulation's own FIFO it measured 1,117 s, 1,107 s and 1,071 s, and
// before the tier existed 1,121 s, 1,113 s and 1,117 s.
//
// At --speed 0.1 (with the router queue ordered): round_robin 3,546 ms,
// kv 3,032 ms (0.86x), hearth 2,948 ms (0.83x), p90 17.0 s, 7.5 s and
// 7.6 s, p99 39.0 s, 23.7 s and 23.7 s, the 1,030 over-long prompts the
// only errors; 32, 148 and 163 requests queued (peak 9); hit rates 6.7%,
// 7.8% and 8.1% (with the simulation's own FIFO it measured 3,546, 3,025
// and 2,963 ms): the trace's
// conversations share little, and a worker's RAM holds about seventeen of
// its 12k-token prompts.
package bench
