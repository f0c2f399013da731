package bench

import (
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	// Ramp spreads the starts of the first Sessions sessions evenly over
	// this time, session i at i*Ramp/Sessions, as people start their
	// agents one after another; later sessions start when one ends.
	// Default 0: all start at time zero, their first prompts together.
	Ramp time.Duration
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
	// Compaction, when set, makes a session compact its history instead of
	// ending when its next turn would not fit MaxContextTokens, as the
	// coding-agent clients do (see Compaction). With MaxContextTokens zero
	// it never triggers; RunAgentic sets MaxContextTokens to the simulated
	// engines' max_model_len when it is zero.
	Compaction *Compaction
	// SideRequests are requests a client sends beside its loop when a
	// session starts (OpenCode's title request): each falls due with the
	// session's first turn and nothing waits for it.
	SideRequests []SideRequest
	// Client names the client the workload imitates (a client preset), ""
	// for none; reports show it.
	Client string
}

// Compaction is how a session summarises its history when the next turn
// would not fit the context: a summarisation turn, whose prompt is the
// history so far (cut at its end where it would not fit with the
// instruction and the summary) followed by the client's instruction to
// summarise, and whose answer is the summary; the turn that did not fit
// then runs on a short history, the shared prefix followed by the summary,
// and the session goes on from there.
type Compaction struct {
	// InstructionTokens is the length of the instruction to summarise,
	// the same text in every session.
	InstructionTokens int `json:"instruction_tokens"`
	// SummaryTokens is the length of the summary, the summarisation turn's
	// answer.
	SummaryTokens IntRange `json:"summary_tokens"`
	// AboveTokens, when set, is where the client compacts: after a turn
	// whose context (its prompt and answer, and the tool result after it)
	// passes it, as Claude Code does at the threshold its settings give
	// (agentclient.ClaudeCodeCompactThreshold). A turn that would not fit the
	// context below that threshold is sent anyway, as the client sends it,
	// and the engine refuses it: a context error that ends the session.
	// 0: the session compacts when its next turn would not fit.
	AboveTokens int `json:"above_tokens,omitempty"`
}

// SideRequest is a one-turn request a client sends beside its loop when a
// session starts: its own system prompt (the same in every session) and
// the session's task, then a short answer.
type SideRequest struct {
	// Name names it in the request's session id ("s00012.title").
	Name string `json:"name"`
	// PrefixTokens is the length of its system prompt.
	PrefixTokens int `json:"prefix_tokens"`
	// AnswerTokens is the length of its answer.
	AnswerTokens IntRange `json:"answer_tokens"`
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
	check(c.Compaction == nil || c.Subagents == 0, "compaction does not go with subagents")
	if cp := c.Compaction; cp != nil {
		check(cp.InstructionTokens >= 1 && cp.InstructionTokens <= maxTokens, "compaction instruction tokens %d out of [1, %d]", cp.InstructionTokens, maxTokens)
		if err := cp.SummaryTokens.validate("summary tokens", 1); err != nil {
			errs = append(errs, err)
		}
		if short := c.PrefixTokens + cp.InstructionTokens + cp.SummaryTokens.Max + c.AnswerTokens.Max; c.MaxContextTokens > 0 && short > c.MaxContextTokens {
			errs = append(errs, fmt.Errorf("a compaction and the history it leaves, up to %d tokens, do not fit max context tokens %d", short, c.MaxContextTokens))
		}
	}
	for _, sr := range c.SideRequests {
		check(sr.Name != "" && !strings.ContainsAny(sr.Name, "./"), "side request name %q is empty or has a dot or slash", sr.Name)
		check(sr.PrefixTokens >= 0 && sr.PrefixTokens <= maxTokens, "side request %s prefix tokens %d out of [0, %d]", sr.Name, sr.PrefixTokens, maxTokens)
		if err := sr.AnswerTokens.validate("side request answer tokens", 1); err != nil {
			errs = append(errs, err)
		}
	}
	check(c.Sessions >= 1 && c.Sessions <= 1_000_000, "sessions %d out of [1, 1000000]", c.Sessions)
	check(c.Duration >= 0, "duration %v is negative", c.Duration)
	check(c.Ramp >= 0 && (c.Duration == 0 || c.Ramp < c.Duration), "ramp %v is negative or not shorter than the duration %v", c.Ramp, c.Duration)
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
		Kind          string        `json:"kind"`
		Seed          uint64        `json:"seed"`
		PrefixTokens  int           `json:"prefix_tokens"`
		TaskTokens    IntRange      `json:"task_tokens"`
		Steps         int           `json:"steps"`
		MaxSteps      int           `json:"max_steps,omitempty"`
		MaxContext    int           `json:"max_context_tokens,omitempty"`
		AnswerTokens  IntRange      `json:"answer_tokens"`
		ResultTokens  IntRange      `json:"result_tokens"`
		ToolPause     DurationDist  `json:"tool_pause"`
		Sessions      int           `json:"sessions"`
		Ramp          string        `json:"ramp,omitempty"`
		Duration      string        `json:"duration"`
		TotalSessions int           `json:"total_sessions"`
		Subagents     int           `json:"subagents"`
		SubagentSteps int           `json:"subagent_steps"`
		Client        string        `json:"client,omitempty"`
		Compaction    *Compaction   `json:"compaction,omitempty"`
		SideRequests  []SideRequest `json:"side_requests,omitempty"`
	}{"agentic", c.Seed, c.PrefixTokens, c.TaskTokens, c.Steps, c.MaxSteps, c.MaxContextTokens, c.AnswerTokens, c.ResultTokens,
		c.ToolPause, c.Sessions, rampString(c.Ramp), c.Duration.String(), c.TotalSessions, c.Subagents, c.SubagentSteps,
		c.Client, c.Compaction, c.SideRequests})
}

// rampString is the ramp as the JSON report writes it: empty when the
// sessions start together, so that reports of such runs stay as they were.
func rampString(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// Agentic is the agentic workload. Sessions are made on demand from the
// seed and their index alone, so any runner, in any order, sees the same
// sessions. It is immutable and safe for concurrent use.
type Agentic struct {
	cfg    AgenticConfig
	prefix []uint32
	// instruction is the compaction instruction, the same in every
	// session; sidePrefixes the side requests' system prompts.
	instruction  []uint32
	sidePrefixes [][]uint32
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
	a := &Agentic{cfg: cfg, prefix: prefix}
	if cp := cfg.Compaction; cp != nil {
		a.instruction = make([]uint32, cp.InstructionTokens)
		fillTokens(a.instruction, NewRand(deriveSeed(cfg.Seed, labelInstruction)))
	}
	for j, sr := range cfg.SideRequests {
		p := make([]uint32, sr.PrefixTokens)
		fillTokens(p, NewRand(deriveSeed(cfg.Seed, labelSidePrefix, uint64(j))))
		a.sidePrefixes = append(a.sidePrefixes, p)
	}
	return a, nil
}

// Labels that keep the random streams of a workload's parts apart.
const (
	labelPrefix uint64 = iota + 1
	labelSession
	labelSubagent
	labelBlock
	labelInstruction
	labelCompaction
	labelSidePrefix
	labelSide
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
// prompt is an exact prefix of the next, except around a compaction: the
// summarisation turn (Request.Compaction) asks for a summary of the
// history, and the turn after it starts a short history of the shared
// prefix and that summary.
type Session struct {
	ID    string
	Turns []Request
	// Subagents are spawned by the answer of turn SpawnTurn; the next turn
	// waits for all of them. Nil for a subagent and when none are
	// configured.
	Subagents []*Session
	SpawnTurn int
	// Side are the one-turn side requests sent with the first turn
	// (AgenticConfig.SideRequests); nothing waits for them.
	Side []*Session
}

// Compactions counts the session's summarisation turns.
func (s *Session) Compactions() int {
	n := 0
	for i := range s.Turns {
		if s.Turns[i].Compaction {
			n++
		}
	}
	return n
}

// Session returns session i (0-based) of the workload, with its subagents.
func (a *Agentic) Session(i int) *Session {
	r := NewRand(deriveSeed(a.cfg.Seed, labelSession, uint64(i)))
	base := []Segment{{Role: RoleSystem, Start: 0, End: len(a.prefix)}}
	steps := a.cfg.Steps
	if a.cfg.MaxSteps > steps {
		steps = IntRange{Min: steps, Max: a.cfg.MaxSteps}.Sample(r)
	}
	id := fmt.Sprintf("s%05d", i)
	var s *Session
	var toks, task []uint32
	if a.cfg.Compaction != nil && a.cfg.MaxContextTokens > 0 {
		s, task = a.buildCompacting(id, steps, r, NewRand(deriveSeed(a.cfg.Seed, labelCompaction, uint64(i))))
	} else {
		s, toks = a.build(id, a.prefix, base, steps, r)
		task = toks[len(a.prefix):s.Turns[0].Segments[1].End]
	}
	for j, sr := range a.cfg.SideRequests {
		s.Side = append(s.Side, a.side(s.ID, sr, a.sidePrefixes[j], task, NewRand(deriveSeed(a.cfg.Seed, labelSide, uint64(i), uint64(j)))))
	}
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

// side makes a session's side request: its own system prompt, then the
// session's task, then a short answer.
func (a *Agentic) side(parent string, sr SideRequest, prefix, task []uint32, r *Rand) *Session {
	answer := sr.AnswerTokens.Sample(r)
	toks := make([]uint32, 0, len(prefix)+len(task)+answer)
	toks = append(append(toks, prefix...), task...)
	n := len(toks)
	toks = appendTokens(toks, answer, r)
	id := parent + "." + sr.Name
	return &Session{ID: id, SpawnTurn: -1, Turns: []Request{{
		Session: id, Prompt: toks[:n:n], SharedPrefix: len(prefix), OutputTokens: answer, Answer: toks[n:], Last: true, Side: true,
		Segments: []Segment{{Role: RoleSystem, Start: 0, End: len(prefix)}, {Role: RoleUser, Start: len(prefix), End: n}},
	}}}
}

// appendTokens appends n tokens drawn from r to toks.
func appendTokens(toks []uint32, n int, r *Rand) []uint32 {
	l := len(toks)
	toks = append(toks, make([]uint32, n)...)
	fillTokens(toks[l:], r)
	return toks
}

// draw draws a session's task, answer, tool result and pause lengths for
// steps turns, in the order every session has drawn them.
func (a *Agentic) draw(steps int, r *Rand) (task int, answers, results []int, pauses []time.Duration) {
	c := &a.cfg
	task = c.TaskTokens.Sample(r)
	answers = make([]int, steps)
	results = make([]int, steps-1)
	pauses = make([]time.Duration, steps-1)
	for k := range steps {
		answers[k] = c.AnswerTokens.Sample(r)
		if k < steps-1 {
			results[k] = c.ResultTokens.Sample(r)
			pauses[k] = c.ToolPause.Sample(r)
		}
	}
	return task, answers, results, pauses
}

// build makes a session that starts from the tokens base (cut into segs),
// adds a task and runs steps turns. It also returns the array holding the
// whole conversation.
func (a *Agentic) build(id string, base []uint32, segs []Segment, steps int, r *Rand) (*Session, []uint32) {
	c := &a.cfg
	task, answers, results, pauses := a.draw(steps, r)
	total := len(base) + task
	for k := range steps {
		total += answers[k]
		if k < steps-1 {
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

// buildCompacting makes a session of steps loop turns that compacts its
// history whenever the next turn's prompt plus answer would not fit
// MaxContextTokens (see Compaction). It ends early only when a turn does
// not fit even right after a compaction. The lengths and tokens of the
// loop come from r as in build, those of the summaries from cr. It also
// returns the session's task tokens.
func (a *Agentic) buildCompacting(id string, steps int, r, cr *Rand) (*Session, []uint32) {
	c := &a.cfg
	limit := c.MaxContextTokens
	task, answers, results, pauses := a.draw(steps, r)
	p := len(a.prefix)
	// hist is the history the next turn's prompt is, and grows by
	// appending only: every prompt and answer is a capped view of it (or
	// of the array an append moved it from), so none sees a later token.
	hist := append(make([]uint32, 0, p+task+answers[0]), a.prefix...)
	hist = appendTokens(hist, task, r)
	taskToks := hist[p:len(hist):len(hist)]
	segs := []Segment{{Role: RoleSystem, Start: 0, End: p}, {Role: RoleUser, Start: p, End: p + task}}
	s := &Session{ID: id, SpawnTurn: -1}
	justCompacted := false
	for k := range steps {
		over := len(hist)+answers[k] > limit
		compact := over
		if th := c.Compaction.AboveTokens; th > 0 {
			compact = k > 0 && len(hist) > th // a first prompt has nothing to summarise
		}
		if over && !compact && k > 0 {
			// The client does not compact yet and sends what the engine
			// refuses: the session ends in a context error.
			s.Turns = append(s.Turns, Request{
				Session: id, Turn: len(s.Turns), Prompt: hist[:len(hist):len(hist)], Segments: segs[:len(segs):len(segs)],
				SharedPrefix: p, OutputTokens: answers[k], Answer: appendTokens(nil, answers[k], r),
			})
			break
		}
		if compact {
			if justCompacted || k == 0 {
				break // not even a short history leaves room for this turn
			}
			summary := c.Compaction.SummaryTokens.Sample(cr)
			m := min(len(hist), limit-len(a.instruction)-summary)
			prompt := make([]uint32, m+len(a.instruction))
			copy(prompt, hist[:m])
			copy(prompt[m:], a.instruction)
			psegs := clipSegments(segs, m)
			psegs = append(psegs, Segment{Role: RoleUser, Start: m, End: len(prompt)})
			ans := appendTokens(nil, summary, cr)
			s.Turns = append(s.Turns, Request{
				Session: id, Turn: len(s.Turns), Prompt: prompt, Segments: psegs, SharedPrefix: p,
				OutputTokens: summary, Answer: ans, Compaction: true,
			})
			hist = append(append(make([]uint32, 0, p+summary+answers[k]), a.prefix...), ans...)
			segs = []Segment{{Role: RoleSystem, Start: 0, End: p}, {Role: RoleUser, Start: p, End: len(hist)}}
			justCompacted = true
			if len(hist)+answers[k] > limit {
				break
			}
		}
		if len(hist)+answers[k] > limit {
			break // the first turn alone does not fit
		}
		justCompacted = false
		n := len(hist)
		hist = appendTokens(hist, answers[k], r)
		end := len(hist)
		s.Turns = append(s.Turns, Request{
			Session: id, Turn: len(s.Turns), Prompt: hist[:n:n], Segments: segs[:len(segs):len(segs)],
			SharedPrefix: p, OutputTokens: answers[k], Answer: hist[n:end:end],
		})
		segs = append(segs, Segment{Role: RoleAssistant, Start: n, End: end})
		if k < steps-1 {
			s.Turns[len(s.Turns)-1].Pause = pauses[k]
			hist = appendTokens(hist, results[k], r)
			segs = append(segs, Segment{Role: RoleTool, Start: end, End: len(hist)})
		}
	}
	// A session cut short ends with its last turn that ran; a compaction
	// that no turn followed is dropped with it.
	for len(s.Turns) > 0 && s.Turns[len(s.Turns)-1].Compaction {
		s.Turns = s.Turns[:len(s.Turns)-1]
	}
	last := &s.Turns[len(s.Turns)-1]
	last.Last, last.Pause = true, 0
	return s, taskToks
}

// clipSegments returns the segments covering the first m tokens, the last
// one cut at m.
func clipSegments(segs []Segment, m int) []Segment {
	out := make([]Segment, 0, len(segs)+1)
	for _, sg := range segs {
		if sg.Start >= m {
			break
		}
		sg.End = min(sg.End, m)
		out = append(out, sg)
	}
	return out
}

// NewDriver returns a closed-loop driver: Sessions sessions start at time
// zero, or spread over Ramp; each turn falls due when the previous answer
// has arrived and the tool's pause has passed; a finished session is
// replaced at once by the next one. A failed request ends its session (a
// subagent's failure ends only the subagent).
func (a *Agentic) NewDriver() Driver {
	d := &agenticDriver{a: a, states: make(map[string]*sessionState)}
	for i := range a.cfg.Sessions {
		d.startSession(a.cfg.Ramp * time.Duration(i) / time.Duration(a.cfg.Sessions))
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
	side    bool          // a side request: nothing waits for it
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
	for _, side := range s.Side {
		sst := &sessionState{s: side, side: true}
		d.states[side.ID] = sst
		d.schedule(sst, 0, now)
	}
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
	if st.side {
		return
	}
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
