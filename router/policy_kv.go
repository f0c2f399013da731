package router

import (
	"math"
	"math/rand"

	"github.com/hearth-llm/hearth/tokenizer"
)

// PolicyKV is Dynamo's KV router cost, reproduced exactly (the formula is
// in the package doc).
const PolicyKV = "kv"

func init() {
	RegisterPolicy(PolicyInfo{Name: PolicyKV, Rank: 40, New: func(cfg Config) Policy { return &kvPolicy{cfg: cfg} }})
}

// kvPolicy reads OverlapScoreWeight, HostCacheHitWeight, DiskCacheHitWeight,
// and Temperature of its router's configuration.
type kvPolicy struct{ cfg Config }

// Needs asks for lower tiers: Dynamo's selector credits offloaded blocks.
func (*kvPolicy) Needs() PolicyNeeds { return PolicyNeeds{LowerTiers: true} }

// Score fills each candidate's cost with Dynamo's KV router logit:
//
//	credit_blocks  = overlap + host_weight·ram_blocks + disk_weight·disk_blocks
//	prefill_blocks = (ISL - credit_blocks·block_size + pending_prefill_tokens) / block_size
//	decode_blocks  = active_blocks + request blocks not already active there
//	logit          = overlap_score_weight·prefill_blocks + decode_blocks
//
// active_blocks counts distinct prompt blocks of running requests, as
// Dynamo's active-sequence tracker does; new prompt tokens never go below 0.
// ram_blocks and disk_blocks are the blocks lower tiers hold after the GPU
// prefix (tier-exclusive, each tier continuing where the faster one
// stopped); Dynamo's router credits them with host_cache_hit_weight (0.75)
// and disk_cache_hit_weight (0.25). Without lower-tier events both are 0
// and the logit is the GPU-only formula.
func (p *kvPolicy) Score(in *RouteInput, cands []Candidate) {
	r, bs := in.r, tokenizer.DefaultBlockSize
	for i := range cands {
		c := &cands[i]
		aw := &r.active.workers[c.WorkerID]
		credit := float64(c.CachedBlocks) + p.cfg.HostCacheHitWeight*float64(c.RAMBlocks) +
			p.cfg.DiskCacheHitWeight*float64(c.DiskBlocks)
		newTokens := max(float64(in.PromptTokens)-credit*float64(bs), 0)
		prefill := (newTokens + float64(aw.pending())) / float64(bs)
		newBlocks := in.HashBlocks - r.activeDepth[c.WorkerID]
		decode := float64(aw.uniqueBlocks() + newBlocks)
		c.ActiveBlocks = aw.uniqueBlocks()
		c.Cost = p.cfg.OverlapScoreWeight*prefill + decode
	}
}

// Choose takes the lowest logit, or with a temperature T > 0 samples
// p ∝ exp(−(logit / (max−min)) / T).
func (p *kvPolicy) Choose(in *RouteInput, cands []Candidate) (int, string) {
	if p.cfg.Temperature > 0 {
		return sampleSoftmax(cands, p.cfg.Temperature, in.Rand()), ReasonSampled
	}
	return in.PickLowest(cands)
}

// sampleSoftmax draws a candidate with probability ∝ exp(-(cost/(max-min))/T),
// Dynamo's temperature sampling; equal costs give a uniform draw.
func sampleSoftmax(cands []Candidate, temperature float64, rng *rand.Rand) int {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range cands {
		lo = math.Min(lo, c.Cost)
		hi = math.Max(hi, c.Cost)
	}
	if hi == lo {
		return rng.Intn(len(cands))
	}
	var weights [MaxWorkers]float64
	span := hi - lo
	// Shift by the largest exponent (the lowest cost) for stability; the
	// shift cancels in the normalisation.
	top := -(lo / span) / temperature
	sum := 0.0
	for i, c := range cands {
		weights[i] = math.Exp(-(c.Cost/span)/temperature - top)
		sum += weights[i]
	}
	u := rng.Float64() * sum
	for i := range cands {
		u -= weights[i]
		if u < 0 {
			return i
		}
	}
	return len(cands) - 1
}
