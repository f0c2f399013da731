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
// in memory) for the console: each request is a turn of its session or a
// side request beside it (requestKind), and each turn is compared with the
// session's previous turn to tell a lost or changed prefix (evicted, routed
// elsewhere, prompt changed) from one that was served from the cache.
// Gateway.KeyRequired is the API's key rule; Gateway.SetAliases replaces
// the model aliases while the gateway runs.
//
// The router adapter wraps its own sentinel errors so that errors.Is finds
// api.ErrQueueFull (429 with Retry-After) or api.ErrNoWorker (503), and it
// must call nothing back: the gateway calls PrefillDone and Free itself,
// Free exactly once per successful Route.
//
// # Endpoints
//
//	POST /v1/chat/completions   OpenAI chat; engine chunks pass through, renamed (below)
//	POST /v1/completions        OpenAI legacy completions (string or token-id prompt)
//	GET  /v1/models             the served models, with the served context (max_model_len)
//	POST /v1/responses          OpenAI Responses, translated to chat and back
//	POST /v1/messages           Anthropic Messages (also ?beta=true)
//	POST /v1/messages/count_tokens
//	GET  /health, GET /metrics  open even when API keys are set
//
// # Model names
//
// An answer names the model as the client asked for it, whatever it
// resolved to: an Anthropic message's model, a Responses object's model and
// an OpenAI chat or completion's model (each streamed chunk's too, rewritten
// in place where it differs) are the request's model field. Claude Code,
// Codex and the SDKs compare the name with the one they sent, and none of
// them knows the served name. The served model is in the x-hearth-model
// header of every answer to a request whose model resolved.
//
// Every answer carries x-hearth-worker, x-hearth-cached-blocks,
// x-hearth-tier-blocks and x-hearth-prompt-blocks; with API keys
// required, the two cache counts go to admin keys only, since they tell
// block by block whether another client's prompt starts with a guessed
// text (docs/security.md). x-hearth-tier-blocks
// splits the prompt blocks the worker will not compute by where they are:
// "gpu=N,ram=N,ssd=N", its GPU prefix (the x-hearth-cached-blocks count),
// then what it loads from host RAM, then from its node's SSD.
// x-hearth-dropped-tools lists built-in tools
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
// A max_tokens (max_completion_tokens, max_output_tokens) larger than the
// room Config.ContextTokens leaves after the prompt is lowered to that room,
// as agents expect (Claude Code asks for 32000 or 64000 output tokens
// whatever the model), and the answer's x-hearth-max-tokens-capped header
// says "asked->sent". A prompt that alone fills the context is refused at
// once, without reaching an engine. A prompt longer than
// Config.ContextTokens (or one the engine rejects as such) is reported in the words each client acts on by compacting its
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
// Hints the client did not send are inferred (inferHints, unless
// Config.NoInferredHints): a turn gets router.PriorityTurn, a side request
// router.PrioritySide, a speculative prefill router.PriorityBackground; a
// client's hint always stands. Where each hint came from (HintOrigins:
// client or inferred) is on the request's log line ("hints"), in its
// traffic record and in the answer's x-hearth-hints header,
// "priority=-1(inferred),osl=512(client)" (FormatHints). When the engines
// schedule by priority (Config.EnginePriority), the body sent to them
// carries every request's priority in their convention (vLLM's lower
// first, Hearth's negated; SGLang's higher first), except that an inferred
// side request is told a turn's: the engines' queues do not bound waiting,
// the router's does (engineSidePriority).
//
// Without that hint, a turn of a session whose answer ends in tool calls
// has the next turn's prompt prefilled on the same worker during the tool
// pause (speculate.go): rendered with the model's template as the client
// will send the answer back (echoStyle, learnt per session), cut where the
// tool result goes, sent as token ids to /v1/completions with max_tokens 1
// at PriorityBackground, and cancelled when the session's next turn
// arrives first. Config.NoInferredHints turns it off. A session whose first
// user message holds the task of another session's subagent tool call is
// recorded as that session's subagent (subagents.go, SessionRecord.Parent).
//
// # Keeping the hot path cheap
//
// Handling a request: tool lists, which agents resend unchanged every turn,
// are converted once and remembered by their bytes (see memo), and the
// tokenizer writes their part of the prompt once per list; requests are
// decoded with goccy/go-json; each conversation (session id plus the start
// of its prompt) keeps a tokenizer session, so a turn tokenizes only what
// it adds. The fields of a chat request passed on to the engine unread are
// found by a fastjson walk of the body, not a second decode.
//
// Relaying: engines are spoken to from the goroutine that serves the client
// (net/http's Request.Write and ReadResponse over kept connections, no
// client goroutines), chunks are decoded with a reused fastjson parser and
// the Anthropic and Responses deltas are written without reflection.
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
// What this costs, against nginx and a bare Go relay in front of the same
// engines, and the commands that measure it (BenchmarkRequestHandling,
// BenchmarkRelay, and BenchmarkGatewayOverhead in daemon) are in
// docs/perf.md.
package api
