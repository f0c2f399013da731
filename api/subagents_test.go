package api

import (
	"testing"
	"time"
)

func TestSubagentLinks(t *testing.T) {
	task := "Find every caller of parseConfig in the repository and report their files."
	call := func(name, args string) []toolCall {
		return []toolCall{{ID: "c1", Type: "function", Function: toolFunction{Name: name, Arguments: args}}}
	}
	first := func(text string) []chatMessage {
		return []chatMessage{textMessage("system", "You are a search agent."), textMessage("user", text)}
	}
	tests := []struct {
		name   string
		calls  []toolCall
		child  string
		msgs   []chatMessage
		parent string
	}{
		{"claude code agent tool", call("Agent", `{"description":"find callers","prompt":"`+task+`","subagent_type":"Explore"}`), "child", first("<system-reminder>x</system-reminder>\n" + task), "parent"},
		{"opencode task tool", call("task", `{"description":"find callers","prompt":"`+task+`","subagent_type":"general"}`), "child", first(task), "parent"},
		{"codex spawn_agent", call("spawn_agent", `{"message":"`+task+`"}`), "child", first(task), "parent"},
		{"another tool", call("read_file", `{"prompt":"`+task+`"}`), "child", first(task), ""},
		{"a different task", call("task", `{"prompt":"`+task+`"}`), "child", first("Something else entirely, not the task above at all."), ""},
		{"a short task links nobody", call("task", `{"prompt":"go on"}`), "child", first("go on, and keep going until the end of it"), ""},
		{"the same session", call("task", `{"prompt":"`+task+`"}`), "parent", first(task), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newSubagentLinks(8)
			l.noteCalls("parent", tt.calls)
			if got := l.parentOf(tt.child, tt.msgs); got != tt.parent {
				t.Errorf("parent %q, want %q", got, tt.parent)
			}
			if got := l.parentOf(tt.child, tt.msgs); got != tt.parent {
				t.Errorf("asked again: parent %q, want %q", got, tt.parent)
			}
		})
	}
}

func TestTrafficKeepsTheParentSession(t *testing.T) {
	tr := NewTraffic(TrafficLimits{})
	tr.Record(RequestRecord{ID: "r1", SessionID: "child", ParentSession: "parent", Kind: KindTurn}, nil, nil, time.Time{})
	tr.Record(RequestRecord{ID: "r2", SessionID: "child", Kind: KindTurn}, nil, nil, time.Time{})
	s := tr.Sessions()
	if len(s) != 1 || s[0].Parent != "parent" {
		t.Fatalf("sessions %+v, want child with parent", s)
	}
}
