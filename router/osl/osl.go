package osl

import (
	"container/list"
	"math"
	"sync"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// Kind is the kind of an answer.
type Kind uint8

// Kinds of answer.
const (
	ToolCall Kind = iota // a turn whose answer calls a tool
	Final                // a turn whose answer is the final answer (no tool call)
	Side                 // a side request's answer
	numKinds
)

// String names the kind as the request log and the console show it.
func (k Kind) String() string {
	switch k {
	case ToolCall:
		return "tool_call"
	case Final:
		return "final"
	case Side:
		return "side"
	}
	return "unknown"
}

// Source says where an estimate came from.
type Source uint8

// Sources of an estimate, most specific first.
const (
	SourceNone    Source = iota // nothing learned yet: Tokens is 0
	SourceSession               // the session's own answers (shrunk towards its client's)
	SourceClient                // the client's answers of that kind
	SourceGlobal                // every client's answers
)

// String names the source.
func (s Source) String() string {
	switch s {
	case SourceSession:
		return "session"
	case SourceClient:
		return "client"
	case SourceGlobal:
		return "global"
	}
	return "none"
}

// Call is what is visible of a request before its answer.
type Call struct {
	Client  string // the client kind ("claude-code", "codex", "opencode", …); "" unknown
	Session string // the session id; "" none
	Side    bool   // a side request, not a turn of the conversation
	// AfterTool says the prompt ends with a tool result; Tool names that
	// tool when the conversation shows it.
	AfterTool bool
	Tool      string
}

// WarmTurns is how many turns of a session the estimator must have learned
// from before its predictions count as warm: the error goal is set on
// those (Estimate.SessionTurns ≥ WarmTurns).
const WarmTurns = 3

// Estimate is a prediction of a request's output.
type Estimate struct {
	Tokens int    // expected output tokens; 0 when nothing is known
	Kind   Kind   // the kind of answer expected
	Source Source // where Tokens came from
	// SessionTurns is how many turns of the session the estimator had
	// learned from before this prediction.
	SessionTurns int
}

// Config bounds and tunes an Estimator. Zero fields take the defaults.
type Config struct {
	MaxSessions int           // sessions remembered; default 4096
	IdleTTL     time.Duration // a session idle this long is forgotten; default 1 h
	MaxClients  int           // clients with estimates of their own; default 64
	MaxContexts int           // contexts (tool names) per client for the kind; default 256
	Alpha       float64       // weight of a new answer in the running means; default 0.3
}

func (c Config) withDefaults() Config {
	if c.MaxSessions <= 0 {
		c.MaxSessions = 4096
	}
	if c.IdleTTL <= 0 {
		c.IdleTTL = time.Hour
	}
	if c.MaxClients <= 0 {
		c.MaxClients = 64
	}
	if c.MaxContexts <= 0 {
		c.MaxContexts = 256
	}
	if !(c.Alpha > 0 && c.Alpha <= 1) {
		c.Alpha = 0.3
	}
	return c
}

// mean is an exponentially weighted mean of log(tokens).
type mean struct {
	log float64
	n   int
}

func (m *mean) add(logTokens, alpha float64) {
	if m.n == 0 {
		m.log = logTokens
	} else {
		m.log += alpha * (logTokens - m.log)
	}
	m.n++
}

// means holds one running mean per kind.
type means [numKinds]mean

// lookup returns the mean of kind k, or for a turn whose kind has none
// yet, the other turn kind's: a turn is more like another turn than like
// nothing.
func (ms *means) lookup(k Kind) (mean, bool) {
	if ms[k].n > 0 {
		return ms[k], true
	}
	if k != Side {
		if o := ms[ToolCall+Final-k]; o.n > 0 {
			return o, true
		}
	}
	return mean{}, false
}

// sessionState is what the estimator remembers of one session.
type sessionState struct {
	id       string
	means    means
	turns    int
	lastSeen time.Time
}

// ctxKey is what precedes a turn's answer.
type ctxKey struct {
	afterTool bool
	tool      string
}

// outcomes counts the answers that called a tool and those that did not.
type outcomes struct{ tool, final uint32 }

func (o *outcomes) add(k Kind) {
	if k == Final {
		o.final++
	} else {
		o.tool++
	}
	if o.tool+o.final > 64 {
		o.tool, o.final = o.tool/2, o.final/2
	}
}

type clientState struct {
	means    means
	contexts map[ctxKey]*outcomes
}

// pooledClient is the entry of clients beyond Config.MaxClients.
const pooledClient = "\x00other"

// Clock tells the estimator the time, for idle sessions; clock.Real and
// the router's clock satisfy it.
type Clock interface{ Now() time.Time }

// Estimator learns output lengths. It is safe for concurrent use.
type Estimator struct {
	cfg   Config
	clock Clock

	mu       sync.Mutex
	sessions map[string]*list.Element // of *sessionState
	lru      list.List                // front: most recently used
	clients  map[string]*clientState
	global   means
}

// New returns an empty estimator. c is its clock (nil: the real one).
func New(cfg Config, c Clock) *Estimator {
	cfg = cfg.withDefaults()
	if c == nil {
		c = clock.Real{}
	}
	return &Estimator{
		cfg: cfg, clock: c,
		sessions: make(map[string]*list.Element),
		clients:  make(map[string]*clientState),
	}
}

// Sessions returns how many sessions the estimator remembers.
func (e *Estimator) Sessions() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.sessions)
}

// Predict estimates the output of call.
func (e *Estimator) Predict(call Call) Estimate {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	e.expireLocked(now)
	cs := e.clients[e.clientKeyLocked(call.Client, false)]
	est := Estimate{Kind: e.kindLocked(cs, call)}

	prior, src := mean{}, SourceNone
	if cs != nil {
		if m, ok := cs.means.lookup(est.Kind); ok {
			prior, src = m, SourceClient
		}
	}
	if src == SourceNone {
		if m, ok := e.global.lookup(est.Kind); ok {
			prior, src = m, SourceGlobal
		}
	}
	logTokens := prior.log
	if s := e.sessionLocked(call.Session, now, false); s != nil {
		est.SessionTurns = s.turns
		if m, ok := s.means.lookup(est.Kind); ok {
			if src == SourceNone {
				logTokens = m.log
			} else {
				n := float64(m.n)
				logTokens = (n*m.log + prior.log) / (n + 1)
			}
			src = SourceSession
		}
	}
	if src == SourceNone {
		return est
	}
	est.Source = src
	est.Tokens = max(int(math.Round(math.Exp(logTokens))), 1)
	return est
}

// Observe learns from a finished request: call as it was predicted, the
// kind its answer turned out to be and its output tokens. An answer of no
// tokens teaches nothing (a request that failed or was cut off).
func (e *Estimator) Observe(call Call, kind Kind, tokens int) {
	if tokens <= 0 || kind >= numKinds {
		return
	}
	if call.Side {
		kind = Side
	}
	lt := math.Log(float64(tokens))
	a := e.cfg.Alpha
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	e.expireLocked(now)
	e.global[kind].add(lt, a)
	cs := e.clients[e.clientKeyLocked(call.Client, true)]
	cs.means[kind].add(lt, a)
	if kind != Side {
		o := e.outcomesLocked(cs, call, true)
		o.add(kind)
		if call.Tool != "" {
			// The context without a tool name learns every tool's outcome:
			// the fallback for a tool seen for the first time.
			if base := e.outcomesLocked(cs, Call{AfterTool: call.AfterTool}, true); base != o {
				base.add(kind)
			}
		}
	}
	if s := e.sessionLocked(call.Session, now, true); s != nil {
		s.means[kind].add(lt, a)
		if kind != Side {
			s.turns++
		}
	}
}

// kindLocked predicts the kind of call's answer.
func (e *Estimator) kindLocked(cs *clientState, call Call) Kind {
	if call.Side {
		return Side
	}
	if cs == nil {
		return ToolCall
	}
	o := e.outcomesLocked(cs, call, false)
	if o == nil || o.tool+o.final == 0 {
		o = cs.contexts[ctxKey{afterTool: call.AfterTool}]
	}
	if o != nil && o.final > o.tool {
		return Final
	}
	return ToolCall
}

// outcomesLocked returns the counts of call's context for cs, made when
// create is set; contexts beyond MaxContexts share their tool-less entry.
func (e *Estimator) outcomesLocked(cs *clientState, call Call, create bool) *outcomes {
	k := ctxKey{afterTool: call.AfterTool, tool: call.Tool}
	if o := cs.contexts[k]; o != nil || !create {
		return o
	}
	if len(cs.contexts) >= e.cfg.MaxContexts {
		k.tool = ""
	}
	o := cs.contexts[k]
	if o == nil {
		o = &outcomes{}
		cs.contexts[k] = o
	}
	return o
}

// clientKeyLocked returns the key of client's entry, made when create is
// set; clients beyond MaxClients share one.
func (e *Estimator) clientKeyLocked(client string, create bool) string {
	if _, ok := e.clients[client]; ok || !create {
		return client
	}
	if len(e.clients) >= e.cfg.MaxClients-1 {
		client = pooledClient
		if _, ok := e.clients[client]; ok {
			return client
		}
	}
	e.clients[client] = &clientState{contexts: make(map[ctxKey]*outcomes)}
	return client
}

// sessionLocked returns the session id's state, marking it used; made
// when create is set, evicting the least recently used beyond MaxSessions.
func (e *Estimator) sessionLocked(id string, now time.Time, create bool) *sessionState {
	if id == "" {
		return nil
	}
	if el, ok := e.sessions[id]; ok {
		s := el.Value.(*sessionState)
		s.lastSeen = now
		e.lru.MoveToFront(el)
		return s
	}
	if !create {
		return nil
	}
	for len(e.sessions) >= e.cfg.MaxSessions {
		e.dropLocked(e.lru.Back())
	}
	s := &sessionState{id: id, lastSeen: now}
	e.sessions[id] = e.lru.PushFront(s)
	return s
}

// expireLocked forgets sessions idle for IdleTTL: they sit at the back.
func (e *Estimator) expireLocked(now time.Time) {
	for el := e.lru.Back(); el != nil; el = e.lru.Back() {
		if now.Sub(el.Value.(*sessionState).lastSeen) < e.cfg.IdleTTL {
			return
		}
		e.dropLocked(el)
	}
}

func (e *Estimator) dropLocked(el *list.Element) {
	delete(e.sessions, el.Value.(*sessionState).id)
	e.lru.Remove(el)
}
