package router

import "github.com/hearth-llm/hearth/tokenizer"

// PolicyLeastLoaded sends each request to the worker with the least load
// in blocks, ignoring the cache.
const PolicyLeastLoaded = "least_loaded"

func init() {
	RegisterPolicy(PolicyInfo{Name: PolicyLeastLoaded, Rank: 30, New: func(cfg Config) Policy {
		return leastLoaded{}
	}})
}

type leastLoaded struct{}

func (leastLoaded) Needs() PolicyNeeds { return PolicyNeeds{} }

// Score leaves the costs at 0: least_loaded weighs loads only against
// each other, in Choose, so a decision with a single worker shows none.
func (leastLoaded) Score(*RouteInput, []Candidate) {}

// Choose costs a worker by its load in blocks, running blocks plus prompt
// blocks waiting for prefill, and takes the lowest.
func (leastLoaded) Choose(in *RouteInput, cands []Candidate) (int, string) {
	bs := float64(tokenizer.DefaultBlockSize)
	for i := range cands {
		c := &cands[i]
		c.Cost = float64(c.ActiveBlocks) + float64(c.PendingPrefillTokens)/bs
	}
	return in.PickLowest(cands)
}
