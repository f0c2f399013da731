package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hearth-llm/hearth/console/components"
)

// keyPlaceholder stands in for a key in settings until one is created.
const keyPlaceholder = "REPLACE_WITH_A_HEARTH_KEY"

// keyEnv is the environment variable Codex CLI and OpenCode read the key from.
const keyEnv = "HEARTH_API_KEY"

// client is a coding agent the Connect page has settings for.
type client struct {
	id, title, where, keyName string
	snippet                   func(baseURL, model, key string) (config, env string)
}

var clients = []client{
	{
		id: "claude-code", title: "Claude Code", keyName: "claude-code",
		where: "Environment of the shell that starts claude (or the env block of ~/.claude/settings.json).",
		snippet: func(baseURL, _, key string) (string, string) {
			return "export ANTHROPIC_BASE_URL=" + shellQuote(baseURL) + "\n" +
				"export ANTHROPIC_AUTH_TOKEN=" + shellQuote(key) + "\n", ""
		},
	},
	{
		id: "codex", title: "Codex CLI", keyName: "codex",
		where: "~/.codex/config.toml, and the key in the environment of the shell that starts codex.",
		snippet: func(baseURL, model, key string) (string, string) {
			return "model = " + strconv.Quote(model) + "\n" +
					"model_provider = \"hearth\"\n\n" +
					"[model_providers.hearth]\n" +
					"name = \"Hearth\"\n" +
					"base_url = " + strconv.Quote(baseURL+"/v1") + "\n" +
					"wire_api = \"responses\"\n" +
					"env_key = \"" + keyEnv + "\"\n",
				"export " + keyEnv + "=" + shellQuote(key) + "\n"
		},
	},
	{
		id: "opencode", title: "OpenCode", keyName: "opencode",
		where: "opencode.json (project) or ~/.config/opencode/opencode.json, and the key in the environment.",
		snippet: func(baseURL, model, key string) (string, string) {
			type modelEntry struct {
				Name string `json:"name"`
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
					Options: options{BaseURL: baseURL + "/v1", APIKey: "{env:" + keyEnv + "}"},
					Models:  map[string]modelEntry{model: {Name: model}},
				}},
				Model: "hearth/" + model,
			}
			b, err := json.MarshalIndent(cfg, "", "  ")
			if err != nil {
				// Marshalling strings and maps of strings cannot fail.
				return err.Error(), ""
			}
			return string(b) + "\n", "export " + keyEnv + "=" + shellQuote(key) + "\n"
		},
	},
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
// just now, or "".
func clientSnippetVM(base, baseURL, model string, c client, secret string) components.ClientSnippet {
	key := keyPlaceholder
	if secret != "" {
		key = secret
	}
	config, env := c.snippet(baseURL, model, key)
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
