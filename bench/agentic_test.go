package bench

import (
	"container/heap"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func newAgentic(t testing.TB, cfg AgenticConfig) *Agentic {
	t.Helper()
	a, err := NewAgentic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAgenticIsDeterministic(t *testing.T) {
	cfg := AgenticConfig{Seed: 11, Subagents: 2, TotalSessions: 10}
	a, b := newAgentic(t, cfg), newAgentic(t, cfg)
	// Made in a different order: a session depends on the seed and its
	// index only.
	for _, i := range []int{3, 0, 7} {
		if !reflect.DeepEqual(a.Session(i), b.Session(i)) {
			t.Errorf("session %d differs between two workloads of one seed", i)
		}
	}
	if !reflect.DeepEqual(a.Session(5), a.Session(5)) {
		t.Error("session 5 differs between two calls")
	}
	cfg.Seed = 12
	c := newAgentic(t, cfg)
	if slices.Equal(a.Prefix(), c.Prefix()) || slices.Equal(a.Session(0).Turns[0].Prompt, c.Session(0).Turns[0].Prompt) {
		t.Error("seeds 11 and 12 gave the same tokens")
	}
}

// checkTurns checks what every session and subagent must satisfy: each
// prompt is the previous prompt, its answer and a tool result; segments tile
// the prompt; lengths lie in their ranges.
func checkTurns(t *testing.T, cfg AgenticConfig, s *Session, base int, steps int) {
	t.Helper()
	if len(s.Turns) != steps {
		t.Fatalf("%s has %d turns, want %d", s.ID, len(s.Turns), steps)
	}
	for k, req := range s.Turns {
		if req.Session != s.ID || req.Turn != k {
			t.Errorf("%s turn %d is labelled %s/%d", s.ID, k, req.Session, req.Turn)
		}
		if req.OutputTokens != len(req.Answer) || req.OutputTokens < cfg.AnswerTokens.Min || req.OutputTokens > cfg.AnswerTokens.Max {
			t.Errorf("%s/%d: output tokens %d, answer %d, want equal and in %v", s.ID, k, req.OutputTokens, len(req.Answer), cfg.AnswerTokens)
		}
		if req.SharedPrefix != cfg.PrefixTokens {
			t.Errorf("%s/%d: shared prefix %d, want %d", s.ID, k, req.SharedPrefix, cfg.PrefixTokens)
		}
		// Segments tile the prompt in order.
		end := 0
		for _, seg := range req.Segments {
			if seg.Start != end || seg.End < seg.Start {
				t.Fatalf("%s/%d: segments %v do not tile the prompt", s.ID, k, req.Segments)
			}
			end = seg.End
		}
		if end != len(req.Prompt) {
			t.Fatalf("%s/%d: segments end at %d, prompt has %d tokens", s.ID, k, end, len(req.Prompt))
		}
		if k == 0 {
			task := req.Segments[len(req.Segments)-1]
			if task.Role != RoleUser || task.Start != base || task.End-task.Start < cfg.TaskTokens.Min || task.End-task.Start > cfg.TaskTokens.Max {
				t.Errorf("%s/0: last segment %v, want a user task of %v tokens after %d", s.ID, task, cfg.TaskTokens, base)
			}
			continue
		}
		prev := s.Turns[k-1]
		head := len(prev.Prompt) + len(prev.Answer)
		if !slices.Equal(req.Prompt[:len(prev.Prompt)], prev.Prompt) || !slices.Equal(req.Prompt[len(prev.Prompt):head], prev.Answer) {
			t.Fatalf("%s/%d: prompt does not start with the previous prompt and answer", s.ID, k)
		}
		result := len(req.Prompt) - head
		if result < cfg.ResultTokens.Min || result > cfg.ResultTokens.Max {
			t.Errorf("%s/%d: tool result of %d tokens, want %v", s.ID, k, result, cfg.ResultTokens)
		}
		wantSegs := append(slices.Clone(prev.Segments),
			Segment{RoleAssistant, len(prev.Prompt), head}, Segment{RoleTool, head, len(req.Prompt)})
		if !slices.Equal(req.Segments, wantSegs) {
			t.Errorf("%s/%d: segments %v, want %v", s.ID, k, req.Segments, wantSegs)
		}
	}
	if last := s.Turns[steps-1]; last.Pause != 0 {
		t.Errorf("%s: last turn has a pause of %v", s.ID, last.Pause)
	}
}

func TestAgenticSessionShape(t *testing.T) {
	tests := []struct {
		name string
		cfg  AgenticConfig
	}{
		{"defaults", AgenticConfig{Seed: 1}},
		{"one step", AgenticConfig{Seed: 2, Steps: 1, PrefixTokens: 100}},
		{"fixed lengths", AgenticConfig{Seed: 3, Steps: 3, TaskTokens: IntRange{7, 7}, AnswerTokens: IntRange{5, 5}, ResultTokens: IntRange{0, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAgentic(t, tt.cfg)
			cfg := a.Config()
			if len(a.Prefix()) != cfg.PrefixTokens {
				t.Fatalf("prefix has %d tokens, want %d", len(a.Prefix()), cfg.PrefixTokens)
			}
			for i := range 30 {
				s := a.Session(i)
				if want := fmt.Sprintf("s%05d", i); s.ID != want {
					t.Errorf("session %d is called %q, want %q", i, s.ID, want)
				}
				first := s.Turns[0]
				if !slices.Equal(first.Prompt[:cfg.PrefixTokens], a.Prefix()) {
					t.Fatalf("session %d does not start with the shared prefix", i)
				}
				if first.Segments[0] != (Segment{RoleSystem, 0, cfg.PrefixTokens}) {
					t.Errorf("session %d: first segment %v, want the system prefix", i, first.Segments[0])
				}
				checkTurns(t, cfg, s, cfg.PrefixTokens, cfg.Steps)
				if s.Subagents != nil || s.SpawnTurn != -1 {
					t.Errorf("session %d has subagents without asking", i)
				}
			}
			// Tasks differ between sessions right after the prefix.
			t0, t1 := a.Session(0).Turns[0].Prompt, a.Session(1).Turns[0].Prompt
			if slices.Equal(t0[cfg.PrefixTokens:cfg.PrefixTokens+5], t1[cfg.PrefixTokens:cfg.PrefixTokens+5]) {
				t.Error("sessions 0 and 1 start their tasks identically")
			}
		})
	}
}

func TestAgenticDefaults(t *testing.T) {
	cfg := AgenticConfig{}.WithDefaults()
	want := AgenticConfig{
		PrefixTokens: 6000, TaskTokens: IntRange{200, 500}, Steps: 8, AnswerTokens: IntRange{100, 200},
		ResultTokens: IntRange{300, 3000}, ToolPause: LogNormal{3 * time.Second, 20 * time.Second},
		Sessions: 8, Duration: 10 * time.Minute, SubagentSteps: 4,
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("defaults %+v, want %+v", cfg, want)
	}
	if got := (AgenticConfig{TotalSessions: 5}).WithDefaults().Duration; got != 0 {
		t.Errorf("duration with total sessions = %v, want 0 (no limit)", got)
	}
}

func TestAgenticValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  AgenticConfig
		want string
	}{
		{"negative prefix", AgenticConfig{PrefixTokens: -1}, "prefix tokens"},
		{"empty task", AgenticConfig{TaskTokens: IntRange{0, 5}}, "task tokens"},
		{"zero-length answers", AgenticConfig{AnswerTokens: IntRange{0, 3}}, "answer tokens"},
		{"empty results are fine", AgenticConfig{ResultTokens: IntRange{0, 3}}, ""},
		{"task range reversed", AgenticConfig{TaskTokens: IntRange{9, 3}}, "task tokens"},
		{"negative steps", AgenticConfig{Steps: -2}, "steps"},
		{"negative sessions", AgenticConfig{Sessions: -1}, "sessions"},
		{"negative duration", AgenticConfig{Duration: -time.Second}, "duration"},
		{"negative ramp", AgenticConfig{Ramp: -time.Second}, "ramp"},
		{"ramp past the end", AgenticConfig{Ramp: time.Minute, Duration: time.Minute}, "ramp"},
		{"subagents with one step", AgenticConfig{Subagents: 2, Steps: 1}, "subagents need steps"},
		{"bad pause", AgenticConfig{ToolPause: LogNormal{Median: 2 * time.Second, P90: time.Second}}, "tool pause"},
		{"valid", AgenticConfig{Subagents: 3, TotalSessions: 4}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewAgentic(tt.cfg)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("NewAgentic: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewAgentic err = %v, want ErrBadConfig mentioning %q", err, tt.want)
			}
		})
	}
}

func TestAgenticSubagentsShareParentContext(t *testing.T) {
	cfg := AgenticConfig{Seed: 5, Subagents: 3, SubagentSteps: 2, TotalSessions: 2}
	a := newAgentic(t, cfg)
	cfg = a.Config()
	s := a.Session(1)
	if len(s.Subagents) != 3 || s.SpawnTurn != 0 {
		t.Fatalf("%d subagents spawned at turn %d, want 3 at turn 0", len(s.Subagents), s.SpawnTurn)
	}
	if s.Turns[0].Pause != 0 {
		t.Errorf("the spawning turn has a tool pause of %v; the parent waits for its subagents instead", s.Turns[0].Pause)
	}
	parent := s.Turns[0]
	ctx := append(slices.Clone(parent.Prompt), parent.Answer...)
	for j, sub := range s.Subagents {
		if want := fmt.Sprintf("s00001.%d", j); sub.ID != want {
			t.Errorf("subagent %d is called %q, want %q", j, sub.ID, want)
		}
		first := sub.Turns[0]
		if !slices.Equal(first.Prompt[:len(ctx)], ctx) {
			t.Fatalf("subagent %d does not start with the parent's context", j)
		}
		if !slices.Equal(first.Prompt[:cfg.PrefixTokens], a.Prefix()) {
			t.Fatalf("subagent %d does not start with the shared prefix", j)
		}
		wantSegs := append(slices.Clone(parent.Segments), Segment{RoleAssistant, len(parent.Prompt), len(ctx)})
		if !slices.Equal(first.Segments[:len(wantSegs)], wantSegs) {
			t.Errorf("subagent %d segments %v, want them to start with %v", j, first.Segments, wantSegs)
		}
		checkTurns(t, cfg, sub, len(ctx), cfg.SubagentSteps)
		if sub.Subagents != nil {
			t.Errorf("subagent %d has subagents of its own", j)
		}
	}
	if a, b := s.Subagents[0].Turns[0].Prompt, s.Subagents[1].Turns[0].Prompt; slices.Equal(a[len(ctx):len(ctx)+5], b[len(ctx):len(ctx)+5]) {
		t.Error("subagents 0 and 1 got the same subtask")
	}
	checkTurns(t, cfg, s, cfg.PrefixTokens, cfg.Steps)
}

func TestRequestTextAndMessages(t *testing.T) {
	a := newAgentic(t, AgenticConfig{Seed: 9, PrefixTokens: 40, Steps: 3, TotalSessions: 1})
	req := a.Session(0).Turns[2]
	msgs := req.Messages()
	var roles []Role
	var joined strings.Builder
	for _, m := range msgs {
		roles = append(roles, m.Role)
		joined.WriteString(m.Content)
	}
	wantRoles := []Role{RoleSystem, RoleUser, RoleAssistant, RoleTool, RoleAssistant, RoleTool}
	if !slices.Equal(roles, wantRoles) {
		t.Errorf("roles %v, want %v", roles, wantRoles)
	}
	text, err := Text(req.Prompt)
	if err != nil {
		t.Fatal(err)
	}
	if joined.String() != text || req.Text() != text {
		t.Error("messages do not add up to the prompt's text")
	}
	if n := strings.Count(text, " "); n != len(req.Prompt) {
		t.Errorf("text has %d words, prompt %d tokens", n, len(req.Prompt))
	}
	if req.ID() != "s00000/2" {
		t.Errorf("ID = %q", req.ID())
	}
}

// event is one thing a fake runner saw.
type event struct {
	at    time.Duration
	sent  bool // else completed
	req   *Request
	fails bool
}

// completion is a request in flight in the fake runner.
type completion struct {
	at  time.Duration
	seq int
	req *Request
}

type completions []completion

func (c completions) Len() int { return len(c) }
func (c completions) Less(i, j int) bool {
	return c[i].at < c[j].at || (c[i].at == c[j].at && c[i].seq < c[j].seq)
}
func (c completions) Swap(i, j int) { c[i], c[j] = c[j], c[i] }
func (c *completions) Push(x any)   { *c = append(*c, x.(completion)) }
func (c *completions) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}

// runFake drives d the way a runner does, in virtual time: each request
// takes service(req) and fails when fail(req) says so. It returns what
// happened, in order.
func runFake(t testing.TB, d Driver, service func(*Request) time.Duration, fail func(*Request) bool) []event {
	t.Helper()
	var log []event
	var inflight completions
	now, seq := time.Duration(0), 0
	for steps := 0; !d.Finished(); steps++ {
		if steps > 10_000_000 {
			t.Fatal("driver never finishes")
		}
		for req := d.Next(now); req != nil; req = d.Next(now) {
			if req.Due > now {
				t.Fatalf("%s handed out at %v but due at %v", req.ID(), now, req.Due)
			}
			log = append(log, event{at: now, sent: true, req: req})
			seq++
			heap.Push(&inflight, completion{now + service(req), seq, req})
		}
		wake, ok := d.Wake()
		if len(inflight) == 0 && !ok {
			if !d.Finished() {
				t.Fatalf("at %v: nothing in flight, nothing due, but not finished", now)
			}
			break
		}
		if len(inflight) > 0 && (!ok || inflight[0].at <= wake) {
			c := heap.Pop(&inflight).(completion)
			now = c.at
			f := fail != nil && fail(c.req)
			log = append(log, event{at: now, req: c.req, fails: f})
			d.Complete(c.req, now, f)
		} else {
			if wake < now {
				t.Fatalf("wake %v is in the past (now %v)", wake, now)
			}
			now = wake
		}
	}
	return log
}

func TestAgenticDriverClosedLoop(t *testing.T) {
	const service = 2 * time.Second
	a := newAgentic(t, AgenticConfig{Seed: 4, Sessions: 3, TotalSessions: 7, Steps: 4})
	log := runFake(t, a.NewDriver(), func(*Request) time.Duration { return service }, nil)

	running := map[string]bool{}
	doneAt := map[string]time.Duration{}
	sessions := map[string][]int{}
	maxRunning := 0
	for i, e := range log {
		if i < 3 && (!e.sent || e.at != 0 || e.req.Turn != 0) {
			t.Errorf("event %d: want the first three sessions to start at 0, got %v/%v sent=%v", i, e.req.ID(), e.at, e.sent)
		}
		if !e.sent {
			doneAt[e.req.ID()] = e.at
			if e.req.Turn == 3 {
				delete(running, e.req.Session)
			}
			continue
		}
		running[e.req.Session] = true
		maxRunning = max(maxRunning, len(running))
		sessions[e.req.Session] = append(sessions[e.req.Session], e.req.Turn)
		if e.req.Turn > 0 {
			prev := fmt.Sprintf("%s/%d", e.req.Session, e.req.Turn-1)
			var pause time.Duration
			for _, p := range log[:i] {
				if p.sent && p.req.ID() == prev {
					pause = p.req.Pause
				}
			}
			if want := doneAt[prev] + pause; e.at != want {
				t.Errorf("%s sent at %v, want previous answer at %v + pause %v", e.req.ID(), e.at, doneAt[prev], pause)
			}
		}
	}
	if maxRunning != 3 {
		t.Errorf("at most %d sessions ran at once, want 3", maxRunning)
	}
	if len(sessions) != 7 {
		t.Errorf("%d sessions ran, want 7", len(sessions))
	}
	for id, turns := range sessions {
		if !slices.Equal(turns, []int{0, 1, 2, 3}) {
			t.Errorf("%s ran turns %v", id, turns)
		}
	}
}

func TestAgenticDriverReplacesFinishedSessions(t *testing.T) {
	// With constant pauses and service times every session takes the same
	// time, so replacements start exactly when their predecessors end.
	a := newAgentic(t, AgenticConfig{Seed: 4, Sessions: 2, TotalSessions: 4, Steps: 2, ToolPause: Constant{time.Second}})
	log := runFake(t, a.NewDriver(), func(*Request) time.Duration { return 500 * time.Millisecond }, nil)
	var starts []string
	for _, e := range log {
		if e.sent && e.req.Turn == 0 {
			starts = append(starts, fmt.Sprintf("%s@%v", e.req.Session, e.at))
		}
	}
	want := []string{"s00000@0s", "s00001@0s", "s00002@2s", "s00003@2s"}
	if !slices.Equal(starts, want) {
		t.Errorf("sessions started %v, want %v", starts, want)
	}
}

// TestAgenticDriverRamp: with Ramp the first sessions start one after
// another, evenly spread over it; a replacement still starts when a
// session ends.
func TestAgenticDriverRamp(t *testing.T) {
	a := newAgentic(t, AgenticConfig{Seed: 4, Sessions: 4, TotalSessions: 5, Steps: 2, ToolPause: Constant{time.Second},
		Ramp: 10 * time.Second})
	log := runFake(t, a.NewDriver(), func(*Request) time.Duration { return 500 * time.Millisecond }, nil)
	var starts []string
	for _, e := range log {
		if e.sent && e.req.Turn == 0 {
			starts = append(starts, fmt.Sprintf("%s@%v", e.req.Session, e.at))
		}
	}
	// Each session takes 2 s (two 500 ms calls and a 1 s pause): the first
	// ends at 2 s, and the fifth replaces it then.
	want := []string{"s00000@0s", "s00004@2s", "s00001@2.5s", "s00002@5s", "s00003@7.5s"}
	if !slices.Equal(starts, want) {
		t.Errorf("sessions started %v, want %v", starts, want)
	}
}

func TestAgenticDriverDuration(t *testing.T) {
	a := newAgentic(t, AgenticConfig{Seed: 8, Sessions: 4, Duration: time.Minute})
	d := a.NewDriver()
	log := runFake(t, d, func(*Request) time.Duration { return 3 * time.Second }, nil)
	if len(log) == 0 {
		t.Fatal("nothing was sent")
	}
	var sent, completed int
	for _, e := range log {
		if e.sent {
			sent++
			if e.at >= time.Minute {
				t.Errorf("%s sent at %v, after the duration", e.req.ID(), e.at)
			}
		} else {
			completed++
		}
	}
	if sent != completed || !d.Finished() {
		t.Errorf("%d sent, %d completed, finished %v", sent, completed, d.Finished())
	}
	if _, ok := d.Wake(); ok || d.Next(time.Hour) != nil {
		t.Error("a finished driver still has requests")
	}
}

func TestAgenticDriverSubagents(t *testing.T) {
	a := newAgentic(t, AgenticConfig{Seed: 6, Sessions: 1, TotalSessions: 1, Steps: 3, Subagents: 2, SubagentSteps: 2})
	service := func(r *Request) time.Duration { return time.Duration(len(r.Prompt)) * time.Millisecond }
	log := runFake(t, a.NewDriver(), service, nil)
	var order []string
	at := map[string]time.Duration{}
	for _, e := range log {
		kind := "done"
		if e.sent {
			kind = "send"
		}
		order = append(order, kind+" "+e.req.ID())
		at[kind+" "+e.req.ID()] = e.at
	}
	idx := func(s string) int {
		i := slices.Index(order, s)
		if i < 0 {
			t.Fatalf("%q never happened: %v", s, order)
		}
		return i
	}
	for _, sub := range []string{"s00000.0", "s00000.1"} {
		if at["send "+sub+"/0"] != at["done s00000/0"] {
			t.Errorf("%s started at %v, want when the parent's first answer arrived (%v)", sub, at["send "+sub+"/0"], at["done s00000/0"])
		}
		if idx("send "+sub+"/1") < idx("done "+sub+"/0") {
			t.Errorf("%s turn 1 sent before turn 0 finished", sub)
		}
		if idx("send s00000/1") < idx("done "+sub+"/1") {
			t.Errorf("parent's turn 1 sent before %s finished", sub)
		}
	}
	lastSub := max(at["done s00000.0/1"], at["done s00000.1/1"])
	if at["send s00000/1"] != lastSub {
		t.Errorf("parent's turn 1 sent at %v, want when the last subagent finished (%v)", at["send s00000/1"], lastSub)
	}
	if len(order) != 2*(3+2+2) {
		t.Errorf("%d events, want %d: %v", len(order), 2*(3+2+2), order)
	}
}

func TestAgenticDriverFailures(t *testing.T) {
	a := newAgentic(t, AgenticConfig{Seed: 6, Sessions: 2, TotalSessions: 3, Steps: 3, Subagents: 2, SubagentSteps: 2})
	// Session 0 fails on its second turn; subagent s00001.0 fails at once.
	fail := func(r *Request) bool { return r.ID() == "s00000/1" || r.ID() == "s00001.0/0" }
	d := a.NewDriver()
	log := runFake(t, d, func(*Request) time.Duration { return time.Second }, fail)
	sent := map[string]bool{}
	for _, e := range log {
		if e.sent {
			sent[e.req.ID()] = true
		}
	}
	for id, want := range map[string]bool{
		"s00000/1": true, "s00000/2": false, // the session ended with its failure
		"s00002/0":   true,                                        // and was replaced
		"s00001.0/1": false, "s00001.1/1": true, "s00001/1": true, // the parent went on without the failed subagent
	} {
		if sent[id] != want {
			t.Errorf("%s sent = %v, want %v", id, sent[id], want)
		}
	}
	// Completing something twice, or something unknown, changes nothing.
	d.Complete(&Request{Session: "s00009"}, time.Hour, false)
	d.Complete(log[0].req, time.Hour, false)
	if !d.Finished() {
		t.Error("stray completions revived the driver")
	}
}

func TestAgenticStepsRangeAndContextCap(t *testing.T) {
	p, ok := LookupPreset("coding-agent-8k")
	if !ok {
		t.Fatal("no coding-agent-8k preset")
	}
	cfg := p.Agentic
	cfg.Seed, cfg.TotalSessions = 7, 200
	a := newAgentic(t, cfg)
	counts := map[int]int{}
	cut := 0
	for i := range 200 {
		s := a.Session(i)
		counts[len(s.Turns)]++
		for _, turn := range s.Turns {
			if n := len(turn.Prompt) + turn.OutputTokens; n > p.MaxModelLen {
				t.Fatalf("%s: %d tokens, over max_model_len %d", turn.ID(), n, p.MaxModelLen)
			}
			if len(turn.Prompt[:turn.SharedPrefix]) != 6000 {
				t.Fatalf("%s: shared prefix %d", turn.ID(), turn.SharedPrefix)
			}
		}
		if !s.Turns[len(s.Turns)-1].Last || (len(s.Turns) > 1 && s.Turns[0].Last) {
			t.Errorf("%s: Last marks the wrong turn", s.ID)
		}
		// A session cut short would not have fit its next turn.
		if len(s.Turns) < 4 {
			cut++
		}
	}
	for n := range counts {
		if n < 1 || n > 6 {
			t.Errorf("a session has %d turns", n)
		}
	}
	if counts[4]+counts[5]+counts[6] == 0 || cut == 200 {
		t.Errorf("turn counts %v: the cap cut every session", counts)
	}
	// Without the cap, the draws of steps are the same: MaxSteps alone
	// gives 4 to 6 turns, every count drawn.
	cfg.MaxContextTokens = 0
	a = newAgentic(t, cfg)
	uncapped := map[int]int{}
	for i := range 200 {
		uncapped[len(a.Session(i).Turns)]++
	}
	if len(uncapped) != 3 || uncapped[4] == 0 || uncapped[5] == 0 || uncapped[6] == 0 {
		t.Errorf("uncapped turn counts %v, want 4, 5 and 6", uncapped)
	}
	t.Logf("capped at 8192: turn counts %v; uncapped %v", counts, uncapped)

	for _, bad := range []AgenticConfig{
		{MaxSteps: 3, Steps: 4},
		{PrefixTokens: 8000, MaxContextTokens: 8192},
		{MaxContextTokens: 100000, Subagents: 1},
	} {
		if _, err := NewAgentic(bad); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%+v: %v, want ErrBadConfig", bad, err)
		}
	}
}
