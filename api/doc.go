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
// must call nothing back: the gateway calls PrefillDone and Free itself,
// Free exactly once per successful Route.
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
// looked at every Config.ClientCheck. The router is told Free in every case.
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
// Dynamo's nvext object (agent_hints, session_control) is parsed and
// validated here (ParseNvext: an invalid field is a 400 naming it) into the
// router's own Hints and SessionControl, which RouteRequest carries; the
// router never reads client JSON. With nvext.agent_hints.speculative_prefill
// the next turn's prompt (history plus answer) is sent to the same worker
// with max_tokens 1 after the answer, off the request's path.
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
// through the Go relay: a reverse proxy on fiber that passes requests and
// answers through unread, over engine connections it reads as the
// gateway's engine client does. The Go relay is the floor of the stack the
// gateway is built on; what the gateway adds over it is what decoding,
// tokenizing, routing and translating cost. Clients and engines share the
// two cores of the development machine with the proxy:
//
//	go test -run '^$' -bench BenchmarkGatewayOverhead -benchtime 1x ./cmd/hearth/
//
// Three runs, 7,200 probes at one stream and 1,800 at the others; ranges
// are over the runs, and the machine's speed moved by half between them
// (the direct path relayed 107,000 to 164,000 chunks/s):
//
//	open streams (1 probe + background at a 4090's pace)  1          64         256
//	added TTFT p50, ms   Hearth                          0.48-0.68  0.49-0.53  0.47-0.52
//	                     Go relay                        0.39-0.55  0.38-0.48  0.39-0.43
//	                     nginx                           0.29-0.45  0.29-0.37  0.30-0.35
//	added TTFT p99, ms   Hearth                          1.16-1.60  1.69-2.00  4.6-5.3
//	                     Go relay                        0.81-1.44  1.13-2.11  2.6-4.3
//	                     nginx                           0.65-0.88  0.96-1.24  1.9-2.9
//
//	streams back to back                          64          256
//	chunks/s end to end   Hearth                  71-113k     74-112k
//	                      Go relay                75-109k     81-116k
//	                      nginx                   71-124k     76-111k
//	proxy CPU per chunk   Hearth                  5.5-9.4 µs  5.9-9.5 µs
//	                      Go relay                5.0-7.1 µs  4.5-6.7 µs
//	                      nginx                   3.4-8.1 µs  5.2-7.4 µs
//	capacity from that CPU, Hearth                214-361k    211-340k chunks/s
//
//	memory per open stream: Hearth 38.5-39.5 KB of live heap and goroutine
//	stacks, the Go relay 26.8-28.2 KB, nginx 2.5-7.3 KB of resident memory
//
// Against the Go relay the gateway adds 0.06 to 0.13 ms at the median and
// costs 1.1 to 1.4 times its CPU per chunk; against nginx 0.15 to 0.24 ms
// and 1.1 to 1.6 times. Before the gateway sends a one-stream probe to an
// engine it has spent, at the median, 11-13 µs decoding it, 14-18 µs
// rendering and tokenizing its prompt and 8-10 µs routing it (temporary
// timestamps in the gateway, two runs; measured alone, decoding and
// tokenizing take 8 µs: the rest is a cold cache and a shared machine).
// The tail stretches that difference: in one run, up to the 99th
// percentile, the gateway's one-stream distribution was that of a relay
// like the Go relay (in the gateway's process) times 1.07 to 1.16.
//
// Short of the goals:
//   - p99 within 1 ms: not met. At 256 streams nginx (1.9 to 2.9 ms) and
//     the Go relay miss it too, and at one stream the Go relay met it in one
//     run of three. The background's tokens come in bursts (one per stream
//     per decode step), and a probe that lands in a burst waits behind it
//     on two cores shared with the clients and engines.
//   - 100,000 chunks/s: met end to end in two runs of three at 64 streams
//     and one of three at 256 (112,000 to 113,000 in the fastest run), and
//     by the gateway's CPU in every run (211,000 to 361,000 chunks/s if it
//     had the machine). nginx and the Go relay fall short in the slow run
//     as well.
//
// The p99 is noisy from run to run on this machine: the slowest probes of
// every path, direct ones included, come in clusters, when the machine
// stalls.
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
// is busy, which nginx's event loop does not.
//
// Before the savings listed above, the same benchmark gave 0.57-0.63 ms
// added at the one-stream p50 and 1.5-2.0 ms at its p99 (2,400 probes),
// 78-99k chunks/s end to end at 256 streams and 7.4-9.6 µs of CPU per
// chunk, 1.3 to 1.7 times nginx's. An open stream cost the gateway 93 KB
// (then inside the benchmark's process) before it read engines without
// net/http's client, pulled streams from the connection's goroutine and
// decoded chunks without encoding/json.
package api
