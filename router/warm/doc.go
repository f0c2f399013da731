// Package warm learns the prompt prefixes that coding-agent sessions share,
// so that an engine can compute them before the first session after its
// start asks for them, and keeps what it learned across restarts.
//
// A coding agent's first prompt is its system text and tool definitions,
// then the task: two Claude Code sessions in one project share all of a
// 19,839-token first prompt but the last 15 tokens (docs/perf.md, "The
// layout hearth up serves by default"). On an engine that has just
// started, the first session computes that whole prefix, and every session
// that starts with it waits for the computation: the engine's prefix cache
// lets them share it (vLLM caches a block when it schedules it), not skip
// it. On two RTX 4090s in tensor parallel that is 4.2 s, the slowest turn
// of every session that starts on a cold engine.
//
// A Learner is told each session's first prompt (Observe). It keeps the
// last Config.Recent first prompts of each model; a prompt that shares at
// least Config.MinTokens leading tokens, whole blocks, with one of them
// makes that common part a hot prefix of the model, unless a hot prefix
// already covers it. Only what two sessions shared becomes hot, so one
// session's task never is. Hot lists a model's hot prefixes, the most
// recently seen first, for whoever starts an engine to prefill them on it
// before its first request; a prefill is a request like any other, so an
// engine that holds the blocks in a lower tier loads them instead.
//
// Bounds: at most Config.MaxModels models (the least recently observed one
// is forgotten), Config.MaxPrefixes hot prefixes per model (the least
// recently seen goes), Config.MaxTokens tokens per prefix and per
// remembered prompt; memory is at most MaxModels × (Recent + MaxPrefixes) ×
// MaxTokens × 4 bytes (16 MiB with the defaults; a model's
// first prompts of 20k tokens, as Claude Code's, take 0.6 MiB).
//
// MarshalBinary writes the hot prefixes (not the recent prompts) and
// UnmarshalBinary reads them back: the caller stores them (the daemon,
// atomically, under its data directory). The format is "HWRM", a version
// byte, then uvarints: the number of models, and for each its name's length
// and bytes, its number of prefixes, and for each its length and token ids.
// UnmarshalBinary reads outside input: it checks every count against the
// bounds before it allocates and rejects trailing bytes
// (FuzzUnmarshalBinary).
//
// The package does no I/O and starts no goroutines; a Learner is safe for
// concurrent use.
package warm
