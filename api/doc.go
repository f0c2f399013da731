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
// # Where the time goes
//
// Handling a request: tool lists, which agents resend unchanged every turn,
// are converted once and remembered by their bytes (see memo), and the
// tokenizer writes their part of the prompt once per list; requests are
// decoded with goccy/go-json; each conversation (session id plus the start
// of its prompt) keeps a tokenizer session, so a turn tokenizes only what
// it adds. For an 81 KB request shaped like a Claude Code turn (24 tools
// with 60 KB of schemas, 20 tool calls), decoding, normalising, rendering
// and tokenizing, and building the engine's body:
//
//	go test -run '^$' -bench 'RequestHandling|PromptsAgentTurn' -benchtime 300x ./api/
//	request handling, 81 KB turn          0.45-0.54 ms (2.96-3.01 ms converting and rendering the tools every turn, with encoding/json)
//	render + tokenize + hash, 25k tokens  0.20-0.23 ms with the session, 0.99-1.00 ms without
//
// Relaying: engines are spoken to from the goroutine that serves the client
// (net/http's Request.Write and ReadResponse over kept connections, no
// client goroutines), chunks are decoded with a reused fastjson parser and
// the Anthropic and Responses deltas are written without reflection:
//
//	go test -run '^$' -bench BenchmarkRelay -benchtime 300x ./api/
//	openai 0.53-0.72 µs per chunk, anthropic 0.63-0.71 µs, responses 0.82-0.88 µs, 1.1-1.4 allocations
//
// # Measured overhead
//
// The gateway, in a process of its own as hearth up would run it, against
// the same simulated engines reached directly and through nginx 1.22 as a
// plain reverse proxy (proxy_buffering off, keep-alive upstream); clients
// and engines share the two cores of the development machine with the
// proxy:
//
//	go test -run '^$' -bench BenchmarkGatewayOverhead -benchtime 1x ./cmd/hearth/
//
// Time to first token, two runs (2,400 probes at one stream, 600 at the
// others):
//
//	open streams (1 probe + background at a 4090's pace)  1            64           256
//	added TTFT p50, Hearth (nginx), ms                     0.57-0.63    0.57-0.62    0.56-0.63
//	                                                       (0.30-0.39)  (0.34-0.38)  (0.31-0.33)
//	added TTFT p99, Hearth (nginx), ms                     1.49-1.98    1.50-1.85    5.1-6.4
//	                                                       (0.28-0.97)  (1.11-1.16)  (2.6-3.6)
//
// Relay throughput and memory, four runs (two of them on a quieter machine,
// which gave the higher chunk rates):
//
//	streams back to back                     64                   256
//	chunks/s end to end, Hearth (nginx)      81-93k (76-102k)     78-99k (82-101k)
//	proxy CPU per chunk, Hearth (nginx)      7.7-9.2 (4.9-6.3) µs 7.4-9.6 (5.4-7.1) µs
//	capacity from that CPU, Hearth           217-261k             209-272k chunks/s
//
//	memory per open stream: Hearth 39.4-39.6 KB of live heap and goroutine
//	stacks, nginx 2-7 KB of resident memory
//
// Short of the goals: the added p99 is above 1 ms at every concurrency
// (nginx's is too at 64 and 256 streams: the background's tokens come in
// bursts, one per stream per decode step, and a probe that lands in a
// burst waits behind it on two shared cores), and end-to-end relaying
// stays just under 100,000 chunks/s because the clients and engines take
// most of the machine; by its CPU the gateway would relay 209,000 to
// 272,000. Against nginx the gateway adds about 0.25 ms more at the median
// and costs 1.3 to 1.7 times its CPU per chunk. Timed inside the gateway at
// one stream (temporary instrumentation, two runs): handling the request
// 54-62 µs at the median, the engine's answer header 0.35-0.52 ms (about
// the engine's whole time on the direct path), the first content chunk
// 47-57 µs after it; the rest is the two extra hops, where the Go runtime's
// wake-ups, futex calls and extra reads under its netpoller cost more than
// nginx's event loop. A bare relay on the same stack (fiber, this package's
// engine client, bytes copied through unparsed), tried once in the same
// benchmark, added 0.40-0.50 ms at the median, 0.93 ms at the one-stream
// p99 and 6.3-7.1 µs of CPU per chunk: close to nginx, so about 0.1 ms and
// 2 µs per chunk are what the gateway's own work costs. Part of the tail is
// the router following the fast engine's KV events, which come at the rate
// of its ~900 requests a second (a real GPU's are a few a second): with the
// event subscription left out, in two runs, the one-stream p99 was 1.18-1.24
// ms and the p50 0.50-0.54 ms.
//
// An open stream cost the gateway 93 KB (same benchmark, with the gateway
// then inside the benchmark's process) before it read engines without
// net/http's client, pulled streams from the connection's goroutine and
// decoded chunks without encoding/json.
package api
