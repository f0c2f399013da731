// Package api is Hearth's HTTP surface: the OpenAI (chat, completions,
// responses) and Anthropic (messages) dialects that coding agents speak.
//
// It turns every client request into one internal request, asks the router
// where to send it, relays the engine's stream back in the client's dialect
// and tells the router when the first token arrived and when the request
// ended. It owns protocol translation and prompt normalisation (dropping the
// volatile parts that would break prefix caching); it must not own routing
// policy, cache state or engine lifecycles.
//
// # Wiring
//
//	gw, err := api.New(api.Config{
//		Addr:    "127.0.0.1:8080",
//		Models:  []string{"Qwen/Qwen3-14B-FP8"},
//		Aliases: map[string]string{"*": "Qwen/Qwen3-14B-FP8"}, // any client name
//		APIKeys: keys,                                         // optional
//		ContextTokens: 32768,                                  // clamp max_tokens
//	}, api.Deps{
//		Router:    routerAdapter,   // implements api.Router
//		Tokenizer: tok,             // *tokenizer.Model
//		Store:     responsesStore,  // *store.SQLite from api/store; optional
//		Registry:  promRegistry,    // served at GET /metrics
//		Logger:    log,
//		Keys:      consoleKeys,     // api.KeyChecker; optional
//		Mount:     console.Register, // more routes on the app; optional
//	})
//	err = gw.Run(ctx) // or gw.Serve(ctx, listener)
//
// Gateway.Traffic keeps the latest requests and agent sessions (bounded,
// in memory) for the console; Gateway.KeyRequired is the API's key rule;
// Gateway.SetAliases replaces the model aliases while the gateway runs.
//
// The router adapter wraps its own sentinel errors so that errors.Is finds
// api.ErrQueueFull (429 with Retry-After) or api.ErrNoWorker (503), and it
// must call nothing back: the gateway calls FirstToken and Done itself,
// Done exactly once per successful Route.
//
// # Endpoints
//
//	POST /v1/chat/completions   OpenAI chat; engine chunks pass through unchanged
//	POST /v1/completions        OpenAI legacy completions (string or token-id prompt)
//	GET  /v1/models             the served models
//	POST /v1/responses          OpenAI Responses, translated to chat and back
//	POST /v1/messages           Anthropic Messages (also ?beta=true)
//	POST /v1/messages/count_tokens
//	GET  /health, GET /metrics  open even when API keys are set
//
// Every answer carries x-hearth-worker, x-hearth-cached-blocks and
// x-hearth-prompt-blocks; x-hearth-dropped-tools lists built-in tools
// (web_search, Anthropic server tools) that were left out because an engine
// cannot run them. A client may override the routing policy with the
// x-hearth-policy header.
//
// # Keeping prompts cacheable
//
// Before templating and hashing, requests are normalised so that two turns
// of one session share every block up to the end of the earlier turn and two
// sessions of one client share the system prompt and tools: cache_control
// markers are not carried, Claude Code's x-anthropic-billing-header system
// line (its cc_version and cch= values vary) is removed, Responses item ids
// are ignored, text-only content part lists become one string, developer
// messages become system messages, tool definitions keep their order and
// their schemas' key order. The messages hashed are exactly the messages the
// engine receives.
//
// # Failure handling
//
// A worker that refuses the connection or answers 5xx before the first byte
// is excluded and the router asked once more. A failure mid-stream ends the
// stream with an error event in the client's dialect. A client that goes
// away cancels the engine request at once: a write to it fails, and while
// there is nothing to write (queued, or a long prefill) its connection is
// looked at every Config.ClientCheck. The router is told Done in every case.
//
// A streamed answer is pulled by the HTTP server from the client
// connection's goroutine: the engine's chunk is read, translated and written
// without a goroutine in between, and written at once unless the next chunk
// is already waiting, in which case they go out together.
//
// A prompt longer than Config.ContextTokens (or one the engine rejects as
// such) is reported in the words each client acts on by compacting its
// conversation: Anthropic's "prompt is too long: N tokens > M maximum",
// OpenAI's context_length_exceeded code, and for a streaming Responses
// request a response.failed event with that code. Errors that cannot succeed
// on a retry carry x-should-retry: false.
//
// With nvext.agent_hints.speculative_prefill the next turn's prompt (history
// plus answer) is sent to the same worker with max_tokens 1 after the answer,
// off the request's path.
//
// # Measured overhead
//
// The gateway against the same simulated engine reached directly and
// through nginx 1.22 as a plain reverse proxy (proxy_buffering off,
// keep-alive upstream), in one run on the 2-core development machine with
// nothing else running:
//
//	go test -run '^$' -bench BenchmarkGatewayOverhead -benchtime 1x ./cmd/hearth/
//
//	streams                         1            64           256
//	added TTFT p50, Hearth / nginx  0.70 / 0.48  16.8 / 10.0  114 / 54 ms
//	added TTFT p99, Hearth / nginx  1.15 / 0.75  18.2 / 12.2  141 / 129 ms
//	CPU per relayed chunk           8.1 / 7.2    10.3 / 5.5   16.2 / 7.4 µs
//	capacity from that CPU          248k / 276k  194k / 361k  123k / 272k chunks/s
//
// Added TTFT is the shift of the proxy's TTFT distribution over the direct
// path's. At 64 and 256 streams the two cores are saturated by client,
// engine and proxy together, so those rows measure queueing more than the
// proxy. An open stream costs the gateway about 97 KB (heap and stacks of
// its goroutines) against nginx's 5.6 KB. The 1 ms p99 goal at one stream
// is missed by 0.15 ms; what costs most is decoding every engine chunk as
// JSON even when it is passed through unchanged, and the 32 KiB read
// buffer per stream.
package api
