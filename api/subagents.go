package api

import (
	"strings"
	"sync"

	json "github.com/goccy/go-json"
)

// Subagents.
//
// None of the three agents says which session started a subagent: Claude
// Code's Agent (formerly Task) tool, OpenCode's task tool and Codex's
// spawn_agent run the subagent as a conversation of its own, with its own
// system prompt and tools, and send no parent id. What does link them is in
// the parent's conversation: its answer calls the tool with the subagent's
// task as an argument (prompt, or message for Codex), and that text is the
// subagent's first user message. subagentLinks remembers the tasks of the
// calls it sees and names the parent of a session whose first user message
// holds one.

// subagentTools are the clients' tools that start a subagent, and the
// argument that carries its task.
var subagentTools = map[string]string{"Agent": "prompt", "Task": "prompt", "task": "prompt", "spawn_agent": "message"}

// minSubagentTask is the shortest task text matched: shorter ones ("go on")
// would link strangers.
const minSubagentTask = 32

type subagentLinks struct {
	mu      sync.Mutex
	tasks   map[string]string // task text -> parent session
	order   []string          // tasks, oldest first
	parents map[string]string // session -> parent session
	max     int
}

func newSubagentLinks(max int) *subagentLinks {
	return &subagentLinks{tasks: map[string]string{}, parents: map[string]string{}, max: max}
}

// noteCalls remembers the subagent tasks in session's answer.
func (l *subagentLinks) noteCalls(session string, calls []toolCall) {
	if session == "" {
		return
	}
	for _, tc := range calls {
		field, ok := subagentTools[tc.Function.Name]
		if !ok {
			continue
		}
		var args map[string]any
		if json.Unmarshal([]byte(tc.Function.Arguments), &args) != nil {
			continue
		}
		task, _ := args[field].(string)
		if task = strings.TrimSpace(task); len(task) < minSubagentTask {
			continue
		}
		l.mu.Lock()
		if _, seen := l.tasks[task]; !seen {
			if len(l.order) >= l.max {
				delete(l.tasks, l.order[0])
				l.order = l.order[1:]
			}
			l.order = append(l.order, task)
		}
		l.tasks[task] = session
		l.mu.Unlock()
	}
}

// parentOf returns the parent session of session, linking it when its
// first user message holds a remembered task; "" when it has none.
func (l *subagentLinks) parentOf(session string, messages []chatMessage) string {
	if session == "" {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.parents[session]; ok {
		return p
	}
	if len(l.tasks) == 0 {
		return ""
	}
	var first string
	for _, m := range messages {
		if m.Role == "user" {
			_ = json.Unmarshal(m.Content, &first)
			break
		}
	}
	if len(l.parents) >= l.max {
		clear(l.parents)
	}
	// A session is looked at once, at its first request: a subagent's
	// starts right after its parent's call.
	l.parents[session] = ""
	if len(first) < minSubagentTask {
		return ""
	}
	for task, parent := range l.tasks {
		if parent != session && strings.Contains(first, task) {
			l.parents[session] = parent
			return parent
		}
	}
	return ""
}
