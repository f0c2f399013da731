package console

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSettingsForTellsClientsTheContext: with a known context length the
// Codex settings set model_context_window and model_max_output_tokens and
// OpenCode's model gets limits,
// so both compact their history before the engine refuses it.
func TestSettingsForTellsClientsTheContext(t *testing.T) {
	for _, ctx := range []int{0, 29856} {
		settings := SettingsFor("http://127.0.0.1:8000", "qwen3-14b-fp8", "sk-test", ctx)
		if len(settings) != 3 {
			t.Fatalf("%d clients, want Claude Code, Codex CLI and OpenCode", len(settings))
		}
		byTitle := map[string]ClientSettings{}
		for _, s := range settings {
			byTitle[s.Title] = s
		}
		if c := byTitle["Claude Code"].Config; !strings.Contains(c, "ANTHROPIC_BASE_URL='http://127.0.0.1:8000'") && !strings.Contains(c, "ANTHROPIC_BASE_URL=http://127.0.0.1:8000") {
			t.Errorf("Claude Code settings lack the base URL:\n%s", c)
		}
		codex := byTitle["Codex CLI"].Config
		for _, line := range []string{`model = "qwen3-14b-fp8"`, `base_url = "http://127.0.0.1:8000/v1"`, `wire_api = "responses"`} {
			if !strings.Contains(codex, line+"\n") {
				t.Errorf("Codex settings lack %s:\n%s", line, codex)
			}
		}
		for _, line := range []string{"model_context_window = 29856\n", "model_max_output_tokens = 7464\n"} {
			if strings.Contains(codex, line) != (ctx > 0) {
				t.Errorf("context %d: Codex settings and %q:\n%s", ctx, line, codex)
			}
			// Model metadata belongs to the top level, before any table.
			key := line[:strings.Index(line, " ")]
			if i, j := strings.Index(codex, key), strings.Index(codex, "[model_providers"); i > j {
				t.Errorf("%s inside the provider table:\n%s", key, codex)
			}
		}
		var opencode struct {
			Provider map[string]struct {
				Models map[string]struct {
					Limit *struct{ Context, Output int }
				}
			}
		}
		if err := json.Unmarshal([]byte(byTitle["OpenCode"].Config), &opencode); err != nil {
			t.Fatalf("OpenCode settings are not JSON: %v", err)
		}
		limit := opencode.Provider["hearth"].Models["qwen3-14b-fp8"].Limit
		switch {
		case ctx == 0 && limit != nil:
			t.Errorf("unknown context, yet OpenCode limit %+v", *limit)
		case ctx > 0 && (limit == nil || limit.Context != ctx || limit.Output <= 0 || limit.Output >= ctx):
			t.Errorf("OpenCode limit %+v, want context %d and a smaller output", limit, ctx)
		}
	}
}
