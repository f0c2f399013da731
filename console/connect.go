package console

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hearth-llm/hearth/agentclient"
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

// clientByID returns the coding agent the Connect page names id.
func clientByID(id string) (agentclient.Client, bool) { return agentclient.ClientByID(id) }

// clientSnippetVM renders one client's settings (agentclient, as hearth up
// prints them); secret is a key created just now, or "", and keyRequired
// whether the API needs a key.
func clientSnippetVM(base, baseURL string, cfg Config, c agentclient.Client, secret string, keyRequired bool) components.ClientSnippet {
	key := OpenKey
	switch {
	case secret != "":
		key = secret
	case keyRequired:
		key = KeyPlaceholder
	}
	s := agentclient.SettingsOf(c, agentclient.Served{BaseURL: baseURL, Key: key, Models: []string{cfg.Model}, ContextTokens: cfg.ContextTokens})
	return components.ClientSnippet{
		ID: c.ID, Title: c.Title, Where: c.Where,
		Snippet: s.Config, Env: s.Env,
		KeyName: c.ID, Secret: secret, Base: base,
	}
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
