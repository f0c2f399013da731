package catalog

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
)

// The layout hearth up serves coding agents with unless told otherwise:
// a rule in closed form over what the planner computes of each candidate,
// so that a start does not pay the simulation RecommendLayout ranks. The
// evaluation backs the rule: on every GPU set docs/perf.md measures
// (2x4090, 4x4090, a 4090 with a 3090, one 4090) the layout the
// evaluation recommends for each client is the one the rule picks, and
// bench's TestDefaultAgentLayoutIsTheEvaluated holds the two together on
// one 4090's evaluation (TestDefaultAgentLayoutPicksTheEvaluatedLayouts
// here, on the recommendations docs/perf.md records). What the rule follows from: an agent's turns re-send
// their whole history, so what decides its time is how many sessions'
// histories the KV caches keep at once (KV cache not held is prefilled
// again) and how often a session compacts (each compaction prefills its
// whole history once more and starts the next turn from scratch); the
// tensor-parallel step costs less than either on the boards measured.

// AgentLayoutChoice is the layout DefaultAgentLayout picks and why.
type AgentLayoutChoice struct {
	Candidate Candidate
	// Reason says in one line why ("for coding agents, a 131,072-token
	// context per session and …"): its context, the sessions its KV
	// caches hold at once, and one engine per GPU's.
	Reason string
	// PerGPU is the one-engine-per-GPU layout with the model's KV dtype
	// (the layout --layout per-gpu keeps), when it fits; zero otherwise.
	PerGPU Candidate
	// Shortfall, when not empty, says that no layout gives Client's
	// sessions the room they need (its first prompt and an agent turn),
	// and what would: a smaller model, FP8 KV, another GPU. Candidate is
	// then the best of those that fit.
	Shortfall string
}

// ErrNoAgentLayout is what DefaultAgentLayout returns when no layout of
// the model fits the GPUs at all.
var ErrNoAgentLayout = errors.New("no layout fits")

// Layouts hearth up, plan and bench choose between without explicit
// layout flags (--layout): the one for coding agents (DefaultAgentLayout),
// the default, or one engine per GPU with the model's KV dtype, the
// layout before agents came first.
const (
	LayoutAgent  = "agent"
	LayoutPerGPU = "per-gpu"
)

// LayoutNames lists --layout's values.
func LayoutNames() []string { return []string{LayoutAgent, LayoutPerGPU} }

// DefaultAgentLayout picks the layout of model on gpus (one node) that
// serves client's sessions (an AgentClients ID) best by rule: of the
// candidates whose context holds the client's first prompt and an agent
// turn (AgentTurnTokens), the one whose KV caches hold the most tokens in
// all (the most sessions' histories kept at once), then the one with the
// longest context (the fewest compactions), then the simplest, as
// Candidates orders them. It takes microseconds: hearth up and hearth bench
// call it on every start; hearth plan --agent measures the layouts.
func DefaultAgentLayout(gpus []GPUUse, model Model, client string) (AgentLayoutChoice, error) {
	c, ok := lookupAgentClient(client)
	if !ok {
		return AgentLayoutChoice{}, fmt.Errorf("catalog: unknown agent client %q (known: %s)", client, strings.Join(AgentClientIDs(), ", "))
	}
	candidates := AgentCandidates(gpus, model)
	if len(candidates) == 0 {
		return AgentLayoutChoice{}, fmt.Errorf("%w: %s fits none of the layouts of %d GPUs%s", ErrNoAgentLayout, model.DisplayName(), len(gpus), smallerModelHint(gpus, model))
	}
	var choice AgentLayoutChoice
	// The layout --layout per-gpu keeps, at its own step budget.
	perGPU := Layout{TP: 1, KVCacheDtype: KVCacheAuto}
	if p, err := PlanEngines(PlanRequest{GPUs: gpus, Model: model, TP: 1, KVCacheDtype: KVCacheAuto}); err == nil {
		choice.PerGPU = Candidate{Model: model, Layout: perGPU, Plan: p}
	}
	need := c.ContextNeeded()
	var roomy []Candidate
	for _, cand := range candidates {
		if cand.Plan.MaxModelLen >= need {
			roomy = append(roomy, cand)
		}
	}
	pool := roomy
	if len(roomy) == 0 {
		pool = candidates
		choice.Shortfall = fmt.Sprintf("no layout of %s on these GPUs gives %s's sessions the %s-token context they need (its %s-token first prompt, a turn and room to compact; the longest is %s tokens): %s",
			model.DisplayName(), c.Name, humanize.Comma(int64(need)), humanize.Comma(int64(c.FirstPromptTokens)),
			humanize.Comma(int64(longestContext(candidates))), roomHint(gpus, model, need))
	}
	best := pool[0]
	for _, cand := range pool[1:] {
		if betterByRule(cand, best) {
			best = cand
		}
	}
	choice.Candidate = best
	choice.Reason = ruleReason(best, choice.PerGPU, c, c.FirstPromptTokens+AgentTurnTokens)
	return choice, nil
}

// betterByRule reports whether a ranks before b in DefaultAgentLayout:
// more KV tokens in all, then a longer context; ties keep the earlier
// (simpler) candidate.
func betterByRule(a, b Candidate) bool {
	if ka, kb := a.Plan.TotalKVTokens(), b.Plan.TotalKVTokens(); ka != kb {
		return ka > kb
	}
	return a.Plan.MaxModelLen > b.Plan.MaxModelLen
}

// TotalKVTokens is the KV cache of all p's engines together, in tokens.
func (p Plan) TotalKVTokens() int {
	n := 0
	for _, e := range p.Engines {
		n += e.KVTokens
	}
	return n
}

// SessionsAtOnce is how many sessions of tokens each p's engines hold in
// their KV caches at once, summed over the engines.
func (p Plan) SessionsAtOnce(tokens int) int {
	if tokens <= 0 {
		return 0
	}
	n := 0
	for _, e := range p.Engines {
		n += e.KVTokens / tokens
	}
	return n
}

func ruleReason(best, perGPU Candidate, c AgentClient, need int) string {
	reason := fmt.Sprintf("for coding agents, a %s-token context per session and KV cache for %s %s sessions of %s tokens at once",
		humanize.Comma(int64(best.Plan.MaxModelLen)), countOrNone(best.Plan.SessionsAtOnce(need)), c.Name, shortTokens(need))
	if perGPU.Plan.MaxModelLen > 0 && !perGPU.Layout.SameEngines(best.Layout) {
		reason += fmt.Sprintf(", where one engine per GPU gives a %s-token context and room for %s", humanize.Comma(int64(perGPU.Plan.MaxModelLen)), countOrNone(perGPU.Plan.SessionsAtOnce(need)))
	}
	return reason
}

func countOrNone(n int) string {
	if n == 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

// shortTokens writes n tokens as "32k".
func shortTokens(n int) string { return fmt.Sprintf("%dk", (n+512)/1024) }

func longestContext(cs []Candidate) int {
	n := 0
	for _, c := range cs {
		n = max(n, c.Plan.MaxModelLen)
	}
	return n
}

// roomHint says what would give an agent's sessions need tokens of
// context: a smaller catalog model whose layouts do, or a GPU with more
// memory.
func roomHint(gpus []GPUUse, model Model, need int) string {
	for _, m := range models {
		if m.WeightBytes >= model.WeightBytes || m.Name == model.Name {
			continue
		}
		if longestContext(AgentCandidates(gpus, m)) >= need {
			return fmt.Sprintf("a smaller model does (--model %s), or a GPU with more memory", m.Name)
		}
	}
	return "a GPU with more memory, or more GPUs for a longer tensor-parallel context"
}

// smallerModelHint names the largest catalog model that fits gpus, when
// it is not model.
func smallerModelHint(gpus []GPUUse, model Model) string {
	m, err := DefaultModel(gpus)
	if err != nil || m.Name == model.Name {
		return ": a GPU with more memory would"
	}
	return fmt.Sprintf(": a smaller model would (--model %s), or a GPU with more memory", m.Name)
}

// ContextNeeded is the shortest context that serves c's sessions without
// a compaction after every turn: its first prompt and an agent turn
// (AgentTurnTokens), and for Claude Code the room its compaction keeps
// below the context (claudeCompactRoom).
func (c AgentClient) ContextNeeded() int {
	n := c.FirstPromptTokens + AgentTurnTokens
	if c.ID == ClaudeCodeID {
		n += claudeCompactRoom
	}
	return n
}

// ClaudeCodeID is Claude Code's AgentClient ID.
const ClaudeCodeID = "claude-code"

func lookupAgentClient(id string) (AgentClient, bool) {
	i := slices.IndexFunc(AgentClients, func(c AgentClient) bool { return c.ID == id })
	if i < 0 {
		return AgentClient{}, false
	}
	return AgentClients[i], true
}

// claudeCompactRoom is what Claude Code keeps below its context to
// compact (agentclient.ClaudeCodeCompactThreshold: its output cap, at most
// 8,192 as Hearth tells it, and a buffer of 13,000 tokens); the planner
// counts it as room Claude Code's sessions need.
const claudeCompactRoom = 8192 + 13000
