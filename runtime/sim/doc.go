// Package sim is a simulated vLLM or SGLang engine: a paged KV cache with
// prefix caching, a continuous-batching scheduler and a timing model of a
// named GPU and model, behind the engine's HTTP API, Prometheus metrics and
// ZMQ KV-event stream.
//
// The Core holds all engine state and advances one scheduler step at a time
// in virtual time, so the same code serves a real-time server (Runner, scaled
// by a speed-up) and the benchmark's discrete-event simulation of many
// engines in one process. The engine model must not know which routing policy
// sends it requests.
//
// # Engine model
//
//   - cache.go: vLLM V1's block pool. Full blocks are identified by a chained
//     FNV-1a hash of (parent hash, token ids) seeded by Config.Seed (SGLang
//     flavour: SGLang's page hashes, see flavor.go), the engine's own opaque
//     ids in KV events; reference counts for shared prefixes; an LRU free queue that
//     keeps freed blocks' KV until they are reused; a request's blocks are
//     freed deepest first. Blocks filled by generated tokens are cached too.
//   - scheduler.go: vLLM V1's scheduler. One token budget per step
//     (max_num_batched_tokens, default 8192), running requests first, then
//     waiting ones (fcfs or priority) while budget, max_num_seqs and blocks
//     last; chunked prefill; recompute preemption.
//   - offload.go: vLLM's native KV offloading to host RAM
//     (--kv-offloading-size GiB, Config.CPUOffloadGiB; off by default): an
//     LRU pool of blocks keyed by the engine's block hash, filled
//     write-through as blocks are computed (as vLLM's OffloadingConnector
//     stores after every step, not on GPU eviction); a waiting request's
//     prefix match continues there after the GPU hits, and those blocks are
//     loaded into new GPU blocks instead of recomputed, the step paying
//     blocks × block bytes / catalog.GPU.PCIeGBps (vLLM loads asynchronously;
//     charging the step delays the whole batch, a conservative
//     simplification). CPU-tier events carry medium "CPU", one BlockStored
//     per store without tokens or parent and with block_size 0, one
//     BlockRemoved per eviction batch, and name the blocks by their hashes
//     as bytes (32 bytes whose low 64 bits are the GPU events' int), as
//     vLLM v0.20's connector publishes them. Loaded tokens count in TokenOutput.CachedTokens (vLLM's
//     num_cached_tokens) and in vllm:external_prefix_cache_{queries,hits}
//     (exported when the tier is on), not in the GPU prefix-cache counters.
//   - timing: each step is priced by the catalog's roofline
//     (catalog.RooflineOf: max(FLOPs at an effective fraction of the
//     tensor-core peak, bytes at an effective fraction of DRAM bandwidth)
//     plus a fixed step cost) and its loads by the board's host link and the
//     store's disk (catalog.GPU.HostLoadSeconds, DiskLoadSeconds); the KV
//     cache is sized from GPU memory as vLLM or SGLang does
//     (catalog.EngineConfig.Sized, through Config.Perf). The simulator owns
//     the scheduler and the cache, never a second copy of the figures.
//
// # Calibration and speed
//
// timing_test.go holds an RTX 4090 serving Qwen3-14B-FP8 to published
// figures for that pair (cold and cached time to first token, decode rate
// for one and for 32 streams; the KV cache size is catalog's test), and
// the catalog's profile of every engine to what the engine measures; the targets are listed in
// docs/ARCHITECTURE.md and what the model gives, with the simulation's
// speed in request-steps per second, in docs/perf.md. Step does not
// allocate once its buffers have grown (TestStepDoesNotAllocate); Add
// allocates the request's state.
//
// # Flavours
//
// Config.Kind picks the engine kind the simulator plays (flavor.go);
// the engine model is the same, what the outside sees differs:
//
//   - runtime.KindVLLM (default): block hashes as above, BlockStored per run of
//     new blocks in vLLM's map event form (or InstanceOptions.Format),
//     vllm:* metrics, /health 200 while the engine loop runs.
//   - runtime.KindSGLang: SGLang's radix-cache page hashes (SHA-256 over the
//     previous page's 32-byte digest and the page's tokens as u32
//     little-endian; the id is the digest's first 8 bytes big-endian, an
//     int64 in the events; no seed), one BlockStored per page in
//     kvevents.FormatSGLang; SGLang's metric names (sglang:num_running_reqs,
//     num_queue_reqs, token_usage, cache_hit_rate from Stats at scrape time;
//     prompt_tokens_total, generation_tokens_total,
//     cached_tokens_total{cache_source="device"|"host"},
//     time_to_first_token_seconds, counted per finished request as SGLang's
//     tokenizer manager counts them); /health 503 until the warm-up request
//     has run, then 200; /health_generate, a one-token generation through the
//     engine (503 when the engine loop is gone or the token does not come
//     within HealthCheckTimeout, default 20s); /server_info (SGLang's
//     server_args field names plus max_total_num_tokens = KV capacity in
//     tokens, internal_states, version; /get_server_info, its deprecated
//     alias, answers the same and logs SGLang's warning) and
//     /get_model_info; /v1/models owned_by "sglang". The OpenAI API is the
//     same as vLLM's.
//
// # Start-up (instance.go, startup.go, console.go)
//
// Instance.Run plays the engine's start-up over InstanceOptions.StartupDelay
// (0: at once), printing to InstanceOptions.Console the lines the real
// engine prints, in its format (vLLM: "(APIServer pid=N) INFO MM-DD
// hh:mm:ss [file.py:line] ..." and its EngineCore; SGLang: "[YYYY-MM-DD
// hh:mm:ss TP0] ..."): weight download progress with percentages, shard
// loading, "Loading weights took" / "Load weight end", the KV cache size
// ("GPU KV cache size: N tokens" / "KV Cache is allocated. #tokens: N"),
// CUDA graph capture, then vLLM's "Starting vLLM API server 0 on http://…"
// and uvicorn's "Application startup complete.", or SGLang's uvicorn lines,
// its warm-up request and "The server is fired up and ready to roll!". A
// vLLM instance with a fixed port binds it only after that, so the port
// refuses connections while the engine loads; an SGLang instance binds at
// once and answers 503 meanwhile. InstanceOptions.Failure makes the
// start-up fail (FailureOOM: PyTorch's CUDA out-of-memory error while
// loading the weights; FailureExit: an error after loading them): the
// engine's error lines are printed and Run returns an error wrapping
// ErrStartupFailed. A cancelled start-up returns nil. On a clean stop the
// API server's shutdown lines are printed.
//
// # Network side
//
//   - server.go, httpapi.go: vLLM's OpenAI API subset over net/http
//     (/v1/chat/completions and /v1/completions, streamed as SSE or not,
//     /v1/models, /health, /tokenize, /detokenize) in front of an Engine (the
//     Runner). Errors use vLLM's body {"error": {message, type, param,
//     code}}; a client that disconnects aborts its request, freeing its
//     blocks. The HTTP layer must not import fiber (reserved for api/ and
//     console/).
//   - answer.go: what the model "says", chosen from a seed and the prompt:
//     prose, a <think> block when chat_template_kwargs enable thinking, and
//     hermes-style <tool_call>s returned as OpenAI tool_calls. The text is
//     tokenized, cut at max_tokens and handed to the core as Request.Output.
//   - agent.go: the model plays a coding agent (AgentOptions, from
//     Config.Agent). Each offered tool is judged by the words of its name:
//     read-only (read, list, glob, grep...), writing (write, edit, patch,
//     shell, exec, task, agent...; unknown words such as web or image win
//     over writing ones, writing over read-only) or unknown. Over one task
//     (from the user's message, counting the assistant turns with tool
//     calls since; a user note right after a tool result does not start a
//     new one) it makes a seeded 3-6 calls, one per turn, of read-only
//     tools whose required arguments it can fill from the conversation: the
//     working directory the client states, paths in user messages and tool
//     results, words of the task for searches; a tool with a required
//     argument it cannot fill is not called, and calls not yet made are
//     preferred. Then, or when no call is possible, or when a turn asks for
//     text only (as Claude Code's compaction does), it answers briefly
//     that it is a simulated model. Writing tools (a new notes file, look-
//     only shell commands) are called only with AllowWriteTools; not even
//     tool_choice naming one makes it call one without.
//   - metrics.go: vLLM's (or SGLang's) Prometheus names on a registry of their own;
//     latency histograms in modelled time (wall time times the speed-up);
//     the queue time is the core's own, from Add to first scheduling.
//   - kvpub.go: the Publisher, an EventSink that sends each step's events on
//     a ZMQ PUB socket in vLLM's wire format (map- or array-form events, or
//     SGLang's; "tcp://*:port" binds every interface) and
//     answers replay requests on a ROUTER socket from a bounded ring buffer.
//     It never blocks the engine loop: batches are numbered and kept for
//     replay when published, and a full send queue only costs subscribers a
//     replay.
package sim
