package agentclient

import (
	"slices"
	"strings"
)

// Invocation is how hearth launch starts a client with its settings for
// one run, leaving the user's own configuration files as they are.
type Invocation struct {
	// Args go before the user's own arguments.
	Args []string
	// Env is set in the client's environment, over what the user's has;
	// Unset is removed from it.
	Env   []Var
	Unset []string
}

// InvocationOf is client c's invocation for s: Claude Code reads its
// settings from the environment; Codex takes them as -c overrides, which
// outrank config.toml for that run; OpenCode merges OPENCODE_CONFIG_CONTENT
// over every configuration file it reads.
//
// With Served.CAFile each is also told to trust Hearth's CA, beside its own
// roots: Claude Code and OpenCode run on Node.js or Bun, which add the
// certificates of NODE_EXTRA_CA_CERTS (Claude Code's documentation,
// "Enterprise network configuration", custom CA certificates); Codex
// reads CODEX_CA_CERTIFICATE before SSL_CERT_FILE and adds it to its
// client's roots (openai/codex, codex-rs/codex-client/src/custom_ca.rs).
// SSL_CERT_FILE is not set: it would replace the system roots of every
// OpenSSL program the client runs as a tool.
func InvocationOf(c Client, s Served) Invocation {
	var inv Invocation
	switch c.ID {
	case "claude-code":
		// A key for Anthropic's API would go to Hearth in x-api-key, next
		// to the token, and Claude Code would ask whether to use it.
		inv = Invocation{Env: ClaudeCodeEnv(s), Unset: []string{"ANTHROPIC_API_KEY"}}
	case "codex":
		inv = Invocation{Args: CodexOverrides(s), Env: []Var{{KeyEnv, s.Key}}}
	case "opencode":
		inv = Invocation{Env: []Var{{"OPENCODE_CONFIG_CONTENT", OpenCodeConfig(s, s.Key)}, {KeyEnv, s.Key}}}
	default:
		return inv
	}
	if s.CAFile != "" {
		name := "NODE_EXTRA_CA_CERTS"
		if c.ID == "codex" {
			name = "CODEX_CA_CERTIFICATE"
		}
		inv.Env = append(inv.Env, Var{name, s.CAFile})
	}
	return inv
}

// Environ is environ ("NAME=value" entries) with inv's variables set and
// its Unset ones removed; the order of what stays is kept.
func (inv Invocation) Environ(environ []string) []string {
	drop := slices.Clone(inv.Unset)
	for _, v := range inv.Env {
		drop = append(drop, v.Name)
	}
	out := make([]string, 0, len(environ)+len(inv.Env))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(drop, name) {
			out = append(out, kv)
		}
	}
	for _, v := range inv.Env {
		out = append(out, v.Name+"="+v.Value)
	}
	return out
}
