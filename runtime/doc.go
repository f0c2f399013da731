// Package runtime owns the life of inference engines: a Launcher starts one
// engine from a Spec and hands back a Handle (ready, exit, stop, endpoints,
// logs), and a Supervisor keeps every engine of the daemon running.
//
// Engine kinds (vLLM, SGLang) are registered descriptors, one file each
// (engine_vllm.go, engine_sglang.go): an EngineKind holds everything that
// differs between engines (command line, environment, liveness path,
// profile probe, metric names, images, memory flag, KV events, file tier,
// parsers); code that treats kinds apart asks it (Lookup, KindOf, Kinds)
// rather than comparing names. Simulated is not a kind:
// Spec.Simulated runs Hearth's simulator playing the spec's kind.
//
// Three runtimes implement Launcher: runtime/sim runs the simulated engine
// in-process, runtime/process runs an engine as a child process (the
// simulated engine as `hearth sim-engine`, or a natively installed vLLM or
// SGLang), and the Docker runtime runs engine containers. The Supervisor does
// not know which it drives.
//
// The Supervisor's contract:
//   - An engine is put into service (Attacher.Attach) only once its HTTP API
//     answers and its profile was measured; it is taken out (the function
//     Attach returned) as soon as it exits, before it is restarted.
//   - A dead engine is restarted with exponential backoff (1 s doubling to
//     60 s), reset once it has run healthy for 10 minutes. An engine that
//     dies before becoming ready five times in a row is marked failed, with
//     its last error and log lines, and is not started again; the other
//     engines and the Supervisor go on.
//   - When the Supervisor's context ends, every engine is stopped: SIGTERM
//     (or the runtime's graceful stop), then a forced stop when the stop
//     timeout passes.
//   - Hold stops an engine (even one KeepEngines would leave running) and
//     keeps it stopped, with the reason as its LastError, until Release
//     starts it again at once with a fresh backoff: a lost GPU. Holding a
//     failed engine records the reason; it stays failed.
//   - A start that does not serve within 5 minutes of its launch is given
//     up on (stopped, and counted as a failed start), unless its log shows
//     a weight download by then: such a start gets 20 minutes.
//   - While an engine loads, its status carries the phase of its start and
//     the phase's progress (Status.Load), read from its log by ParseLoad's
//     rules. When a run ends, Diagnose looks for a known cause in the error
//     and the log (out of GPU memory, a gated or missing model, a driver
//     too old, no NVIDIA runtime in Docker, a port in use, a full disk);
//     Status.Diagnosis holds it and Status.LastError ends with its
//     one-sentence fix.
//   - An engine's log can be followed as it grows (LogsAfter) when its
//     Handle is a LogFollower; the process runtime's is.
//
// Once an engine serves, and before it is put into service, two
// self-checks run: its /tokenize against Hearth's tokenizer
// (CheckTokenizer), then its KV events against the blocks Hearth predicts
// for a probe prompt of its own (CheckKVEvents, over the KVEventTap the
// daemon gives: this package opens no ZMQ socket). Either finding a
// difference puts the engine into service routed on predicted caches
// (ReadyEngine.Tokenizer, ReadyEngine.KVEvents), and says so in its Status.
//
// The profile of an engine (KV capacity, prefill speed, host tier) is
// measured from the engine where it tells (vLLM's vllm:cache_config_info,
// SGLang's /server_info) and otherwise taken from the Spec's estimate.
//
// The package shadows the standard library's name: import it as hruntime
// where both are needed. It makes no routing decision.
package runtime
