package catalog

import (
	"context"
	"fmt"
	"slices"
)

// The layout recommender: which layout of a model (tensor parallelism, KV
// cache dtype, YaRN) serves a coding-agent client's sessions best on a
// node's GPUs. The planner lists the layouts worth trying
// (AgentCandidates) and ranks what was measured of them
// (RecommendLayout); measuring runs the client's workload on each, a
// simulation the planner does not hold: it declares LayoutEvaluator, and
// the benchmark's simulation is one (bench.LayoutEvaluator).

// AgentEvaluationSeed is the seed of the first workload a layout
// evaluation runs unless told another (hearth up --agent always): a fixed
// one, so that the recommendation is repeatable.
const AgentEvaluationSeed = 1

// AgentLayoutRequest asks which layout of Model on GPUs serves Client (an
// AgentClient's ID) best at Sessions sessions at once; Seed is the first
// workload's.
type AgentLayoutRequest struct {
	GPUs     []GPUUse
	Model    Model
	Client   string
	Sessions int
	Seed     uint64
}

// A LayoutEvaluator measures a client's workload on candidate layouts.
type LayoutEvaluator interface {
	// MeasureLayouts runs req's workload on each candidate and returns
	// their measures in the candidates' order.
	MeasureLayouts(ctx context.Context, req AgentLayoutRequest, candidates []Candidate) ([]LayoutMeasure, error)
}

// LayoutMeasure is what the recommendation weighs of one layout's run:
// the sessions it ran and finished (the rest ended in an error), the task
// time p50 over those finished (a session's first request to its last
// token, in ms) and the compactions per session.
type LayoutMeasure struct {
	Layout                Layout
	Sessions              int
	FinishedSessions      int
	TaskP50               float64
	CompactionsPerSession float64
}

// AgentCandidates are the layouts of model worth evaluating for agents on
// gpus: Candidates for that one model, less each YaRN layout whose context
// is no longer than the same layout's native one (its KV cache could not
// use the longer context, and YaRN costs quality on short prompts).
func AgentCandidates(gpus []GPUUse, model Model) []Candidate {
	all := Candidates(gpus, []Model{model})
	var out []Candidate
	for _, c := range all {
		if c.Layout.RopeScaling {
			native := c.Layout
			native.RopeScaling = false
			i := slices.IndexFunc(all, func(n Candidate) bool { return n.Layout == native })
			if i >= 0 && c.Plan.MaxModelLen <= all[i].Plan.MaxModelLen {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// taskTie is how close two task times p50 are, as a share, to count as a
// tie broken by compactions.
const taskTie = 0.01

// RecommendLayout picks the best of the measured layouts and says in one
// line why: the layout with the lowest task time p50; one that finishes
// fewer sessions ranks after one that finishes more; layouts within 1% of
// each other's task time p50 are told apart by fewer compactions per
// session, then by their order (the simpler layout first, as Candidates
// lists them). ms must not be empty.
func RecommendLayout(ms []LayoutMeasure) (best int, reason string) {
	for i := range ms {
		if i == 0 || betterLayout(ms[i], ms[best]) {
			best = i
		}
	}
	return best, recommendationReason(ms, best)
}

// betterLayout reports whether a ranks before b (see RecommendLayout).
func betterLayout(a, b LayoutMeasure) bool {
	if a.FinishedSessions != b.FinishedSessions {
		return a.FinishedSessions > b.FinishedSessions
	}
	if a.TaskP50 < b.TaskP50*(1-taskTie) {
		return true
	}
	if b.TaskP50 < a.TaskP50*(1-taskTie) {
		return false
	}
	return a.CompactionsPerSession < b.CompactionsPerSession
}

func recommendationReason(ms []LayoutMeasure, bestIndex int) string {
	best := ms[bestIndex]
	if len(ms) == 1 {
		return fmt.Sprintf("%s: the only layout that fits", best.Layout)
	}
	if best.FinishedSessions == 0 {
		return fmt.Sprintf("%s: no layout finished a session; it is the first that fits", best.Layout)
	}
	runnerUp := -1
	for i, m := range ms {
		if i != bestIndex && (runnerUp < 0 || betterLayout(m, ms[runnerUp])) {
			runnerUp = i
		}
	}
	next := ms[runnerUp]
	if next.FinishedSessions < best.FinishedSessions {
		return fmt.Sprintf("%s: finished %d of the %d sessions, more than any other layout (%s: %d), task time p50 %.1f s",
			best.Layout, best.FinishedSessions, best.Sessions, next.Layout, next.FinishedSessions, best.TaskP50/1000)
	}
	reason := fmt.Sprintf("%s: lowest task time p50, %.1f s", best.Layout, best.TaskP50/1000)
	if next.FinishedSessions > 0 && next.TaskP50 >= best.TaskP50*(1-taskTie) && next.TaskP50 <= best.TaskP50*(1+taskTie) {
		return reason + fmt.Sprintf(", tied with %s and fewer compactions per session (%.2f against %.2f)",
			next.Layout, best.CompactionsPerSession, next.CompactionsPerSession)
	}
	if next.FinishedSessions > 0 {
		reason += fmt.Sprintf(" against %.1f s for %s, the next best", next.TaskP50/1000, next.Layout)
	}
	return reason
}

// WithoutTP keeps the candidates of one engine per GPU. Under WSL2,
// tensor parallelism over several GPUs has hung in reported cases (NCCL
// between GPUs through the Windows driver), so the planner does not choose
// it there unless asked (--tp).
func WithoutTP(candidates []Candidate) []Candidate {
	var out []Candidate
	for _, c := range candidates {
		if c.Layout.TPSize() == 1 {
			out = append(out, c)
		}
	}
	return out
}

// SmallerModel is the alternative to model for a GPU too small for the
// sessions wanted: the largest catalog model of its family with fewer
// parameters, FP8 before BF16 at the same size (half the weights' bytes,
// more room for KV); false when the family has none.
func SmallerModel(model Model) (Model, bool) {
	var best Model
	found := false
	for _, m := range models {
		if m.Family != model.Family || m.Params >= model.Params {
			continue
		}
		if !found || m.Params > best.Params || m.Params == best.Params && m.FP8 && !best.FP8 {
			best, found = m, true
		}
	}
	return best, found
}

// OnRigs keeps the candidates a cluster of identical machines of perRig
// GPUs each can serve: an engine's tensor-parallel group never spans two
// machines, so its size must divide perRig.
func OnRigs(candidates []Candidate, perRig int) []Candidate {
	var out []Candidate
	for _, c := range candidates {
		if tp := c.Layout.TPSize(); tp <= perRig && perRig%tp == 0 {
			out = append(out, c)
		}
	}
	return out
}
