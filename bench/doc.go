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
// a real one does. When every worker is saturated the router would hold a
// request in its queue: the simulation calls Route with a cancelled context
// (Route then returns at once instead of waiting), keeps the request in a
// FIFO of its own and retries whenever a request reaches its first token or
// ends, the moments the router's queue dispatches. TTFT counts from when
// the request fell due, queueing included. Engines never learn the policy.
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
// hearth bench agentic --sim 2x4090 --sessions 1,20,40 (Qwen3-14B-FP8,
// default workload: 6,000-token shared prefix, 8 turns, tool pauses
// log-normal with median 3 s and p90 20 s, 10 minutes, seed 0; each engine
// with the default 32 GiB host-RAM KV tier, DefaultKVOffloadingGiB; about
// 4 s of wall time on the 2-core development VM). "hit engine" counts the
// prompt tokens the engines did not compute, GPU hits and host-RAM loads
// (vLLM's cached_tokens):
//
//	sessions  policy       requests  errors  ttft p50  ttft p90  out tok/s  hit engine  ttft vs rr
//	       1  round_robin        56       0    1102.9    1501.4       14.0       74.2%       1.00x
//	       1  kv                 61       0     574.5     829.2       15.1       86.8%       0.52x
//	       1  hearth             61       0     574.5     829.2       15.1       86.8%       0.52x
//	      20  round_robin       528       0   11254.8   19463.5      125.0       78.0%       1.00x
//	      20  kv                535       0   10903.0   16609.4      128.6       79.4%       0.97x
//	      20  hearth            566       0    9722.2   15399.0      137.6       84.2%       0.86x
//	      40  round_robin       535       0   31026.6   69719.2      120.0       69.2%       1.00x
//	      40  kv                549       0   29284.4   67163.0      125.8       72.7%       0.94x
//	      40  hearth            597       0   27237.1   55253.2      137.2       81.2%       0.88x
//
// Without the tier (--kv-offloading-size 0) the same runs gave round_robin
// 20,156 ms, kv 18,617 ms and hearth 20,683 ms at 20 sessions and 38,010,
// 37,054 and 36,630 ms at 40, every hit rate about 49-51% (the shared
// prefix only): each 4090 holds 29,856 tokens, a turn's context averages
// 12,400, so paused sessions' contexts were evicted and recomputed. The tier
// keeps them (32 GiB is 13,107 blocks, 210k tokens, per GPU; a 12k-token
// context loads in about 80 ms over PCIe instead of 2.6 s of prefill), which
// nearly halves every policy's TTFT p50 at 20 sessions and lifts round robin
// too: with two workers a session's context is on whichever it was sent to, so even
// round robin finds most of it in RAM (78% against an 87% ceiling that
// perfect affinity reaches with unlimited GPU memory). hearth, which prices
// RAM blocks at their load time and evictions at a reload, keeps sessions
// where their context is (84%) and gets 10-14% more output tokens/s, but
// only 0.86x and 0.88x of round robin's TTFT p50: at 20 and 40 sessions two
// 24 GB cards are out of KV memory for running turns (about three 12k-token
// turns each; the engines were busy 98-100% of the time with about three
// requests in a batch), so TTFT is waiting for memory, which no choice of
// worker removes. The router queue is not the cause: with
// SaturationFraction 0.8 or 1, or no router queue, TTFT p50 moved by 10% at
// most for every policy.
//
// With the memory to run more turns at once the policies separate: --sim
// 4x4090 --sessions 1,20,40 gives round_robin 2,057 ms, kv 1,002 ms (0.49x)
// and hearth 705 ms (0.34x) at 20 sessions, with 13% and 20% more output
// tokens/s (208 and 222 against 185), and 13,220, 11,194 (0.85x) and 8,348
// ms (0.63x) at 40 sessions (215, 236 and 275 output tokens/s); no errors.
//
// The Mooncake conversation trace (12,031 requests over 59 minutes, mean
// input 12,035 tokens), hearth bench trace --trace
// mooncake-conversation.jsonl --sim 4x4090 --speed 0.3, 32 GiB tier: every
// policy is overloaded and the tier cannot help, since the RAM of a worker
// turns over many times while a request waits (TTFT p50 1,117 s
// round_robin, 1,107 s kv (0.99x), 1,071 s hearth (0.96x); hit rates 6.8%,
// 7.5%, 8.0%; output 243, 253 and 255 tokens/s; the router queue fills:
// 1,169, 1,383 and 1,346 requests refused with ErrQueueFull, and 909, 904
// and 922 prompts exceed the 29,856 tokens a 4090 holds, so no policy runs
// without errors). Before the tier existed the same command measured
// 1,121 s, 1,113 s and 1,117 s.
//
// At --speed 0.1: round_robin 3,546 ms, kv 3,025 ms (0.85x), hearth
// 2,963 ms (0.84x), p90 17.0 s, 7.5 s and 7.7 s, the 1,030 over-long
// prompts the only errors; hit rates 6.7%, 7.8% and 7.9%: the trace's
// conversations share little, and a worker's RAM holds about seventeen of
// its 12k-token prompts.
package bench
