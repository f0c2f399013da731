package bench

import (
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// AgenticConfig describes the agentic workload: coding agents running a
// ReAct loop against one model. Zero fields take the documented defaults
// (WithDefaults); a workload is fully determined by its config.
type AgenticConfig struct {
	// Seed makes every token, length and pause of the workload; the same
	// seed gives the same workload.
	Seed uint64
	// PrefixTokens is the length of the prefix every session starts with:
	// the agent's system prompt and its four tool definitions. Default 6000.
	PrefixTokens int
	// TaskTokens is the length of each session's own task. Default 200-500.
	TaskTokens IntRange
	// Steps is the number of turns (model calls) of a session. Default 8.
	Steps int
	// MaxSteps, when above Steps, makes the number of turns vary: each
	// session draws it uniformly from Steps to MaxSteps. Default 0: every
	// session has Steps turns.
	MaxSteps int
	// MaxContextTokens, if set, is the context a session must fit (the
	// engines' max_model_len): a session ends before a turn whose prompt
	// plus answer would not fit, as an agent stops when its context is
	// full, so that the workload never asks for more than an engine takes.
	// At least the first turn must fit. Not with subagents. Default 0: no
	// limit.
	MaxContextTokens int
	// AnswerTokens is the length of each answer, a tool call (the output
	// sequence length). Default 100-200, about 150.
	AnswerTokens IntRange
	// ResultTokens is the length of each tool result. Default 300-3000.
	ResultTokens IntRange
	// ToolPause is how long each tool runs between an answer and the next
	// turn. Default log-normal with median 3 s and p90 20 s.
	ToolPause DurationDist
	// Sessions is how many sessions run at once (the concurrency level); a
	// finished session is replaced by a new one. Default 8.
	Sessions int
	// Duration stops the workload: no session starts, and no turn falls
	// due, at or after it; requests already sent still finish. Default 10
	// minutes when TotalSessions is zero, otherwise no limit.
	Duration time.Duration
	// TotalSessions stops the workload after that many sessions have been
	// started (0: no limit).
	TotalSessions int
	// Subagents is how many subagents each session spawns with its first
	// answer. They start at once, each from the parent's whole context (the
	// shared prefix, the parent's task and first answer) plus a subtask of
	// TaskTokens, and run SubagentSteps turns of their own concurrently;
	// the parent's next turn falls due when the last of them has finished,
	// and its tool result stands for their reports. Subagents do not count
	// towards Sessions or TotalSessions. Default 0.
	Subagents int
	// SubagentSteps is the number of turns of each subagent. Default half
	// of Steps, at least 1.
	SubagentSteps int
}

// Defaults of AgenticConfig.
const (
	DefaultPrefixTokens = 6000
	DefaultSteps        = 8
	DefaultSessions     = 8
	DefaultDuration     = 10 * time.Minute
)

// Default ranges and pause of AgenticConfig.
var (
	DefaultTaskTokens   = IntRange{Min: 200, Max: 500}
	DefaultAnswerTokens = IntRange{Min: 100, Max: 200}
	DefaultResultTokens = IntRange{Min: 300, Max: 3000}
	DefaultToolPause    = LogNormal{Median: 3 * time.Second, P90: 20 * time.Second}
)

// WithDefaults returns c with every zero field set to its default.
func (c AgenticConfig) WithDefaults() AgenticConfig {
	if c.PrefixTokens == 0 {
		c.PrefixTokens = DefaultPrefixTokens
	}
	if c.TaskTokens == (IntRange{}) {
		c.TaskTokens = DefaultTaskTokens
	}
	if c.Steps == 0 {
		c.Steps = DefaultSteps
	}
	if c.AnswerTokens == (IntRange{}) {
		c.AnswerTokens = DefaultAnswerTokens
	}
	if c.ResultTokens == (IntRange{}) {
		c.ResultTokens = DefaultResultTokens
	}
	if c.ToolPause == nil {
		c.ToolPause = DefaultToolPause
	}
	if c.Sessions == 0 {
		c.Sessions = DefaultSessions
	}
	if c.Duration == 0 && c.TotalSessions == 0 {
		c.Duration = DefaultDuration
	}
	if c.SubagentSteps == 0 {
		c.SubagentSteps = max(1, c.Steps/2)
	}
	return c
}

// ErrBadConfig is wrapped by every Validate error.
var ErrBadConfig = errors.New("bad workload config")

// Validate checks a config after WithDefaults.
func (c AgenticConfig) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.PrefixTokens >= 0 && c.PrefixTokens <= maxTokens, "prefix tokens %d out of [0, %d]", c.PrefixTokens, maxTokens)
	for _, r := range []struct {
		name string
		r    IntRange
		min  int
	}{{"task tokens", c.TaskTokens, 1}, {"answer tokens", c.AnswerTokens, 1}, {"result tokens", c.ResultTokens, 0}} {
		if err := r.r.validate(r.name, r.min); err != nil {
			errs = append(errs, err)
		}
	}
	check(c.Steps >= 1 && c.Steps <= 10000, "steps %d out of [1, 10000]", c.Steps)
	check(c.MaxSteps == 0 || (c.MaxSteps >= c.Steps && c.MaxSteps <= 10000), "max steps %d out of [steps %d, 10000]", c.MaxSteps, c.Steps)
	check(c.MaxContextTokens >= 0, "max context tokens %d is negative", c.MaxContextTokens)
	if first := c.PrefixTokens + c.TaskTokens.Max + c.AnswerTokens.Max; c.MaxContextTokens > 0 && first > c.MaxContextTokens {
		errs = append(errs, fmt.Errorf("a first turn of up to %d tokens does not fit max context tokens %d", first, c.MaxContextTokens))
	}
	check(c.MaxContextTokens == 0 || c.Subagents == 0, "max context tokens does not go with subagents")
	check(c.Sessions >= 1 && c.Sessions <= 1_000_000, "sessions %d out of [1, 1000000]", c.Sessions)
	check(c.Duration >= 0, "duration %v is negative", c.Duration)
	check(c.TotalSessions >= 0, "total sessions %d is negative", c.TotalSessions)
	check(c.Duration > 0 || c.TotalSessions > 0, "neither duration nor total sessions bounds the workload")
	check(c.Subagents >= 0 && c.Subagents <= 1000, "subagents %d out of [0, 1000]", c.Subagents)
	check(c.Subagents == 0 || c.Steps >= 2, "subagents need steps >= 2: the parent's first answer spawns them")
	check(c.SubagentSteps >= 1 && c.SubagentSteps <= 10000, "subagent steps %d out of [1, 10000]", c.SubagentSteps)
	if err := validateDist(c.ToolPause); err != nil {
		errs = append(errs, fmt.Errorf("tool pause: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench: agentic: %w: %w", ErrBadConfig, err)
	}
	return nil
}

// MarshalJSON writes the config with snake_case keys, durations as strings
// and "kind": "agentic", the workload object of the JSON report.
func (c AgenticConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Kind          string       `json:"kind"`
		Seed          uint64       `json:"seed"`
		PrefixTokens  int          `json:"prefix_tokens"`
		TaskTokens    IntRange     `json:"task_tokens"`
		Steps         int          `json:"steps"`
		MaxSteps      int          `json:"max_steps,omitempty"`
		MaxContext    int          `json:"max_context_tokens,omitempty"`
		AnswerTokens  IntRange     `json:"answer_tokens"`
		ResultTokens  IntRange     `json:"result_tokens"`
		ToolPause     DurationDist `json:"tool_pause"`
		Sessions      int          `json:"sessions"`
		Duration      string       `json:"duration"`
		TotalSessions int          `json:"total_sessions"`
		Subagents     int          `json:"subagents"`
		SubagentSteps int          `json:"subagent_steps"`
	}{"agentic", c.Seed, c.PrefixTokens, c.TaskTokens, c.Steps, c.MaxSteps, c.MaxContextTokens, c.AnswerTokens, c.ResultTokens,
		c.ToolPause, c.Sessions, c.Duration.String(), c.TotalSessions, c.Subagents, c.SubagentSteps})
}

// Agentic is the agentic workload. Sessions are made on demand from the
// seed and their index alone, so any runner, in any order, sees the same
// sessions. It is immutable and safe for concurrent use.
type Agentic struct {
	cfg    AgenticConfig
	prefix []uint32
}

var _ Workload = (*Agentic)(nil)

// NewAgentic returns the workload of cfg (after WithDefaults).
func NewAgentic(cfg AgenticConfig) (*Agentic, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	prefix := make([]uint32, cfg.PrefixTokens)
	fillTokens(prefix, NewRand(deriveSeed(cfg.Seed, labelPrefix)))
	return &Agentic{cfg: cfg, prefix: prefix}, nil
}

// Labels that keep the random streams of a workload's parts apart.
const (
	labelPrefix uint64 = iota + 1
	labelSession
	labelSubagent
	labelBlock
)

// Config returns the effective config, defaults filled in.
func (a *Agentic) Config() AgenticConfig { return a.cfg }

// Kind returns "agentic".
func (a *Agentic) Kind() string { return "agentic" }

// Prefix returns the token ids every session starts with. Callers must not
// modify them.
func (a *Agentic) Prefix() []uint32 { return a.prefix }

// Session is one agent's conversation: Turns are its model calls in order.
// Turn k's prompt is turn k-1's prompt, then turn k-1's Answer, then a tool
// result (or, for the first turn, the shared prefix and the task), so each
// prompt is an exact prefix of the next.
type Session struct {
	ID    string
	Turns []Request
	// Subagents are spawned by the answer of turn SpawnTurn; the next turn
	// waits for all of them. Nil for a subagent and when none are
	// configured.
	Subagents []*Session
	SpawnTurn int
}

// Session returns session i (0-based) of the workload, with its subagents.
func (a *Agentic) Session(i int) *Session {
	r := NewRand(deriveSeed(a.cfg.Seed, labelSession, uint64(i)))
	base := []Segment{{Role: RoleSystem, Start: 0, End: len(a.prefix)}}
	steps := a.cfg.Steps
	if a.cfg.MaxSteps > steps {
		steps = IntRange{Min: steps, Max: a.cfg.MaxSteps}.Sample(r)
	}
	s, toks := a.build(fmt.Sprintf("s%05d", i), a.prefix, base, steps, r)
	if a.cfg.Subagents == 0 {
		return s
	}
	s.SpawnTurn = 0
	spawn := &s.Turns[0]
	spawn.Pause = 0 // the parent waits for its subagents, not for a tool
	ctx := toks[:len(spawn.Prompt)+len(spawn.Answer)]
	ctxSegs := append(append([]Segment(nil), spawn.Segments...),
		Segment{Role: RoleAssistant, Start: len(spawn.Prompt), End: len(ctx)})
	for j := range a.cfg.Subagents {
		sr := NewRand(deriveSeed(a.cfg.Seed, labelSubagent, uint64(i), uint64(j)))
		sub, _ := a.build(fmt.Sprintf("%s.%d", s.ID, j), ctx, ctxSegs, a.cfg.SubagentSteps, sr)
		s.Subagents = append(s.Subagents, sub)
	}
	return s
}

// build makes a session that starts from the tokens base (cut into segs),
// adds a task and runs steps turns. It also returns the array holding the
// whole conversation.
func (a *Agentic) build(id string, base []uint32, segs []Segment, steps int, r *Rand) (*Session, []uint32) {
	c := &a.cfg
	task := c.TaskTokens.Sample(r)
	answers := make([]int, steps)
	results := make([]int, steps-1)
	pauses := make([]time.Duration, steps-1)
	total := len(base) + task
	for k := range steps {
		answers[k] = c.AnswerTokens.Sample(r)
		total += answers[k]
		if k < steps-1 {
			results[k] = c.ResultTokens.Sample(r)
			pauses[k] = c.ToolPause.Sample(r)
			total += results[k]
		}
	}
	if c.MaxContextTokens > 0 {
		// Keep the turns whose prompt plus answer fit; Validate made sure
		// the first one does.
		n, kept := len(base)+task, 0
		for k := range steps {
			if n+answers[k] > c.MaxContextTokens && k > 0 {
				break
			}
			kept = k + 1
			n += answers[k]
			if k < steps-1 {
				n += results[k]
			}
		}
		if kept < steps {
			steps = kept
			answers, results, pauses = answers[:steps], results[:steps-1], pauses[:steps-1]
			total = len(base) + task
			for k := range steps {
				total += answers[k]
				if k < steps-1 {
					total += results[k]
				}
			}
		}
	}

	// One array holds the whole conversation; every turn's prompt and
	// answer are views of it, capped so that nobody can append over the
	// next turn.
	toks := make([]uint32, total)
	n := copy(toks, base)
	fillTokens(toks[n:], r)
	allSegs := make([]Segment, 0, len(segs)+1+2*steps)
	allSegs = append(allSegs, segs...)
	allSegs = append(allSegs, Segment{Role: RoleUser, Start: n, End: n + task})
	n += task

	s := &Session{ID: id, Turns: make([]Request, steps), SpawnTurn: -1}
	for k := range steps {
		end := n + answers[k]
		s.Turns[k] = Request{
			Session:      id,
			Turn:         k,
			Prompt:       toks[:n:n],
			Segments:     allSegs[:len(allSegs):len(allSegs)],
			SharedPrefix: len(a.prefix),
			OutputTokens: answers[k],
			Answer:       toks[n:end:end],
			Last:         k == steps-1,
		}
		allSegs = append(allSegs, Segment{Role: RoleAssistant, Start: n, End: end})
		n = end
		if k < steps-1 {
			s.Turns[k].Pause = pauses[k]
			allSegs = append(allSegs, Segment{Role: RoleTool, Start: n, End: n + results[k]})
			n += results[k]
		}
	}
	return s, toks
}

// NewDriver returns a closed-loop driver: Sessions sessions start at time
// zero; each turn falls due when the previous answer has arrived and the
// tool's pause has passed; a finished session is replaced at once by the
// next one. A failed request ends its session (a subagent's failure ends
// only the subagent).
func (a *Agentic) NewDriver() Driver {
	d := &agenticDriver{a: a, states: make(map[string]*sessionState)}
	for range a.cfg.Sessions {
		d.startSession(0)
	}
	return d
}

type agenticDriver struct {
	a        *Agentic
	queue    dueQueue
	states   map[string]*sessionState // running sessions and subagents by ID
	started  int                      // sessions started so far
	inflight int
}

type sessionState struct {
	s       *Session
	parent  *sessionState // the session a subagent belongs to
	waiting int           // subagents still running
	sent    *Request      // the turn in flight, if any
}

func (d *agenticDriver) startSession(now time.Duration) {
	c := &d.a.cfg
	if (c.Duration > 0 && now >= c.Duration) || (c.TotalSessions > 0 && d.started >= c.TotalSessions) {
		return
	}
	s := d.a.Session(d.started)
	d.started++
	st := &sessionState{s: s}
	d.states[s.ID] = st
	d.schedule(st, 0, now)
}

// schedule queues turn k of st's session, or ends the session when the turn
// would fall due after the workload's end.
func (d *agenticDriver) schedule(st *sessionState, k int, due time.Duration) {
	if c := &d.a.cfg; c.Duration > 0 && due >= c.Duration {
		d.end(st, due)
		return
	}
	heap.Push(&d.queue, dueItem{due: due, seq: d.queue.next(), req: &st.s.Turns[k], st: st})
}

// end retires a session: a subagent may release its parent's next turn, a
// session makes room for a new one.
func (d *agenticDriver) end(st *sessionState, now time.Duration) {
	delete(d.states, st.s.ID)
	if p := st.parent; p != nil {
		p.waiting--
		if p.waiting == 0 {
			d.schedule(p, p.s.SpawnTurn+1, now)
		}
		return
	}
	d.startSession(now)
}

func (d *agenticDriver) Next(now time.Duration) *Request {
	if len(d.queue.items) == 0 || d.queue.items[0].due > now {
		return nil
	}
	it := heap.Pop(&d.queue).(dueItem)
	it.req.Due = it.due
	it.st.sent = it.req
	d.inflight++
	return it.req
}

func (d *agenticDriver) Wake() (time.Duration, bool) {
	if len(d.queue.items) == 0 {
		return 0, false
	}
	return d.queue.items[0].due, true
}

func (d *agenticDriver) Complete(req *Request, now time.Duration, failed bool) {
	st := d.states[req.Session]
	if st == nil || st.sent != req {
		return // not a request this driver has in flight
	}
	st.sent = nil
	d.inflight--
	switch {
	case failed || req.Turn == len(st.s.Turns)-1:
		d.end(st, now)
	case req.Turn == st.s.SpawnTurn && len(st.s.Subagents) > 0:
		// Count every subagent before scheduling any: one that is cut at
		// once by the deadline must not release the parent early.
		subs := make([]*sessionState, len(st.s.Subagents))
		for j, sub := range st.s.Subagents {
			subs[j] = &sessionState{s: sub, parent: st}
			d.states[sub.ID] = subs[j]
		}
		st.waiting = len(subs)
		for _, sub := range subs {
			d.schedule(sub, 0, now)
		}
	default:
		d.schedule(st, req.Turn+1, now+req.Pause)
	}
}

func (d *agenticDriver) Finished() bool {
	return len(d.queue.items) == 0 && d.inflight == 0
}

// dueQueue orders requests by due time, then by the order they were
// queued, so that equal times come out deterministically.
type dueQueue struct {
	items []dueItem
	seq   uint64
}

type dueItem struct {
	due time.Duration
	seq uint64
	req *Request
	st  *sessionState // nil for a trace
}

func (q *dueQueue) next() uint64 { q.seq++; return q.seq }

func (q *dueQueue) Len() int { return len(q.items) }
func (q *dueQueue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	return a.due < b.due || (a.due == b.due && a.seq < b.seq)
}
func (q *dueQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *dueQueue) Push(x any)    { q.items = append(q.items, x.(dueItem)) }
func (q *dueQueue) Pop() any {
	it := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return it
}
