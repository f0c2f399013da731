package main

import (
	"fmt"
	"io"
)

// printConnectSettings prints what a user pastes into each coding agent to
// point it at Hearth.
func printConnectSettings(w io.Writer, baseURL, model string, keyRequired bool) {
	token, keyNote := "hearth", "any value works: no API key is configured"
	if keyRequired {
		token, keyNote = "<your Hearth API key>", "use one of the keys given with --api-key"
	}
	fmt.Fprintf(w, `Hearth is serving %[2]s at %[1]s
  OpenAI API:     %[1]s/v1
  Anthropic API:  %[1]s/v1/messages
  Metrics:        %[1]s/metrics

Claude Code:
  export ANTHROPIC_BASE_URL=%[1]s
  export ANTHROPIC_AUTH_TOKEN=%[3]s   # %[4]s

Codex CLI (~/.codex/config.toml), then: export HEARTH_API_KEY=%[3]s
  model = "%[2]s"
  model_provider = "hearth"

  [model_providers.hearth]
  name = "Hearth"
  base_url = "%[1]s/v1"
  wire_api = "responses"
  env_key = "HEARTH_API_KEY"

OpenCode (opencode.json):
  {
    "$schema": "https://opencode.ai/config.json",
    "model": "hearth/%[2]s",
    "provider": {
      "hearth": {
        "npm": "@ai-sdk/openai-compatible",
        "name": "Hearth",
        "options": { "baseURL": "%[1]s/v1", "apiKey": "%[3]s" },
        "models": { "%[2]s": { "name": "%[2]s on Hearth" } }
      }
    }
  }

Press Ctrl-C to stop.
`, baseURL, model, token, keyNote)
}
