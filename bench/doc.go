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
//   - Presets name commonly published setups of it (coding-agent-8k:
//     engines at max_model_len 8192, a 6,000-token prefix, 4-6 steps);
//     with MaxContextTokens a session ends before a turn that would not
//     fit the engines' context, as an agent stops when its context is full.
//   - Client presets (claude-code, codex, opencode) take the shape of the
//     recorded sessions of those clients: the prefix every session of a
//     client shares, the task after it, side requests such as OpenCode's
//     title request. With Compaction a session that would outgrow the
//     context sends a summarisation turn and goes on from the prefix and
//     the summary, as the clients compact, and reports count the
//     compactions beside the errors. Preset.Workload makes one for a
//     given context, for callers other than hearth bench.
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
// by side, WriteSVG charts TTFT, the slowest turn's TTFT and session task
// time across concurrency levels and Progress shows a run on a terminal.
// RunAgentic and RunTrace run a whole Comparison as hearth bench does:
// a plan per seed, its tables and notes, the report files.
//
// Besides each request's latencies a summary measures what an agent feels:
// per finished session its task time (first request sent to the last token
// of its last turn, tool pauses and subagents included) and its slowest
// turn's TTFT. Failed requests are counted by cause (ErrorCauses); a prompt
// that does not fit the engines' context is a context_length error, apart
// from the others, since no routing can help it. Spreads summarises runs of
// the same plan under several seeds: the median of each figure and the
// min-max of its ratio to round_robin, so that a claim is never one seed's
// luck.
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
// fell due, queueing included. Engines never learn the policy. An engine
// refuses a request over its max_model_len by runtime/sim's
// CheckContextLength, the same rule, with vLLM's words, that the simulated
// HTTP engine answers with a 400. With SimConfig.InferHints the simulation
// also does the gateway's prefill in the tool pause (desprefill.go): sent
// straight to the engine that wrote the answer, at background priority,
// cancelled by the session's next turn, and counted apart from the
// requests (RunSummary.ToolPausePrefill). With SimConfig.WarmStart the
// engines start with what a router/warm Learner learned from two sessions
// of an earlier run prefilled, before time zero, as the daemon warms an
// engine it puts into service (deswarm.go).
//
// Live (live.go) sends the workload to an OpenAI-compatible server as
// streaming chat completions in real time, one goroutine per request in
// flight, tool pauses as real waits; with a Hearth gateway it names the
// policy in the x-hearth-policy header and reads the router's prediction
// back from x-hearth-cached-blocks. RunPlan (run.go) runs every policy at
// every concurrency level on the identical workload.
//
// # Models on demand
//
// RunSwap (swap.go) runs agents on two models that do not fit one GPU
// together under three residency policies: Hearth's, package models'
// Manager itself on the simulation's clock; stop/start on every switch,
// first come, first served; and both pinned on a GPU each. The Manager's
// Mover only notes the sleeps, wakes and starts it asks for; the
// simulation holds the model's engine for their catalog.SwapTimesOf
// times, and an Acquire that would wait for protected models ends at
// once (the clock's timer cancels its context) and is tried again on the
// next release and each second, as the Manager's own wait does. An
// evicted engine loses its GPU and host-RAM caches; its blocks in the
// node store stay, so the first turn after it returns loads its prefix
// from there. An admitted request goes through package router's Router,
// each engine its model's one worker with the router's queue off (the
// engines queue), without KV events: with one engine per model there is
// no choice to make. The Manager's Run (keep-alive expiry, preload) is
// not run: a keep-alive acts through the tool pauses it protects.
//
// # Results so far
//
// The policies compared on two and four simulated RTX 4090s under the
// default agentic workload, and on the Mooncake conversation trace, with the
// commands that produce them, are in docs/perf.md.
package bench
