package api

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

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
	Client    string    // see clientKind
	Worker    string
	Status    int // HTTP status the client got (499: it went away)

	PromptTokens int // the engine's count when it reported usage, else ours
	CachedTokens int // prompt tokens the engine served from its prefix cache
	OutputTokens int
	// TTFT is from At to the first token; 0 when none came.
	TTFT time.Duration
}

// SessionRecord is one agent session and its latest turns.
type SessionRecord struct {
	ID         string
	Client     string
	Worker     string // where its last turn ran
	LastActive time.Time
	Turns      []TurnRecord // oldest first
}

// TurnRecord is one request of a session.
type TurnRecord struct {
	At           time.Time
	PromptTokens int
	CachedTokens int
	OutputTokens int
	// Diverged is set when the prompt does not extend the previous turn's:
	// DivergedBlock is the first full block whose hash differs from the
	// previous prompt's, or the previous prompt's block count when this
	// prompt is a shorter prefix of it.
	Diverged      bool
	DivergedBlock int
}

type sessionState struct {
	rec    SessionRecord
	hashes []tokenizer.SeqHash // the last turn's prompt blocks
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

// Record adds a finished request. hashes are its prompt's block hashes;
// they place the request in its session's history. The record keeps its
// own copy of hashes.
func (t *Traffic) Record(r RequestRecord, hashes []tokenizer.SeqHash, ended time.Time) {
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
	turn := TurnRecord{At: r.At, PromptTokens: r.PromptTokens, CachedTokens: r.CachedTokens, OutputTokens: r.OutputTokens}
	if ok {
		turn.DivergedBlock, turn.Diverged = divergence(s.hashes, hashes)
	}
	s.hashes = append(s.hashes[:0], hashes...)
	if len(s.rec.Turns) >= t.limits.Turns {
		s.rec.Turns = slices.Delete(s.rec.Turns, 0, len(s.rec.Turns)-t.limits.Turns+1)
	}
	s.rec.Turns = append(s.rec.Turns, turn)
	s.rec.Client, s.rec.Worker = r.Client, r.Worker
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

// divergence compares a prompt's block hashes with the previous turn's. A
// prompt that repeats or extends the previous one does not diverge. Block
// hashes are chained, so the first differing index is where the prompts
// part.
func divergence(prev, cur []tokenizer.SeqHash) (block int, diverged bool) {
	n := min(len(prev), len(cur))
	for i := range n {
		if prev[i] != cur[i] {
			return i, true
		}
	}
	if len(cur) < len(prev) {
		return len(cur), true
	}
	return 0, false
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
