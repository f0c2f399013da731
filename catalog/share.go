package catalog

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Sharing one GPU group between the models served on demand from it.
//
// Each model has its own engine, and each engine its own memory fraction,
// fixed when it starts: vLLM's --gpu-memory-utilization is a per-instance
// share of the GPU's total memory ("if you have two vLLM instances running
// on the same GPU, you can set the GPU memory utilization to 0.5 for each
// instance": vllm-project/vllm vllm/config/cache.py at 002f10e), and its
// start-up check refuses a share larger than what is free. So models are
// resident together exactly when their shares sum within what the group's
// engines may take together.
//
// PlanShares gives each model the least share that holds one context of
// the shortest length it must serve (its need), decides which of the
// smaller models keep a share of their own beside the largest one (the
// companions: ascending by need while they and the largest fit together),
// and gives every other model the rest, so that each of them is resident
// beside all the companions and they swap among themselves. A model's
// context follows from its share.
//
// Only engines whose flag is a share of the total memory share a GPU:
// SGLang's --mem-fraction-static is a share of the memory free when the
// engine starts, so its pool would depend on which models happened to be
// resident then. Its models each get the whole budget, and swap.

// ShareRequest is the models served on demand from one GPU group.
type ShareRequest struct {
	// GPUs are the group's GPUs, one engine's worth (TP of them).
	GPUs []GPUUse
	// Models are the models, in the order configured, with the layout
	// applied (ApplyLayout).
	Models []Model
	// Layout is the engines' layout; its TP is len(GPUs).
	Layout Layout
	// MaxModelLen is the context every engine must hold; 0: the longest
	// its share holds, at least one agent turn.
	MaxModelLen int
	// MaxBatchedTokens sizes the activation peak; 0: the default.
	MaxBatchedTokens int
	// Share is how the engines' memory flag shares out a GPU.
	Share MemoryShare
}

// SharePlan is which models are resident together on one GPU group and
// the memory fraction of each.
type SharePlan struct {
	// Budget is the fraction of each GPU's total memory the group's
	// engines take together: what other programs leave, less every
	// engine's CUDA context (a sleeping engine keeps its own) and a margin.
	Budget float64
	// Models are the models in the request's order.
	Models []SharedModel
	// Sets are the largest sets of models resident together (names, in
	// the request's order), each not contained in another.
	Sets [][]string
}

// SharedModel is one model's part of a SharePlan.
type SharedModel struct {
	Name string
	// Share is its engine's fraction of each GPU's total memory
	// (--gpu-memory-utilization); Need the least that holds one context.
	Share, Need float64
	// Engine is its engine's plan at Share (MaxModelLen set).
	Engine EnginePlan
}

// ShareBudget is the fraction of each GPU of gpus that n engines may take
// together: DefaultMemoryFraction, or less to leave what other programs
// use, each engine's CUDA context and a margin, in hundredths.
func ShareBudget(gpus []GPUUse, n int) float64 {
	budget := DefaultMemoryFraction
	for _, g := range gpus {
		total := float64(g.GPU.MemoryBytes)
		if total == 0 {
			return 0
		}
		free := total - float64(g.UsedBytes) - float64(max(n, 1))*cudaContextBytes - (marginBytes - cudaContextBytes)
		budget = min(budget, free/total)
	}
	return max(floorTo(budget, 100), 0)
}

// PlanShares plans req (see above). A model that does not fit the group
// even alone is an error with the plan's sentence (a *NotFitError or a
// *ContextTooLongError).
func PlanShares(req ShareRequest) (SharePlan, error) {
	if len(req.Models) == 0 || len(req.GPUs) == 0 {
		return SharePlan{}, errors.New("plan: no models or no GPUs to share")
	}
	tp := len(req.GPUs)
	l := req.Layout
	l.TP = tp
	batched := req.MaxBatchedTokens
	if batched == 0 {
		batched = DefaultMaxBatchedTokens
	}
	budget := int(math.Round(ShareBudget(req.GPUs, len(req.Models)) * 100))
	plan := SharePlan{Budget: float64(budget) / 100}
	// In hundredths: the share that holds the context the model must
	// serve, and the one that holds its longest (at most the budget).
	needs, fulls := make([]int, len(req.Models)), make([]int, len(req.Models))
	for i, m := range req.Models {
		if err := checkRequest(PlanRequest{GPUs: req.GPUs, Model: m, TP: tp, MaxModelLen: req.MaxModelLen}, tp); err != nil {
			return SharePlan{}, err
		}
		want := minContext(m, 0)
		if req.MaxModelLen > 0 {
			want = req.MaxModelLen
		}
		needs[i] = -1
		for h := 1; h <= budget; h++ {
			if planEngineAt(m, req.GPUs, 0, l, batched, float64(h)/100).KVTokens >= want {
				needs[i] = h
				break
			}
		}
		if needs[i] < 0 {
			return SharePlan{}, shareNotFit(m, req.GPUs, l, batched, req.MaxModelLen, float64(budget)/100)
		}
		fulls[i] = budget
		longest := m.MaxModelLen
		if req.MaxModelLen > 0 {
			longest = req.MaxModelLen
		}
		for h := needs[i]; h <= budget; h++ {
			if planEngineAt(m, req.GPUs, 0, l, batched, float64(h)/100).KVTokens >= longest {
				fulls[i] = h
				break
			}
		}
	}

	shares := slices.Repeat([]int{budget}, len(req.Models))
	if req.Share == ShareOfTotal {
		shareOut(needs, fulls, shares, budget)
	}

	for i, m := range req.Models {
		e := planEngineAt(m, req.GPUs, 0, l, batched, float64(shares[i])/100)
		e.MaxModelLen = min(e.KVTokens, m.MaxModelLen)
		if req.MaxModelLen > 0 {
			e.MaxModelLen = req.MaxModelLen
		}
		plan.Models = append(plan.Models, SharedModel{Name: m.Name, Share: float64(shares[i]) / 100, Need: float64(needs[i]) / 100, Engine: e})
	}
	plan.Sets = residentSets(req.Models, shares, budget)
	return plan, nil
}

// shareOut sets shares (hundredths) from needs within budget: the
// largest model left (the first of equals) and, ascending by need, the
// companions that fit beside it; each companion gets its need, and what
// the largest cannot use (beyond its longest context, fulls) goes to the
// companions up to theirs; the largest gets the rest. The models left then share that rest among themselves the same
// way, so that each of them is resident beside every companion chosen so
// far.
func shareOut(needs, fulls, shares []int, budget int) {
	left := make([]int, len(needs))
	for i := range left {
		left[i] = i
	}
	for len(left) > 0 {
		largest := left[0]
		for _, i := range left {
			if needs[i] > needs[largest] {
				largest = i
			}
		}
		others := slices.DeleteFunc(slices.Clone(left), func(i int) bool { return i == largest })
		slices.SortStableFunc(others, func(a, b int) int { return needs[a] - needs[b] })
		held := needs[largest]
		var companions []int
		for _, i := range others {
			if held+needs[i] > budget {
				break
			}
			companions, held = append(companions, i), held+needs[i]
		}
		extra := budget - held - max(fulls[largest]-needs[largest], 0)
		for _, i := range companions {
			add := max(min(extra, fulls[i]-needs[i]), 0)
			shares[i], extra = needs[i]+add, extra-add
			budget -= shares[i]
		}
		shares[largest] = budget
		left = slices.DeleteFunc(left, func(i int) bool { return i == largest || slices.Contains(companions, i) })
	}
}

// shareNotFit explains a model that fits no share of the budget.
func shareNotFit(m Model, gpus []GPUUse, l Layout, batched, requested int, budget float64) error {
	if _, err := PlanEngines(PlanRequest{GPUs: gpus, Model: m, TP: l.TPSize(), MaxModelLen: requested,
		MaxBatchedTokens: batched, KVCacheDtype: l.KVCacheDtype}); err != nil {
		return err // it does not fit even as the GPU's only engine
	}
	if requested > 0 {
		largest := planEngineAt(m, gpus, 0, l, batched, budget).KVTokens
		if largest >= minContext(m, 0) {
			return &ContextTooLongError{Model: m, TP: l.TPSize(), Requested: requested, Largest: largest,
				GPU: gpus[0].GPU, UsedBytes: gpus[0].UsedBytes}
		}
	}
	// It fits alone, but not beside the CUDA contexts of the group's
	// other engines, which stay while they sleep.
	return notFit(m, planEngineAt(m, gpus, 0, l, batched, budget), l, batched, requested)
}

// residentSets lists the largest sets of models whose shares fit the
// budget together, each not inside another, in the models' order.
func residentSets(ms []Model, shares []int, budget int) [][]string {
	n := len(ms)
	if n > 16 { // 65,536 subsets; more models on one GPU is not a homelab
		sets := make([][]string, n)
		for i, m := range ms {
			sets[i] = []string{m.Name}
		}
		return sets
	}
	var fitting []uint32
	for set := uint32(1); set < 1<<n; set++ {
		sum := 0
		for i := range n {
			if set&(1<<i) != 0 {
				sum += shares[i]
			}
		}
		if sum <= budget {
			fitting = append(fitting, set)
		}
	}
	var maximal [][]int
	for _, set := range fitting {
		inside := slices.ContainsFunc(fitting, func(other uint32) bool { return other != set && other&set == set })
		if inside {
			continue
		}
		var idx []int
		for i := range n {
			if set&(1<<i) != 0 {
				idx = append(idx, i)
			}
		}
		maximal = append(maximal, idx)
	}
	slices.SortFunc(maximal, slices.Compare)
	sets := make([][]string, len(maximal))
	for i, idx := range maximal {
		for _, j := range idx {
			sets[i] = append(sets[i], ms[j].Name)
		}
	}
	return sets
}

// BudgetBytes and ShareBytes are the budget and a model's share in bytes
// of a GPU of total bytes, rounded so that shares whose fractions sum
// within the budget sum within its bytes too.
func (p SharePlan) BudgetBytes(total uint64) uint64 {
	return uint64(math.Round(p.Budget*100)) * total / 100
}

func (m SharedModel) ShareBytes(total uint64) uint64 {
	return uint64(math.Round(m.Share*100)) * total / 100
}

// SetsLine says in one line which models are resident together:
// "qwen3-14b-fp8 + qwen3-4b-fp8; qwen3-8b".
func (p SharePlan) SetsLine() string {
	parts := make([]string, len(p.Sets))
	for i, s := range p.Sets {
		parts[i] = strings.Join(s, " + ")
	}
	return strings.Join(parts, "; ")
}

// Model is the plan of the model named name.
func (p SharePlan) Model(name string) (SharedModel, bool) {
	for _, m := range p.Models {
		if m.Name == name {
			return m, true
		}
	}
	return SharedModel{}, false
}

// String is the plan for a log line: each model's share and context.
func (p SharePlan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%.2f of the GPU for the models:", p.Budget)
	for i, m := range p.Models {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s %.2f (context %d)", m.Name, m.Share, m.Engine.MaxModelLen)
	}
	return b.String()
}
