package api

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/tokenizer"
)

// Traffic is the gateway's memory of recent requests and of the agent
// sessions they belong to, for the console. It is bounded (TrafficLimits)
// and safe for concurrent use.
type Traffic struct {
	limits TrafficLimits

	mu       sync.Mutex
	ring     []RequestRecord // the latest requests; next is the oldest once full
	next     int
	full     bool
	sessions map[string]*sessionState
}

// TrafficLimits bound a Traffic's memory. Zero fields take the defaults.
type TrafficLimits struct {
	// Requests is how many finished requests are kept. Default 4096.
	Requests int
	// Sessions is how many sessions are kept; the least recently active
	// is forgotten first. Default 256.
	Sessions int
	// Turns is how many of each session's latest turns are kept. Default 200.
	Turns int
}

// RequestRecord is one finished request as the gateway saw it.
type RequestRecord struct {
	ID        string
	At        time.Time // when the gateway began to route it (parsed and tokenized)
	SessionID string    // "" when the client sent none
	// ParentSession is the session whose tool call started this one, a
	// subagent's (see subagents.go); "" when none is known.
	ParentSession string
	Client        string // see clientKind
	// Kind tells a turn of the agent's conversation from a side request
	// (a title, a topic check, a quota probe); see requestKind.
	Kind   RequestKind
	Worker string
	Status int // HTTP status the client got (499: it went away)

	PromptTokens int // the engine's count when it reported usage, else ours
	CachedTokens int // prompt tokens the engine served from its prefix cache
	// CacheReported is set when the engine said how many prompt tokens it
	// had cached; without it a turn is never judged to have lost cache.
	CacheReported bool
	OutputTokens  int
	// PredictedOutputTokens is the output length the request was routed
	// with: the client's osl hint, else the gateway's estimate; 0 when
	// there was none.
	PredictedOutputTokens int
	// TTFT is from At to the first token; 0 when none came.
	TTFT time.Duration
	// Hints are the agent hints it was served with, and HintOrigins where
	// each came from: the client, or the gateway's inference.
	Hints       router.Hints
	HintOrigins HintOrigins
}

// RequestKind tells the requests of a session apart.
type RequestKind string

const (
	// KindTurn is a turn of the agent's conversation: its prompt extends
	// the previous turn's.
	KindTurn RequestKind = "turn"
	// KindSide is a request the agent makes beside the conversation (a
	// title, a topic check, a quota probe, a compaction): its prompt is
	// not the conversation's, so it is never compared with the turns.
	KindSide RequestKind = "side"
)

// Causes of a diverged turn.
const (
	// CauseEvicted: the turn ran where the previous one did, but the
	// engine no longer held the prefix the two share.
	CauseEvicted = "evicted"
	// CauseRoutedElsewhere: the turn ran on another worker than the
	// previous one, which did not hold the shared prefix.
	CauseRoutedElsewhere = "routed_elsewhere"
	// CausePromptChanged: the prompt differs from the previous turn's
	// inside the previous turn's prompt (an edited system prompt, a
	// reordered tool list, a rewritten message).
	CausePromptChanged = "prompt_changed"
)

// SessionRecord is one agent session and its latest requests.
type SessionRecord struct {
	ID     string
	Client string
	Worker string // where its last turn ran
	// Parent is the session that started this one as a subagent, when
	// the gateway saw the call (see RequestRecord.ParentSession).
	Parent     string
	LastActive time.Time
	// Turns are the session's requests, turns and side requests, in order
	// of arrival.
	Turns []TurnRecord
}

// TurnRecord is one request of a session.
type TurnRecord struct {
	At           time.Time
	Kind         RequestKind
	Worker       string
	PromptTokens int
	CachedTokens int
	OutputTokens int
	// SharedBlocks is how many leading blocks the prompt shares with the
	// previous turn's: what the engine should have had cached. Side
	// requests and first turns share none.
	SharedBlocks int
	// Diverged is set when a prefix the engine had was lost or changed:
	// the engine served fewer blocks from its cache than the prompt shares
	// with the previous turn (Cause evicted or routed_elsewhere;
	// DivergedBlock is then the first block it did not have), or the
	// prompt differs from the previous turn's inside it (prompt_changed;
	// DivergedBlock is the first differing block). A turn that repeats,
	// extends or cuts short the previous prompt and was served from cache
	// did not diverge.
	Diverged      bool
	DivergedBlock int
	Cause         string
	// ChangedFrom and ChangedTo are the tokens around the first differing
	// block (the block before it, it and the next), in the previous turn's
	// prompt and in this one, when Cause is prompt_changed: what the client
	// rewrote.
	ChangedFrom, ChangedTo []uint32
}

type sessionState struct {
	rec    SessionRecord
	ids    []uint32            // the latest turn's prompt tokens
	hashes []tokenizer.SeqHash // and its blocks
	at     time.Time           // that turn's arrival
	worker string              // and where it ran
	turned bool                // whether a turn was recorded yet
}

// NewTraffic returns an empty record.
func NewTraffic(l TrafficLimits) *Traffic {
	if l.Requests <= 0 {
		l.Requests = 4096
	}
	if l.Sessions <= 0 {
		l.Sessions = 256
	}
	if l.Turns <= 0 {
		l.Turns = 200
	}
	return &Traffic{limits: l, ring: make([]RequestRecord, 0, min(l.Requests, 256)), sessions: make(map[string]*sessionState)}
}

// Record adds a finished request. ids are its prompt's tokens and hashes
// their block hashes; they place the request in its session's history. The
// record keeps its own copy of the latest turn's (tens of kilobytes per
// session for an agent's context), to show what a rewritten prompt changed.
func (t *Traffic) Record(r RequestRecord, ids []uint32, hashes []tokenizer.SeqHash, ended time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.ring) < t.limits.Requests {
		t.ring = append(t.ring, r)
	} else {
		t.ring[t.next] = r
		t.next = (t.next + 1) % t.limits.Requests
		t.full = true
	}
	if r.SessionID == "" {
		return
	}
	s, ok := t.sessions[r.SessionID]
	if !ok {
		if len(t.sessions) >= t.limits.Sessions {
			t.forgetIdlest()
		}
		s = &sessionState{rec: SessionRecord{ID: r.SessionID}}
		t.sessions[r.SessionID] = s
	}
	turn := TurnRecord{
		At: r.At, Kind: cmp.Or(r.Kind, KindTurn), Worker: r.Worker,
		PromptTokens: r.PromptTokens, CachedTokens: r.CachedTokens, OutputTokens: r.OutputTokens,
	}
	// A turn is compared with the latest turn that arrived before it; one
	// that finished after a later turn was recorded is only listed.
	if turn.Kind == KindTurn && (!s.turned || !r.At.Before(s.at)) {
		if s.turned {
			compareTurns(&turn, s.hashes, s.worker, hashes, r.CacheReported, tokenizer.DefaultBlockSize)
			if turn.Cause == CausePromptChanged {
				turn.ChangedFrom = around(s.ids, turn.DivergedBlock, tokenizer.DefaultBlockSize)
				turn.ChangedTo = around(ids, turn.DivergedBlock, tokenizer.DefaultBlockSize)
			}
		}
		s.ids = append(s.ids[:0], ids...)
		s.hashes = append(s.hashes[:0], hashes...)
		s.at, s.worker, s.turned = r.At, r.Worker, true
		s.rec.Worker = r.Worker
	}
	if len(s.rec.Turns) >= t.limits.Turns {
		s.rec.Turns = slices.Delete(s.rec.Turns, 0, len(s.rec.Turns)-t.limits.Turns+1)
	}
	// Requests finish out of order (a side request outlives the turn sent
	// after it): keep them in order of arrival.
	i, _ := slices.BinarySearchFunc(s.rec.Turns, r.At, func(e TurnRecord, at time.Time) int {
		if e.At.After(at) {
			return 1
		}
		return -1
	})
	s.rec.Turns = slices.Insert(s.rec.Turns, i, turn)
	s.rec.Client = r.Client
	if r.ParentSession != "" {
		s.rec.Parent = r.ParentSession
	}
	if s.rec.Worker == "" {
		s.rec.Worker = r.Worker
	}
	if ended.After(s.rec.LastActive) {
		s.rec.LastActive = ended
	}
}

// forgetIdlest drops the least recently active session.
func (t *Traffic) forgetIdlest() {
	var idlest string
	var at time.Time
	for id, s := range t.sessions {
		if idlest == "" || s.rec.LastActive.Before(at) {
			idlest, at = id, s.rec.LastActive
		}
	}
	delete(t.sessions, idlest)
}

// compareTurns judges a turn against the previous turn of its session,
// whose prompt blocks were prev and which ran on prevWorker. Block hashes
// are chained, so the shared prefix ends at the first differing index.
// Cache loss is judged only when the engine reported its cached tokens,
// and only a whole block short counts: an engine recomputes the last
// token of a fully cached prompt.
func compareTurns(turn *TurnRecord, prev []tokenizer.SeqHash, prevWorker string, cur []tokenizer.SeqHash, cacheReported bool, block int) {
	shared := 0
	for shared < min(len(prev), len(cur)) && prev[shared] == cur[shared] {
		shared++
	}
	turn.SharedBlocks = shared
	if cacheReported && turn.CachedTokens+block <= shared*block {
		turn.Diverged, turn.DivergedBlock = true, turn.CachedTokens/block
		turn.Cause = CauseEvicted
		if turn.Worker != prevWorker {
			turn.Cause = CauseRoutedElsewhere
		}
		return
	}
	if shared < len(prev) && shared < len(cur) {
		turn.Diverged, turn.DivergedBlock, turn.Cause = true, shared, CausePromptChanged
	}
}

// around copies the tokens of the block before block n, block n and the
// block after it, as far as ids reach.
func around(ids []uint32, n, block int) []uint32 {
	from, to := min(max(n-1, 0)*block, len(ids)), min((n+2)*block, len(ids))
	return slices.Clone(ids[from:to])
}

// RequestsSince returns the kept requests that arrived at or after since,
// oldest first.
func (t *Traffic) RequestsSince(since time.Time) []RequestRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []RequestRecord
	add := func(rs []RequestRecord) {
		for _, r := range rs {
			if !r.At.Before(since) {
				out = append(out, r)
			}
		}
	}
	if t.full {
		add(t.ring[t.next:])
		add(t.ring[:t.next])
	} else {
		add(t.ring)
	}
	return out
}

// Sessions returns copies of the kept sessions, most recently active first.
func (t *Traffic) Sessions() []SessionRecord {
	t.mu.Lock()
	out := make([]SessionRecord, 0, len(t.sessions))
	for _, s := range t.sessions {
		r := s.rec
		r.Turns = slices.Clone(r.Turns)
		out = append(out, r)
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b SessionRecord) int {
		if c := b.LastActive.Compare(a.LastActive); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// clientKind names the coding agent that sent a request from the headers
// each one sends; any other client is named by its user agent's product,
// or "other".
func clientKind(c *fiber.Ctx) string {
	ua := c.Get(fiber.HeaderUserAgent)
	return clientFromHeaders(ua, c.Get("x-claude-code-session-id") != "" || c.Get("x-app") == "cli", c.Get("originator"))
}

func clientFromHeaders(userAgent string, claudeHeaders bool, originator string) string {
	switch {
	case claudeHeaders || strings.HasPrefix(userAgent, "claude-cli/"):
		return "claude-code"
	case strings.HasPrefix(originator, "codex") || strings.HasPrefix(userAgent, "codex"):
		return "codex"
	case strings.HasPrefix(userAgent, "opencode/"):
		return "opencode"
	}
	product, _, _ := strings.Cut(userAgent, " ")
	product, _, _ = strings.Cut(product, "/")
	if product == "" || len(product) > 40 {
		return "other"
	}
	return strings.Clone(product) // fiber's strings point into a reused buffer
}
