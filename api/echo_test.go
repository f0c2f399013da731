package api

import "testing"

func TestEchoStyle(t *testing.T) {
	answer := textMessage("assistant", "Reading it.")
	answer.ReasoningContent = "The user wants main.go."
	answer.ToolCalls = []toolCall{{ID: "c1", Type: "function", Function: toolFunction{Name: "read_file", Arguments: `{"path": "main.go"}`}}}
	sent := func(reasoning, args string) chatMessage {
		m := answer
		m.ReasoningContent = reasoning
		m.ToolCalls = []toolCall{{ID: "c1", Type: "function", Function: toolFunction{Name: "read_file", Arguments: args}}}
		return m
	}
	tests := []struct {
		name  string
		sent  chatMessage
		style echoStyle
		ok    bool
	}{
		{"verbatim", sent(answer.ReasoningContent, `{"path": "main.go"}`), echoStyle{keepsReasoning: true}, true},
		{"reasoning dropped, arguments compacted", sent("", `{"path":"main.go"}`), echoStyle{compactsArgs: true}, true},
		{"another tool", chatMessage{Role: "assistant", ToolCalls: []toolCall{{Function: toolFunction{Name: "grep"}}}}, echoStyle{}, false},
		{"a user message", textMessage("user", "hi"), echoStyle{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := learnEcho(answer, tt.sent)
			if ok != tt.ok || s != tt.style {
				t.Fatalf("learnEcho = %+v, %v; want %+v, %v", s, ok, tt.style, tt.ok)
			}
			if !ok {
				return
			}
			// What the style predicts is what the client sent.
			got := s.echo(answer)
			if got.ReasoningContent != tt.sent.ReasoningContent || got.ToolCalls[0].Function.Arguments != tt.sent.ToolCalls[0].Function.Arguments {
				t.Errorf("echo = %q %q, want %q %q", got.ReasoningContent, got.ToolCalls[0].Function.Arguments, tt.sent.ReasoningContent, tt.sent.ToolCalls[0].Function.Arguments)
			}
		})
	}
	if s := defaultEchoStyle(dialectAnthropic, "claude-code"); !s.keepsReasoning || !s.compactsArgs {
		t.Errorf("Claude Code's default %+v: thinking blocks and input objects come back", s)
	}
	if s := defaultEchoStyle(dialectOpenAI, "opencode"); s.keepsReasoning || !s.compactsArgs {
		t.Errorf("OpenCode's default %+v: no reasoning, arguments re-serialised", s)
	}
}

// TestToolPausesLearnTheClientsEcho: the next turn of a session teaches
// how its client sends answers back, and the session's next pause uses it.
func TestToolPausesLearnTheClientsEcho(t *testing.T) {
	answer := textMessage("assistant", "")
	answer.ReasoningContent = "thinking"
	answer.ToolCalls = []toolCall{{ID: "c1", Type: "function", Function: toolFunction{Name: "read_file", Arguments: `{"path": "a"}`}}}
	p := newToolPauses(4)
	def := echoStyle{keepsReasoning: true}
	if s := p.begin("s1", &toolPause{answer: answer, at: 2, cancel: func() {}}, def); s != def {
		t.Fatalf("first pause style %+v, want the default", s)
	}
	sent := answer
	sent.ReasoningContent = ""
	p.end("s1", []chatMessage{textMessage("system", "x"), textMessage("user", "y"), sent, {Role: "tool"}})
	if s := p.begin("s1", &toolPause{answer: answer, at: 4, cancel: func() {}}, def); s.keepsReasoning {
		t.Errorf("second pause style %+v: the client dropped the reasoning", s)
	}
}
