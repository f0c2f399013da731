package api

import (
	"testing"

	"github.com/goccy/go-json"
)

func TestRequestKind(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape requestShape
		want  RequestKind
	}{
		{"Claude Code turn", requestShape{Client: "claude-code", MaxTokens: 64000, HasTools: true}, KindTurn},
		{"Claude Code topic request to its small model", requestShape{Client: "claude-code", MaxTokens: 512}, KindSide},
		{"Claude Code quota probe", requestShape{Client: "claude-code", MaxTokens: 1}, KindSide},
		{"a probe with tools is still a probe", requestShape{Client: "claude-code", MaxTokens: 1, HasTools: true}, KindSide},
		{"OpenCode turn", requestShape{Client: "opencode", MaxTokens: 32000, HasTools: true}, KindTurn},
		{"OpenCode title request", requestShape{Client: "opencode", MaxTokens: 32000}, KindSide},
		{"Codex turn", requestShape{Client: "codex", HasTools: true, CodexKind: "turn"}, KindTurn},
		{"Codex turn without metadata", requestShape{Client: "codex", HasTools: true}, KindTurn},
		{"Codex compaction", requestShape{Client: "codex", HasTools: true, CodexKind: "compact"}, KindSide},
		{"another client without tools sends turns", requestShape{Client: "curl", MaxTokens: 100}, KindTurn},
		{"another client's probe", requestShape{Client: "curl", MaxTokens: 1}, KindSide},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := requestKind(tc.shape); got != tc.want {
				t.Fatalf("requestKind(%+v) = %q, want %q", tc.shape, got, tc.want)
			}
		})
	}
}

func TestHasTools(t *testing.T) {
	for raw, want := range map[string]bool{
		``:                          false,
		`null`:                      false,
		`[]`:                        false,
		` [ ] `:                     false,
		`[{"type":"function"}]`:     true,
		`[{"type":"web_search"},1]`: true,
	} {
		if got := hasTools(json.RawMessage(raw)); got != want {
			t.Errorf("hasTools(%q) = %v, want %v", raw, got, want)
		}
	}
}
