package osl

import (
	"fmt"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

type obs struct {
	call   Call
	kind   Kind
	tokens int
}

func TestPredict(t *testing.T) {
	cc := func(s string) Call { return Call{Client: "claude-code", Session: s, AfterTool: true, Tool: "Read"} }
	tests := []struct {
		name   string
		learn  []obs
		call   Call
		tokens int
		kind   Kind
		source Source
		turns  int
	}{
		{name: "nothing learned", call: cc("a"), source: SourceNone, kind: ToolCall},
		{name: "another client's answers", learn: []obs{{Call{Client: "codex", Session: "x", AfterTool: true}, ToolCall, 200}},
			call: cc("a"), tokens: 200, kind: ToolCall, source: SourceGlobal},
		{name: "the client's answers", learn: []obs{
			{Call{Client: "codex", Session: "x"}, ToolCall, 1000},
			{cc("b"), ToolCall, 100},
		}, call: cc("a"), tokens: 100, kind: ToolCall, source: SourceClient},
		// The client's mean (alpha 0.5) is log 200; the session's first
		// answer counts half against it: exp((log 400 + log 200) / 2).
		{name: "the session's first answer counts half", learn: []obs{
			{cc("b"), ToolCall, 100},
			{cc("a"), ToolCall, 400},
		}, call: cc("a"), tokens: 283, kind: ToolCall, source: SourceSession, turns: 1},
		{name: "a side request is not a turn", learn: []obs{
			{cc("a"), ToolCall, 300},
			{Call{Client: "claude-code", Session: "a", Side: true}, ToolCall, 10},
		}, call: Call{Client: "claude-code", Session: "a", Side: true}, tokens: 10, kind: Side, source: SourceSession, turns: 1},
		{name: "a turn ignores side answers", learn: []obs{
			{Call{Client: "claude-code", Session: "a", Side: true}, Side, 10},
		}, call: cc("a"), kind: ToolCall, source: SourceNone},
		{name: "final answers after the user's message", learn: []obs{
			{Call{Client: "opencode", Session: "b"}, Final, 40},
			{Call{Client: "opencode", Session: "b", AfterTool: true, Tool: "read"}, ToolCall, 400},
		}, call: Call{Client: "opencode", Session: "c"}, tokens: 40, kind: Final, source: SourceClient},
		{name: "a turn kind without answers borrows the other's", learn: []obs{
			{Call{Client: "opencode", Session: "b"}, ToolCall, 250},
			{Call{Client: "opencode", Session: "b", AfterTool: true, Tool: "grep"}, Final, 50},
		}, call: Call{Client: "opencode", Session: "c", AfterTool: true, Tool: "glob"}, tokens: 50, kind: Final, source: SourceClient},
		{name: "zero tokens teach nothing", learn: []obs{{cc("a"), ToolCall, 0}}, call: cc("a"), source: SourceNone},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := New(Config{Alpha: 0.5}, &fakeClock{now: time.Unix(1000, 0)})
			for _, o := range tc.learn {
				e.Observe(o.call, o.kind, o.tokens)
			}
			got := e.Predict(tc.call)
			if got.Tokens != tc.tokens || got.Kind != tc.kind || got.Source != tc.source || got.SessionTurns != tc.turns {
				t.Fatalf("Predict = %+v (%v, %v), want tokens %d kind %v source %v turns %d",
					got, got.Kind, got.Source, tc.tokens, tc.kind, tc.source, tc.turns)
			}
		})
	}
}

// TestSessionFollowsItsAnswers: a session whose answers are longer than
// its client's is predicted from its own after a few turns.
func TestSessionFollowsItsAnswers(t *testing.T) {
	e := New(Config{}, &fakeClock{now: time.Unix(1000, 0)})
	for i := range 20 {
		e.Observe(Call{Client: "codex", Session: fmt.Sprintf("short%d", i), AfterTool: true}, ToolCall, 100)
	}
	c := Call{Client: "codex", Session: "long", AfterTool: true}
	for range 4 {
		e.Observe(c, ToolCall, 800)
	}
	got := e.Predict(c).Tokens
	// The client's mean has moved to about log 485 (alpha 0.3, four
	// answers of 800 after 100s): (4·log 800 + log 485) / 5 = log 724,
	// where the client alone says 485.
	if got < 700 || got > 750 {
		t.Fatalf("after four answers of 800 tokens the session predicts %d, want about 724", got)
	}
}

func TestSessionsBounded(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	e := New(Config{MaxSessions: 8, MaxClients: 2, MaxContexts: 3}, clk)
	for i := range 1000 {
		c := Call{Client: fmt.Sprint("client", i%5), Session: fmt.Sprint("s", i), AfterTool: true, Tool: fmt.Sprint("tool", i)}
		e.Observe(c, ToolCall, 100+i)
		if n := e.Sessions(); n > 8 {
			t.Fatalf("after %d sessions the estimator holds %d, want at most 8", i+1, n)
		}
	}
	if got := e.Predict(Call{Session: "s999"}); got.Source != SourceSession {
		t.Fatalf("the most recent session was evicted: %+v", got)
	}
	if got := e.Predict(Call{Session: "s0"}); got.SessionTurns != 0 {
		t.Fatalf("the oldest session is still held: %+v", got)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.clients) > 2 {
		t.Fatalf("%d clients held, want at most 2", len(e.clients))
	}
	for name, cs := range e.clients {
		if len(cs.contexts) > 3 {
			t.Fatalf("client %q holds %d contexts, want at most 3", name, len(cs.contexts))
		}
	}
}

func TestIdleSessionsForgotten(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	e := New(Config{IdleTTL: time.Minute}, clk)
	e.Observe(Call{Session: "old"}, ToolCall, 100)
	clk.now = clk.now.Add(30 * time.Second)
	e.Observe(Call{Session: "new"}, ToolCall, 100)
	clk.now = clk.now.Add(45 * time.Second)
	if n := e.Sessions(); n != 2 {
		t.Fatalf("before anything is asked %d sessions are held, want 2", n)
	}
	e.Predict(Call{Session: "x"})
	if n := e.Sessions(); n != 1 {
		t.Fatalf("75 s after the first session's last answer %d sessions are held, want 1", n)
	}
	if got := e.Predict(Call{Session: "new"}); got.SessionTurns != 1 {
		t.Fatalf("the session idle for 45 s was forgotten: %+v", got)
	}
}

func BenchmarkPredictObserve(b *testing.B) {
	e := New(Config{}, nil)
	calls := make([]Call, 64)
	for i := range calls {
		calls[i] = Call{Client: "claude-code", Session: fmt.Sprint("s", i), AfterTool: i%3 != 0, Tool: "Read"}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c := calls[i%len(calls)]
		e.Predict(c)
		e.Observe(c, ToolCall, 100+i%200)
	}
}
