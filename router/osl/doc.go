// Package osl learns how many output tokens a request will produce when the
// client does not say (nvext.agent_hints.osl), from the answers of earlier
// requests.
//
// # Contract
//
// A Call is what is visible of a request before its answer: its client,
// its session, whether it is a side request (a title, a quota probe, a
// compaction the client names apart) and, for a turn of the conversation,
// whether its prompt ends with a tool result and the name of that tool.
// Predict returns an Estimate: the expected output tokens (0 when nothing
// has been learned yet), the kind of answer expected and where the figure
// came from. Observe learns from a finished request: the same Call, the
// kind its answer turned out to be (ToolCall when it called a tool, Final
// otherwise, Side for side requests) and its output tokens as the engine
// counted them. Both are safe for concurrent use and never block on
// anything but the estimator's own mutex.
//
// # Model
//
// Lengths are kept as exponentially weighted means of log(tokens)
// (Config.Alpha, default 0.3), so that one long answer moves the estimate
// by a factor, not by its size, at three levels per kind of answer: the
// session, the client (by Call.Client), and all requests. A session's
// estimate of a kind is shrunk towards its client's (or, without one, the
// global) estimate: log = (n·session + prior) / (n + 1), n the session's
// answers of that kind, so its first answer counts half and later ones
// more. A kind nothing was learned of yet falls back to what is known of
// the other kinds of turns at the same level, then to the next level.
//
// The kind of a turn is predicted from what precedes its answer: per
// client and context (the prompt ends with a user message, or with the
// result of tool X), counts of the answers that called a tool and those
// that did not, halved when they pass 64 so that they follow a change;
// Final when final answers outnumber tool calls there, else ToolCall.
// Side requests are their own kind and never mixed with turns.
//
// # Bounds
//
// Memory is bounded: at most Config.MaxSessions sessions (default 4096),
// the least recently used evicted first, and sessions idle for
// Config.IdleTTL (default one hour, on the injected clock) dropped when the
// estimator is next used; at most Config.MaxClients clients (default 64,
// further ones pooled under one entry) and Config.MaxContexts contexts
// per client (default 256, further tool names pooled). A session costs
// about 200 bytes plus its id.
//
// # Error
//
// The estimator does not measure itself: its callers compare an Estimate
// with the answer (bench reports p50 and p90 of |predicted − actual| /
// actual, the console the same over its window), apart for the estimates
// made after a session's first WarmTurns turns.
package osl
