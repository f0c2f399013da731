package api

import (
	"bytes"
	"strings"

	"github.com/goccy/go-json"
	"github.com/gofiber/fiber/v2"
)

// requestShape is what tells a coding agent's side request from a turn of
// its conversation, read from the request before it is routed.
type requestShape struct {
	Client    string // clientKind
	MaxTokens int    // as the client asked; 0 when it did not say
	HasTools  bool
	// CodexKind is request_kind from Codex's x-codex-turn-metadata header
	// ("turn" for the conversation's own requests); "" when absent.
	CodexKind string
}

// codingAgents are the clients whose requests without tools are side
// requests: each of them sends its whole tool list with every turn.
var codingAgents = map[string]bool{"claude-code": true, "codex": true, "opencode": true}

// requestKind classifies a request. The agents send, beside their
// conversation's turns, small requests of their own in the same session:
// Claude Code a topic or title request to a small model and a quota probe
// with max_tokens 1, OpenCode a title request with its own short system
// prompt, Codex requests its turn metadata names as other than "turn"
// (compaction). Every turn of these agents carries the agent's tools;
// those side requests carry none. A client that is not a known coding
// agent sends only turns.
func requestKind(s requestShape) RequestKind {
	switch {
	case s.CodexKind != "" && s.CodexKind != "turn":
		return KindSide
	case s.MaxTokens == 1: // a quota or reachability probe
		return KindSide
	case codingAgents[s.Client] && !s.HasTools:
		return KindSide
	}
	return KindTurn
}

// requestShapeOf reads a request's shape. client is clientKind(c).
func requestShapeOf(c *fiber.Ctx, client string, req *engineRequest) requestShape {
	s := requestShape{Client: client, MaxTokens: req.MaxTokens, HasTools: hasTools(req.Tools)}
	if meta := c.Get("x-codex-turn-metadata"); meta != "" {
		var v struct {
			RequestKind string `json:"request_kind"`
		}
		if json.Unmarshal([]byte(meta), &v) == nil {
			s.CodexKind = v.RequestKind
		}
	}
	return s
}

// hasTools reports whether a raw JSON tool list holds any tool.
func hasTools(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.Equal(t, []byte("null")) && strings.Trim(string(t), "[] \t\r\n") != ""
}
