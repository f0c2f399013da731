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
// log-normal with median 3 s and p90 20 s, 10 minutes, seed 0; about 3 s
// of wall time on the 2-core development VM):
//
//	sessions  policy       requests  errors  ttft p50  ttft p90  out tok/s  hit engine  ttft vs rr
//	       1  round_robin        56       0    1102.9    1501.4       14.0       74.2%       1.00x
//	       1  kv                 61       0     574.5     829.2       15.1       86.8%       0.52x
//	       1  hearth             61       0     574.5     829.2       15.1       86.8%       0.52x
//	      20  round_robin       373       0   20155.5   35108.4       89.2       49.0%       1.00x
//	      20  kv                379       0   18616.5   34203.8       92.1       49.3%       0.92x
//	      20  hearth            376       0   20683.3   30867.4       91.4       49.3%       1.03x
//	      40  round_robin       419       0   38009.9   94248.6       99.5       50.9%       1.00x
//	      40  kv                417       0   37053.5   96892.8       99.7       50.9%       0.97x
//	      40  hearth            420       0   36630.2   94760.6      100.9       51.0%       0.96x
//
// At 20 and 40 sessions two 24 GB cards are out of KV memory, not out of
// routing choices: each holds 29,856 tokens, a running turn needs its whole
// context (12,400 tokens on average, 6,000 of them shared), so a card has
// room for about three running turns, the router's saturation check holds the
// rest (about 300 requests waited) and every policy's hit rate falls to the
// shared prefix (49%). TTFT is queueing. With the memory to keep contexts,
// the policies separate: --sim 4x4090 at 20 sessions gives round_robin
// 3,552 ms, kv 1,860 ms (0.52x), hearth 1,640 ms (0.46x) with 20% more
// output tokens/s; --sim 2xh100 at 40 sessions gives 135, 122 (0.90x) and
// 93 ms (0.69x); --sim 2x4090 at 8 sessions 1,516, 905 (0.60x) and 671 ms
// (0.44x).
//
// The Mooncake conversation trace (12,031 requests over 59 minutes, mean
// input 12,035 tokens), hearth bench trace --trace
// mooncake-conversation.jsonl --sim 4x4090: at --speed 0.3 every policy is
// overloaded (TTFT p50 1,121 s round_robin, 1,113 s kv, 1,117 s hearth;
// the router queue fills, 1,300 to 1,461 requests are refused with
// ErrQueueFull and 890 to 914 exceed the 29,856 tokens a 4090 holds). At
// --speed 0.1: round_robin 3,565 ms, kv 3,146 ms (0.88x), hearth 3,072 ms
// (0.86x), p90 17.1 s, 7.6 s and 7.7 s, the 1,030 over-long prompts the
// only errors; the engine hit rate is 6% for all, as a 4090 caches two or
// three such prompts.
package bench
