package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/tokenizer"
)

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

func mustChatRequest(t *testing.T, msgs []chatMessage, tools json.RawMessage) tokenizer.ChatRequest {
	t.Helper()
	r := engineRequest{Messages: msgs, Tools: tools}
	c, err := r.chatRequest()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
