package agentclient

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Served is what a Hearth daemon serves, as its clients must be told.
type Served struct {
	// BaseURL is the API's address without a path
	// ("http://127.0.0.1:8000"); the OpenAI dialect is under /v1.
	BaseURL string
	// Key is the API key the client sends: any value while the API is
	// open, a console-made key once one exists.
	Key string
	// Models are the served model names, the default first; every model
	// tier of a client maps to the default.
	Models []string
	// ContextTokens is the served context (the engines' max_model_len), 0
	// when unknown: then no limit is set and each client keeps its own
	// guess.
	ContextTokens int
	// CAFile is the certificate of the CA that issued the daemon's
	// certificate when it serves HTTPS (hearth up --tls auto), which the
	// client must trust; "" when the client's own roots do.
	CAFile string
}

// Model is the served model every client and every tier of it names.
func (s Served) Model() string {
	if len(s.Models) == 0 {
		return ""
	}
	return s.Models[0]
}

// KeyEnv is the environment variable Codex CLI and OpenCode read the key
// from (and hearth launch, like hearth's other commands, reads it too).
const KeyEnv = "HEARTH_API_KEY"

// OutputTokens is the output cap every client is told for a context of
// contextTokens: a quarter of the context, at most 8192, so that the
// clients leave the same room for history. The gateway lowers a request's
// max_tokens to the room its prompt leaves in any case; the cap is what a
// client keeps free of history when it decides to compact.
func OutputTokens(contextTokens int) int { return min(8192, contextTokens/4) }

// Claude Code's own compaction rule, which CLAUDE_CODE_AUTO_COMPACT_WINDOW
// feeds: it compacts once the conversation passes the window less the
// output it reserves (its output cap, at most claudeCodeSummaryTokens, the
// longest summary it asks for) less claudeCodeCompactBuffer.
const (
	claudeCodeSummaryTokens = 20000
	claudeCodeCompactBuffer = 13000
)

// ClaudeCodeCompactWindow is CLAUDE_CODE_AUTO_COMPACT_WINDOW for a served
// context of contextTokens: the whole context. Hearth keeps none of it
// back, since the gateway lowers max_tokens to what a prompt leaves and
// Claude Code reserves its output and its buffer below the window itself
// (ClaudeCodeCompactThreshold). Claude Code takes the value as the context
// of a model it does not know, instead of 200,000 tokens.
func ClaudeCodeCompactWindow(contextTokens int) int { return contextTokens }

// ClaudeCodeCompactThreshold is the conversation length past which Claude
// Code, given ClaudeCodeCompactWindow and OutputTokens of contextTokens,
// compacts its history; 0 when the context is too short for any.
func ClaudeCodeCompactThreshold(contextTokens int) int {
	window := ClaudeCodeCompactWindow(contextTokens)
	return max(0, window-min(OutputTokens(contextTokens), claudeCodeSummaryTokens)-claudeCodeCompactBuffer)
}

// Var is one environment variable.
type Var struct{ Name, Value string }

// ClaudeCodeEnv is Claude Code's environment for s: the API and key, every
// model tier it asks for mapped to the served model (so that no request
// names a model Hearth does not serve), the context it compacts in and its
// output cap, and no traffic to Anthropic's own services, which a local
// API does not replace.
func ClaudeCodeEnv(s Served) []Var {
	model := s.Model()
	env := []Var{
		{"ANTHROPIC_BASE_URL", s.BaseURL},
		{"ANTHROPIC_AUTH_TOKEN", s.Key},
		{"ANTHROPIC_MODEL", model},
		{"ANTHROPIC_DEFAULT_OPUS_MODEL", model},
		{"ANTHROPIC_DEFAULT_SONNET_MODEL", model},
		{"ANTHROPIC_DEFAULT_HAIKU_MODEL", model},
		// The small/fast model's former name, which older releases read.
		{"ANTHROPIC_SMALL_FAST_MODEL", model},
		{"CLAUDE_CODE_SUBAGENT_MODEL", model},
	}
	if s.ContextTokens > 0 {
		env = append(env,
			Var{"CLAUDE_CODE_AUTO_COMPACT_WINDOW", strconv.Itoa(ClaudeCodeCompactWindow(s.ContextTokens))},
			Var{"CLAUDE_CODE_MAX_OUTPUT_TOKENS", strconv.Itoa(OutputTokens(s.ContextTokens))})
	}
	// Auto-update checks, telemetry, error reports and /bug.
	return append(env, Var{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"})
}

// codexProvider is the name of Hearth's entry in Codex's model_providers.
const codexProvider = "hearth"

// codexSetting is one key of Codex's configuration and its TOML value.
type codexSetting struct{ key, value string }

// codexSettings are Codex's settings for s in the order config.toml holds
// them, the provider's table last: the Responses API (wire_api), which
// Hearth serves with the agent's previous_response_id, and the key from
// KeyEnv.
func codexSettings(s Served) (top, provider []codexSetting) {
	top = []codexSetting{
		{"model", tomlString(s.Model())},
		{"model_provider", tomlString(codexProvider)},
	}
	if s.ContextTokens > 0 {
		// Codex compacts its history before it reaches the window,
		// and keeps the output budget free of history. Neither
		// silences Codex's "Model metadata for `…` not found"
		// warning: that one goes only for a model in its catalog
		// (model_catalog_json, a file of Codex's own model entries).
		top = append(top,
			codexSetting{"model_context_window", strconv.Itoa(s.ContextTokens)},
			codexSetting{"model_max_output_tokens", strconv.Itoa(OutputTokens(s.ContextTokens))})
	}
	provider = []codexSetting{
		{"name", tomlString("Hearth")},
		{"base_url", tomlString(s.BaseURL + "/v1")},
		{"wire_api", tomlString("responses")},
		{"env_key", tomlString(KeyEnv)},
	}
	return top, provider
}

// CodexConfig is the part of ~/.codex/config.toml that points Codex at s.
func CodexConfig(s Served) string {
	top, provider := codexSettings(s)
	var b strings.Builder
	for _, kv := range top {
		b.WriteString(kv.key + " = " + kv.value + "\n")
	}
	b.WriteString("\n[model_providers." + codexProvider + "]\n")
	for _, kv := range provider {
		b.WriteString(kv.key + " = " + kv.value + "\n")
	}
	return b.String()
}

// CodexOverrides are the same settings as Codex's -c key=value arguments,
// which it applies over config.toml for one run, the provider as one
// inline table.
func CodexOverrides(s Served) []string {
	top, provider := codexSettings(s)
	var args []string
	for _, kv := range top {
		args = append(args, "-c", kv.key+"="+kv.value)
	}
	fields := make([]string, len(provider))
	for i, kv := range provider {
		fields[i] = kv.key + " = " + kv.value
	}
	return append(args, "-c", "model_providers."+codexProvider+"={ "+strings.Join(fields, ", ")+" }")
}

// tomlString quotes s as a TOML basic string: JSON's string escapes are
// all TOML's too.
func tomlString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

// OpenCodeConfig is an opencode.json that points OpenCode at s, with apiKey
// as the provider's key ("{env:HEARTH_API_KEY}" in a file a person keeps;
// the key itself for hearth launch's inline configuration, whose
// substitution of {env:…} not every release does).
func OpenCodeConfig(s Served, apiKey string) string {
	type limit struct {
		Context int `json:"context"`
		Output  int `json:"output"`
	}
	type modelEntry struct {
		Name string `json:"name"`
		// Limit makes OpenCode compact its history in time and ask for
		// fewer output tokens than its default 32000.
		Limit *limit `json:"limit,omitempty"`
	}
	type options struct {
		BaseURL string `json:"baseURL"`
		APIKey  string `json:"apiKey"`
	}
	type provider struct {
		NPM     string                `json:"npm"`
		Name    string                `json:"name"`
		Options options               `json:"options"`
		Models  map[string]modelEntry `json:"models"`
	}
	model := modelEntry{Name: s.Model()}
	if s.ContextTokens > 0 {
		model.Limit = &limit{Context: s.ContextTokens, Output: OutputTokens(s.ContextTokens)}
	}
	cfg := struct {
		Schema   string              `json:"$schema"`
		Provider map[string]provider `json:"provider"`
		Model    string              `json:"model"`
	}{
		Schema: "https://opencode.ai/config.json",
		Provider: map[string]provider{"hearth": {
			NPM:     "@ai-sdk/openai-compatible",
			Name:    "Hearth",
			Options: options{BaseURL: s.BaseURL + "/v1", APIKey: apiKey},
			Models:  map[string]modelEntry{s.Model(): model},
		}},
		Model: "hearth/" + s.Model(),
	}
	b, _ := json.MarshalIndent(cfg, "", "  ") // strings and maps of strings always marshal
	return string(b) + "\n"
}

// Client is a coding agent Hearth has settings for.
type Client struct {
	// ID names it on the Connect page and in API key names.
	ID string
	// Command is its executable, and what hearth launch takes.
	Command string
	Title   string
	// Where says where a person puts Settings' Config and Env.
	Where string
	// Install is the command that installs it.
	Install string
}

// Clients are the coding agents, in the order settings are shown.
var Clients = []Client{
	{ID: "claude-code", Command: "claude", Title: "Claude Code",
		Where:   "Environment of the shell that starts claude, or start it with hearth launch claude.",
		Install: "npm install -g @anthropic-ai/claude-code"},
	{ID: "codex", Command: "codex", Title: "Codex CLI",
		Where:   "~/.codex/config.toml, and the key in the environment of the shell that starts codex; or start it with hearth launch codex.",
		Install: "npm install -g @openai/codex"},
	{ID: "opencode", Command: "opencode", Title: "OpenCode",
		Where:   "opencode.json (project) or ~/.config/opencode/opencode.json, and the key in the environment; or start it with hearth launch opencode.",
		Install: "npm install -g opencode-ai"},
}

// ClientByID returns the client with id, or false.
func ClientByID(id string) (Client, bool) {
	for _, c := range Clients {
		if c.ID == id {
			return c, true
		}
	}
	return Client{}, false
}

// ClientByCommand returns the client whose executable is command, or
// false.
func ClientByCommand(command string) (Client, bool) {
	for _, c := range Clients {
		if c.Command == command {
			return c, true
		}
	}
	return Client{}, false
}

// Setting is one client's settings as a person pastes them: Config where
// the client's Where says, Env (when not empty) into the shell that
// starts it.
type Setting struct {
	Client
	Config, Env string
}

// SettingsOf returns client c's settings for s.
func SettingsOf(c Client, s Served) Setting {
	set := Setting{Client: c}
	keyExport := "export " + KeyEnv + "=" + ShellQuote(s.Key) + "\n"
	switch c.ID {
	case "claude-code":
		var b strings.Builder
		for _, v := range ClaudeCodeEnv(s) {
			b.WriteString("export " + v.Name + "=" + ShellQuote(v.Value) + "\n")
		}
		if s.ContextTokens > 0 {
			b.WriteString("# Claude Code compacts its history past " + strconv.Itoa(ClaudeCodeCompactThreshold(s.ContextTokens)) +
				" of these " + strconv.Itoa(s.ContextTokens) + " tokens.\n")
		}
		set.Config = b.String()
	case "codex":
		set.Config, set.Env = CodexConfig(s), keyExport
	case "opencode":
		set.Config, set.Env = OpenCodeConfig(s, "{env:"+KeyEnv+"}"), keyExport
	}
	return set
}

// Settings returns every client's settings for s.
func Settings(s Served) []Setting {
	out := make([]Setting, len(Clients))
	for i, c := range Clients {
		out[i] = SettingsOf(c, s)
	}
	return out
}

// ShellQuote quotes s for a POSIX shell.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
