// Package agentclient says what each coding agent Hearth serves (Claude
// Code, Codex CLI, OpenCode) must be told to use it: where the API is, the
// key, which served model answers each of the client's model tiers, and
// the served context and output limits, so that the client compacts its
// history before a request would not fit instead of running into
// context-length errors. hearth up prints these settings, the console's
// Connect page shows them and hearth launch starts a client with them:
// the three read them here, from one Served value.
//
// Contract: everything here is a pure function of Served. Settings
// renders each client's settings as a person pastes them (shell exports, a
// config file); Invocation is how hearth launch starts a client with the
// same settings without touching the user's own configuration: Claude
// Code through its environment, Codex through -c overrides on its command
// line, OpenCode through OPENCODE_CONFIG_CONTENT. The limits are the
// served context (the engines' max_model_len) and OutputTokens; Claude
// Code's compaction window is ClaudeCodeCompactWindow.
//
// Sources, read at these versions:
//   - Claude Code's environment variables and model tiers:
//     code.claude.com/docs/en/env-vars and /docs/en/model-config
//     (ANTHROPIC_DEFAULT_{OPUS,SONNET,HAIKU}_MODEL, ANTHROPIC_SMALL_FAST_MODEL
//     deprecated for the Haiku one, CLAUDE_CODE_SUBAGENT_MODEL,
//     CLAUDE_CODE_AUTO_COMPACT_WINDOW, CLAUDE_CODE_MAX_OUTPUT_TOKENS,
//     CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC).
//   - Codex's -c key=value overrides: openai/codex
//     codex-rs/common/src/config_override.rs at 2567d2f (a dotted key, a
//     TOML value, applied over config.toml for that run only).
//   - OpenCode's inline configuration: anomalyco/opencode
//     packages/opencode/src/flag/flag.ts at 01a6ccf and config.ts
//     (OPENCODE_CONFIG_CONTENT, merged over every configuration file).
//
// This package imports no other Hearth package.
package agentclient
