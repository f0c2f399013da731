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
// it adds. The fields of a chat request passed on to the engine unread are
// found by a fastjson walk of the body, not a second decode. For an 81 KB
// request shaped like a Claude Code turn (24 tools with 60 KB of schemas,
// 20 tool calls), decoding, normalising, rendering and tokenizing, and
// building the engine's body; and decoding an OpenAI chat request of the
// same shape:
//
//	go test -run '^$' -bench 'RequestHandling|PromptsAgentTurn|DecodeChatCompletion' -benchtime 300x ./api/
//	request handling, 81 KB turn          0.45-0.55 ms (2.96-3.01 ms converting and rendering the tools every turn, with encoding/json)
//	render + tokenize + hash, 25k tokens  0.19-0.23 ms with the session, 0.99-1.06 ms without
//	chat request decode, 82 KB            0.21-0.35 ms (the passthrough pass: 28-29 µs, 124-142 µs as a second decode)
//
// Relaying: engines are spoken to from the goroutine that serves the client
// (net/http's Request.Write and ReadResponse over kept connections, no
// client goroutines), chunks are decoded with a reused fastjson parser and
// the Anthropic and Responses deltas are written without reflection:
//
//	go test -run '^$' -bench BenchmarkRelay -benchtime 300x ./api/
//	openai 0.53-0.72 µs per chunk, anthropic 0.63-0.80 µs, responses 0.82-0.98 µs, 1.1-1.4 allocations
//
// What costs a gateway in Go more than nginx is system calls and the
// runtime's thread wake-ups, so the relay saves both: every engine chunk
// already received (in the line reader or read ahead on the engine
// connection) goes to the client in one write, a role-only first chunk waits
// for the token behind it, one ticker watches every waiting client rather
// than a timer per request (each new timer woke the network poller's
// thread), an engine connection back for under a second is reused without
// a peek, and the router reads KV events on its subscriber's goroutine
// rather than through a socket's reader goroutine and channel.
//
// # Measured overhead
//
// The gateway, in a process of its own as hearth up would run it, against
// the same simulated engines reached directly, through nginx 1.22 as a
// plain reverse proxy (proxy_buffering off, keep-alive upstream) and
// through the Go relay: a plain reverse proxy on fiber, with fasthttp's
// client, which passes requests and answers through unread. The Go relay
// is the floor of the stack the gateway is built on; what the gateway adds
// over it is what decoding, tokenizing, routing and translating cost.
// Clients and engines share the two cores of the development machine with
// the proxy:
//
//	go test -run '^$' -bench BenchmarkGatewayOverhead -benchtime 1x ./cmd/hearth/
//
// Three runs, 7,200 probes at one stream and 1,800 at the others; ranges
// are over the runs:
//
//	open streams (1 probe + background at a 4090's pace)  1          64         256
//	added TTFT p50, ms   Hearth                          0.42-0.60  0.50-0.54  0.46-0.57
//	                     Go relay                        0.44-0.59  0.52-0.55  0.50-0.62
//	                     nginx                           0.27-0.35  0.32-0.35  0.33-0.34
//	added TTFT p99, ms   Hearth                          0.86-1.84  1.66-3.65  5.0-6.1
//	                     Go relay                        1.17-1.61  1.90-2.54  4.8-6.3
//	                     nginx                           0.62-0.93  0.90-1.81  2.8-3.3
//
//	streams back to back                          64          256
//	chunks/s end to end   Hearth                  91-95k      86-99k
//	                      Go relay                77-86k      77-84k
//	                      nginx                   91-105k     89-105k
//	proxy CPU per chunk   Hearth                  6.8-7.3 µs  6.7-7.7 µs
//	                      Go relay                8.6-9.7 µs  8.3-9.2 µs
//	                      nginx                   4.9-5.5 µs  5.3-6.7 µs
//	capacity from that CPU, Hearth                276-296k    260-300k chunks/s
//
//	memory per open stream: Hearth 38.9-39.3 KB of live heap and goroutine
//	stacks, the Go relay 29.2-29.4 KB, nginx 5.0-7.0 KB of resident memory
//
// The gateway costs what the Go relay costs: its added time is 0.9 to 1.0
// times the relay's at the median and 0.7 to 1.4 times at the p99, and it
// spends less CPU per chunk (it writes every chunk already received in one
// go; the relay writes each on its own). Against nginx it adds 0.11 to
// 0.25 ms at the median and costs 1.1 to 1.4 times its CPU per chunk.
//
// Short of the goals:
//   - p99 within 1 ms: not met. At one stream the Go relay, doing nothing
//     but relaying, misses it as well: 1.2 to 1.6 ms in these runs (0.76
//     and 1.22 in two earlier runs of the same benchmark, where the gateway
//     had 0.85 and 1.79). nginx stays under 1 ms.
//     At 64 and 256 streams nginx misses it too: the background's tokens
//     come in bursts (one per stream per decode step), and a probe that
//     lands in a burst waits behind it on two shared cores.
//   - 100,000 chunks/s: met by the gateway's CPU (260,000 to 300,000 if it
//     had the machine), not end to end, where the clients and engines take
//     most of the two cores. nginx reaches 105,000 at best.
//
// The p99 is noisy from run to run on this machine: the slowest probes of
// every path, direct ones included, come in clusters, when the machine
// stalls. Up to the 98th percentile the gateway's distribution at one
// stream was nginx's shifted by 0.12 to 0.15 ms (one run).
//
// Where a one-stream probe's time goes, from the gateway's timestamps
// joined with the client's (temporary instrumentation, one run, medians):
// 68 µs until the gateway has read the request, 35 µs to decode and
// tokenize it, 370 µs to route it and have the engine's answer header
// (about what the whole direct path takes), the role chunk 26 µs later and
// the first token about 140 µs after that (vLLM, and so the simulated
// engine, write them one after the other), then 193 µs until the client
// has read it. Counting system calls with strace shows what the extra hops
// cost Go more than nginx: per request the gateway also makes futex calls
// (thread hand-offs), and its runtime's monitor wakes every 20 µs while it
// is busy, which nginx's event loop does not. Measured alone (a temporary
// benchmark), a probe's decoding, template, tokens, block hashes and engine
// body take 9 µs.
//
// Before the savings listed above, the same benchmark gave 0.57-0.63 ms
// added at the one-stream p50 and 1.5-2.0 ms at its p99 (2,400 probes),
// 78-99k chunks/s end to end at 256 streams and 7.4-9.6 µs of CPU per
// chunk, 1.3 to 1.7 times nginx's. An open stream cost the gateway 93 KB
// (then inside the benchmark's process) before it read engines without
// net/http's client, pulled streams from the connection's goroutine and
// decoded chunks without encoding/json.
package api
