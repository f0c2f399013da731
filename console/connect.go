package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hearth-llm/hearth/console/components"
)

// The key values client settings carry when no key was just created.
const (
	// OpenKey is the value while the API needs no key: clients must send
	// one, and any value is accepted.
	OpenKey = "hearth"
	// KeyPlaceholder stands for a key once the API requires one: its
	// secret is shown only when it is created.
	KeyPlaceholder = "<your Hearth API key>"
)

// KeyNote is what the terminal and the Connect page say about API keys,
// so that both tell one story.
func KeyNote(keyRequired bool) string {
	if keyRequired {
		return "The API requires a key. Put yours into the settings below; a new one is made on the console's Connect page " +
			"(shown once) or given to the daemon in HEARTH_SERVER_API_KEYS or --api-key."
	}
	return "No API key is set: the API is open, and clients may send any key value (they need one; the settings below say \"" + OpenKey + "\"). " +
		"Creating the first key on the console's Connect page makes the API and the console require a key."
}

// keyEnv is the environment variable Codex CLI and OpenCode read the key from.
const keyEnv = "HEARTH_API_KEY"

// client is a coding agent the Connect page has settings for.
type client struct {
	id, title, where, keyName string
	snippet                   func(t snippetTarget) (config, env string)
}

// snippetTarget is what client settings point at.
type snippetTarget struct {
	baseURL, model, key string
	contextTokens       int // 0: unknown
}

var clients = []client{
	{
		id: "claude-code", title: "Claude Code", keyName: "claude-code",
		where: "Environment of the shell that starts claude (or the env block of ~/.claude/settings.json).",
		snippet: func(t snippetTarget) (string, string) {
			return "export ANTHROPIC_BASE_URL=" + shellQuote(t.baseURL) + "\n" +
				"export ANTHROPIC_AUTH_TOKEN=" + shellQuote(t.key) + "\n", ""
		},
	},
	{
		id: "codex", title: "Codex CLI", keyName: "codex",
		where: "~/.codex/config.toml, and the key in the environment of the shell that starts codex.",
		snippet: func(t snippetTarget) (string, string) {
			window := ""
			if t.contextTokens > 0 {
				// Codex compacts its history before it reaches the window,
				// and keeps the output budget free of history. Neither
				// silences Codex's "Model metadata for `…` not found"
				// warning: that one goes only for a model in its catalog
				// (model_catalog_json, a file of Codex's own model entries).
				window = "model_context_window = " + strconv.Itoa(t.contextTokens) + "\n" +
					"model_max_output_tokens = " + strconv.Itoa(outputTokens(t.contextTokens)) + "\n"
			}
			return "model = " + strconv.Quote(t.model) + "\n" +
					"model_provider = \"hearth\"\n" + window + "\n" +
					"[model_providers.hearth]\n" +
					"name = \"Hearth\"\n" +
					"base_url = " + strconv.Quote(t.baseURL+"/v1") + "\n" +
					"wire_api = \"responses\"\n" +
					"env_key = \"" + keyEnv + "\"\n",
				"export " + keyEnv + "=" + shellQuote(t.key) + "\n"
		},
	},
	{
		id: "opencode", title: "OpenCode", keyName: "opencode",
		where: "opencode.json (project) or ~/.config/opencode/opencode.json, and the key in the environment.",
		snippet: func(t snippetTarget) (string, string) {
			type limit struct {
				Context int `json:"context"`
				Output  int `json:"output"`
			}
			type modelEntry struct {
				Name string `json:"name"`
				// Limit makes OpenCode compact its history in time and
				// ask for fewer output tokens than its default 32000.
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
			cfg := struct {
				Schema   string              `json:"$schema"`
				Provider map[string]provider `json:"provider"`
				Model    string              `json:"model"`
			}{
				Schema: "https://opencode.ai/config.json",
				Provider: map[string]provider{"hearth": {
					NPM:     "@ai-sdk/openai-compatible",
					Name:    "Hearth",
					Options: options{BaseURL: t.baseURL + "/v1", APIKey: "{env:" + keyEnv + "}"},
					Models:  map[string]modelEntry{t.model: {Name: t.model}},
				}},
				Model: "hearth/" + t.model,
			}
			if t.contextTokens > 0 {
				cfg.Provider["hearth"].Models[t.model] = modelEntry{Name: t.model,
					Limit: &limit{Context: t.contextTokens, Output: outputTokens(t.contextTokens)}}
			}
			b, err := json.MarshalIndent(cfg, "", "  ")
			if err != nil {
				// Marshalling strings and maps of strings cannot fail.
				return err.Error(), ""
			}
			return string(b) + "\n", "export " + keyEnv + "=" + shellQuote(t.key) + "\n"
		},
	},
}

// outputTokens is the output budget Codex and OpenCode are told for a
// context of contextTokens, so both agents leave the same room for history.
func outputTokens(contextTokens int) int { return min(8192, contextTokens/4) }

// ClientSettings is what one coding agent needs to use Hearth: Config goes
// where Where says, Env into the shell that starts the client.
type ClientSettings struct {
	Title, Where, Config, Env string
}

// SettingsFor returns every supported client's settings for the API at
// baseURL serving model with key; contextTokens is the model's context
// length, or 0 when unknown. The Connect page shows the same.
func SettingsFor(baseURL, model, key string, contextTokens int) []ClientSettings {
	out := make([]ClientSettings, 0, len(clients))
	for _, c := range clients {
		config, env := c.snippet(snippetTarget{baseURL: baseURL, model: model, key: key, contextTokens: contextTokens})
		out = append(out, ClientSettings{Title: c.title, Where: c.where, Config: config, Env: env})
	}
	return out
}

func clientByID(id string) (client, bool) {
	for _, c := range clients {
		if c.id == id {
			return c, true
		}
	}
	return client{}, false
}

// clientSnippetVM renders one client's settings; secret is a key created
// just now, or "", and keyRequired whether the API needs a key.
func clientSnippetVM(base, baseURL string, cfg Config, c client, secret string, keyRequired bool) components.ClientSnippet {
	key := OpenKey
	switch {
	case secret != "":
		key = secret
	case keyRequired:
		key = KeyPlaceholder
	}
	config, env := c.snippet(snippetTarget{baseURL: baseURL, model: cfg.Model, key: key, contextTokens: cfg.ContextTokens})
	return components.ClientSnippet{
		ID: c.id, Title: c.title, Where: c.where,
		Snippet: config, Env: env,
		KeyName: c.keyName, Secret: secret, Base: base,
	}
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// errAliasSyntax is wrapped by parseAliases's errors.
var errAliasSyntax = errors.New("alias syntax")

// parseAliases reads "name = model" lines. Blank lines and lines starting
// with # are skipped; a name may appear once.
func parseAliases(text string) ([]Alias, error) {
	var out []Alias
	seen := make(map[string]int)
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		from, to, ok := strings.Cut(line, "=")
		from, to = strings.TrimSpace(from), strings.TrimSpace(to)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: line %d: want \"name = model\"", errAliasSyntax, n+1)
		case from == "" || to == "":
			return nil, fmt.Errorf("%w: line %d: name and model must not be empty", errAliasSyntax, n+1)
		case strings.ContainsAny(from, " \t") || strings.ContainsAny(to, " \t"):
			return nil, fmt.Errorf("%w: line %d: names contain no spaces", errAliasSyntax, n+1)
		}
		if prev, dup := seen[from]; dup {
			return nil, fmt.Errorf("%w: line %d: %q already set on line %d", errAliasSyntax, n+1, from, prev)
		}
		seen[from] = n + 1
		out = append(out, Alias{From: from, To: to})
	}
	return out, nil
}

// formatAliases is the inverse of parseAliases.
func formatAliases(aliases []Alias) string {
	var b strings.Builder
	for _, a := range aliases {
		b.WriteString(a.From)
		b.WriteString(" = ")
		b.WriteString(a.To)
		b.WriteByte('\n')
	}
	return b.String()
}
