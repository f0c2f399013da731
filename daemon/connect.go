package daemon

import (
	"fmt"
	"io"
	"strings"

	"github.com/hearth-llm/hearth/agentclient"
	"github.com/hearth-llm/hearth/console"
)

// printConnectSettings prints where Hearth serves and what a user pastes
// into each coding agent to point it at Hearth (agentclient): the same
// settings the console's Connect page shows.
func printConnectSettings(w io.Writer, baseURL string, models []string, contextTokens int, keyRequired bool) {
	key := console.OpenKey
	if keyRequired {
		key = console.KeyPlaceholder
	}
	fmt.Fprintf(w, "Hearth is serving %[2]s at %[1]s\n"+
		"  Console:        %[1]s/console/ (live GPUs, sessions, routing; API keys on its Connect page)\n"+
		"  OpenAI API:     %[1]s/v1\n"+
		"  Anthropic API:  %[1]s/v1/messages\n"+
		"  Metrics:        %[1]s/metrics\n"+
		"API key: %[3]s\n", baseURL, strings.Join(models, ", "), console.KeyNote(keyRequired))
	served := agentclient.Served{BaseURL: baseURL, Key: key, Models: models, ContextTokens: contextTokens}
	for _, s := range agentclient.Settings(served) {
		fmt.Fprintf(w, "\n%s: %s\n%s", s.Title, s.Where, indent(s.Config))
		if s.Env != "" {
			fmt.Fprint(w, "\n"+indent(s.Env))
		}
	}
	fmt.Fprintln(w, "\nOr start a client with these settings: hearth launch claude|codex|opencode [-- its arguments]")
	fmt.Fprintln(w, "\nPress Ctrl-C to stop.")
}

func indent(text string) string {
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		if l != "" && l != "\n" {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "")
}
