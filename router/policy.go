package router

import (
	"math"
	"math/rand"
	"time"

	"github.com/hearth-llm/hearth/tokenizer"
)

// Routing policies. A daemon picks one in Config.Policy; a request may name
// another in Request.Policy.
const (
	PolicyRoundRobin  = "round_robin"
	PolicyRandom      = "random"
	PolicyLeastLoaded = "least_loaded"
	// PolicyKV is Dynamo's KV router cost, reproduced exactly (the formula
	// is in the package doc).
	PolicyKV = "kv"
	// PolicyHearth estimates each worker's time to first token in seconds
	// and adds decode load, session affinity and cache-capacity terms.
	PolicyHearth = "hearth"
)

// Policies lists the policy names in a stable order.
var Policies = []string{PolicyRoundRobin, PolicyRandom, PolicyLeastLoaded, PolicyKV, PolicyHearth}

func validPolicy(p string) bool {
	switch p {
	case PolicyRoundRobin, PolicyRandom, PolicyLeastLoaded, PolicyKV, PolicyHearth:
		return true
	}
	return false
}

// routeInput is what a policy knows about the request being routed.
type routeInput struct {
	req          *Request
	hashes       []tokenizer.SeqHash
	promptTokens int
	promptBlocks int // ceil(promptTokens / block size)
	hashBlocks   int // full blocks with a hash
	oslBlocks    int // ceil(expected output tokens / block size)
}

// HearthConfig tunes the hearth policy. Zero fields take the defaults;
// a negative value turns its term off.
type HearthConfig struct {
	// DefaultPrefillTokensPerSec is the prefill speed of a worker that did
	// not say its own (default 5000, a 4090 on a 14B FP8 model).
	DefaultPrefillTokensPerSec float64
	// DecodeSlowdown is how much a full KV cache of running requests slows
	// prefill: speed / (1 + DecodeSlowdown × utilisation). Default 0.5.
	DecodeSlowdown float64
	// DecodeWeight is the cost in seconds of filling a worker's KV capacity
	// with running requests, which spreads decode load. Default 1.
	DecodeWeight float64
	// AffinityBonus is subtracted from the cost of a session's last worker
	// unless it is saturated, in seconds. Default 0.25.
	AffinityBonus float64
	// PausedEvictionWeight weighs the recompute time of paused sessions'
	// cached context that a request would push out of a full cache: the
	// chance that the session comes back for it. Default 0.5.
	PausedEvictionWeight float64
	// QueueStretch orders the router queue for hearth requests (within a
	// strict priority and priority): earliest deadline first, a request's
	// deadline being its arrival plus QueueStretch × its own cost in
	// seconds (uncached prefill, RAM load, KV share; see queueCostLocked).
	// So a request is overtaken only by requests that arrive within
	// QueueStretch × its cost after it. Default 5: a turn that must
	// recompute 12k tokens (about 3 s on a 4090 with its KV share) may be
	// overtaken by turns that arrive within 15 s of it, one whose context
	// is cached (0.1 to 0.5 s) within 0.5 to 2.5 s. Negative: arrival
	// order.
	QueueStretch float64
	// RoomWaitWindow prices the blocks a request would add beyond a
	// worker's KV capacity at the wait for its running requests to free
	// that room: blocks short / the rate at which the worker released
	// blocks over about the last RoomWaitWindow seconds (an exponentially
	// weighted average of the request ends the router saw, on its clock),
	// at least their reload time and at most their recompute time. The
	// engine holds such a prompt until room frees, so a full worker is not
	// nearly free as the reload price alone says (on the Mooncake trace,
	// short prompts sent to full workers waited tens of seconds); a worker
	// that frees room fast still wins. The session's own worker keeps the
	// reload price: its context is there, and sending the turn elsewhere
	// to recompute it cost more on the agentic workloads than the wait
	// (docs/perf.md, "Router → Queue order", (§)). Before a worker released
	// anything the reload price stands. Default 20; negative: the reload
	// price everywhere.
	RoomWaitWindow float64
}

func (h HearthConfig) withDefaults() HearthConfig {
	def := func(v *float64, d float64) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0
		}
	}
	def(&h.DefaultPrefillTokensPerSec, 5000)
	def(&h.DecodeSlowdown, 0.5)
	def(&h.DecodeWeight, 1)
	def(&h.AffinityBonus, 0.25)
	def(&h.PausedEvictionWeight, 0.5)
	def(&h.QueueStretch, 5)
	def(&h.RoomWaitWindow, 20)
	return h
}

// pickMin returns the index of the lowest-cost candidate. Ties go to the
// worker with the fewest cached blocks, then to a seeded random choice.
func pickMin(cands []Candidate, cached *[MaxWorkers]int, rng *rand.Rand) (int, string) {
	best := math.Inf(1)
	for _, c := range cands {
		best = math.Min(best, c.Cost)
	}
	ties, fewest := 0, math.MaxInt
	for _, c := range cands {
		if c.Cost == best {
			ties++
			fewest = min(fewest, cached[c.WorkerID])
		}
	}
	if ties == 1 {
		for i, c := range cands {
			if c.Cost == best {
				return i, ReasonLowestCost
			}
		}
	}
	n := 0
	for _, c := range cands {
		if c.Cost == best && cached[c.WorkerID] == fewest {
			n++
		}
	}
	reason := ReasonTieIndex
	pick := 0
	if n > 1 {
		reason = ReasonTieRandom
		pick = rng.Intn(n)
	}
	for i, c := range cands {
		if c.Cost == best && cached[c.WorkerID] == fewest {
			if pick == 0 {
				return i, reason
			}
			pick--
		}
	}
	return 0, reason // unreachable with a non-empty cands
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

// scoreKV fills each candidate's cost with Dynamo's KV router logit:
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
func (r *Router) scoreKV(in *routeInput, cands []Candidate) {
	bs := r.cfg.BlockSize
	for i := range cands {
		c := &cands[i]
		aw := &r.active.workers[c.WorkerID]
		credit := float64(c.CachedBlocks) + r.cfg.HostCacheHitWeight*float64(c.RAMBlocks) +
			r.cfg.DiskCacheHitWeight*float64(c.DiskBlocks)
		newTokens := max(float64(in.promptTokens)-credit*float64(bs), 0)
		prefill := (newTokens + float64(aw.pending())) / float64(bs)
		newBlocks := in.hashBlocks - r.activeDepth[c.WorkerID]
		decode := float64(aw.uniqueBlocks() + newBlocks)
		c.ActiveBlocks = aw.uniqueBlocks()
		c.Cost = r.cfg.OverlapScoreWeight*prefill + decode
	}
}

// scoreLeastLoaded costs a worker by its load in blocks: running blocks plus
// prompt blocks waiting for prefill.
func (r *Router) scoreLeastLoaded(cands []Candidate) {
	bs := float64(r.cfg.BlockSize)
	for i := range cands {
		c := &cands[i]
		c.Cost = float64(c.ActiveBlocks) + float64(c.PendingPrefillTokens)/bs
	}
}

// scoreHearth costs each worker in estimated seconds:
//
//   - time to first token: the prompt tokens already waiting there plus the
//     uncached part of this prompt, at the worker's prefill speed, slowed by
//     the decode load of its running requests, plus the PCIe time of loading
//     the blocks its host RAM holds after the GPU prefix
//     (WorkerInfo.BlockBytes / LoadBytesPerSec each) and the SSD and PCIe
//     time of the blocks the node's disk holds after GPU and RAM
//     (BlockBytes / DiskLoadBytesPerSec + BlockBytes / LoadBytesPerSec each);
//   - decode load: DecodeWeight × KV utilisation after adding the request
//     (prompt and expected output); the blocks that would not fit wait for
//     the running requests to free room, priced at the worker's observed
//     release rate between their refetch and recompute time (roomWait,
//     HearthConfig.RoomWaitWindow), at their refetch time on the session's
//     own worker;
//   - capacity: if the new blocks do not fit in the worker's free cache, the
//     engine evicts least recently used blocks, which are the context of
//     paused sessions (an agent waiting on a tool): their recompute time
//     (their reload time on a worker with a host-RAM tier, which keeps a
//     copy), weighted by PausedEvictionWeight, is added;
//   - affinity: a session's last worker gets AffinityBonus off unless it is
//     saturated, so ties and near ties keep a session where its context is.
func (r *Router) scoreHearth(in *routeInput, cands []Candidate, sess *session, now time.Time) {
	h := r.cfg.Hearth
	bs := r.cfg.BlockSize
	reqBlocks := in.promptBlocks + in.oslBlocks
	for i := range cands {
		c := &cands[i]
		ws := r.workers[c.WorkerID]
		aw := &r.active.workers[c.WorkerID]
		speed := ws.info.PrefillTokensPerSec
		if speed <= 0 {
			speed = h.DefaultPrefillTokensPerSec
		}
		capacity := float64(ws.info.CapacityBlocks)
		util := 0.0
		if capacity > 0 {
			util = float64(aw.blocks()) / capacity
		}
		eff := speed / (1 + h.DecodeSlowdown*util)
		// Blocks in host RAM or on the node's disk after the GPU prefix are
		// loaded, not recomputed; a worker that did not say how fast it
		// loads gets no credit for them.
		blockLoad := ws.loadSecondsPerBlock()
		loaded, loadSeconds := ws.lowerTierLoad(c, blockLoad)
		uncached := max(in.promptTokens-(c.CachedBlocks+loaded)*bs, 0)
		cost := float64(aw.pending()+uncached)/eff + loadSeconds
		// What a block pushed out of the GPU costs to get back: a reload
		// where the host-RAM tier keeps a copy (vLLM offloads on compute),
		// a recompute otherwise.
		refetch := float64(bs) / eff
		if blockLoad > 0 && ws.info.RAMCapacityBlocks > 0 {
			refetch = blockLoad
		}
		if capacity > 0 {
			after := aw.blocks() + reqBlocks - r.activeDepth[c.WorkerID]
			cost += h.DecodeWeight * float64(after) / capacity
			if over := float64(after) - capacity; over > 0 {
				if sess != nil && sess.hasWorker && sess.worker == c.WorkerID {
					cost += over * refetch
				} else {
					cost += r.roomWait(ws, over, refetch, float64(bs)/eff, now)
				}
			}
			newCached := reqBlocks - c.CachedBlocks
			free := max(ws.info.CapacityBlocks-r.cachedBlocks[c.WorkerID], 0)
			if newCached > free {
				paused := ws.pausedBlocks
				if sess != nil && sess.hasWorker && sess.worker == c.WorkerID && sess.active == 0 {
					paused -= sess.blocks // its own context is what it reuses
				}
				evicted := min(newCached-free, max(paused, 0))
				cost += h.PausedEvictionWeight * float64(evicted) * refetch
			}
		}
		if sess != nil && sess.hasWorker && sess.worker == c.WorkerID && !r.saturatedLocked(c.WorkerID) {
			cost -= h.AffinityBonus
		}
		c.Cost = cost
	}
}

// roomWait is the price of over blocks that do not fit in the worker's KV
// capacity: the time its running requests take to release them at the
// rate they have been releasing blocks (HearthConfig.RoomWaitWindow),
// between refetch and recompute seconds a block; refetch a block until the
// rate is known.
func (r *Router) roomWait(ws *workerState, over, refetch, recompute float64, now time.Time) float64 {
	floor := over * refetch
	rate, ok := ws.releaseRate(now, r.cfg.Hearth.RoomWaitWindow)
	if !ok {
		return floor
	}
	wait := over * recompute
	if rate > 0 {
		wait = min(over/rate, wait)
	}
	return max(wait, floor)
}

// lowerTierLoad returns how many of c's prompt blocks beyond its GPU
// prefix the worker loads instead of computing, and the seconds the loads
// take: its RAM blocks when it knows its PCIe bandwidth (ram, the seconds
// per block from loadSecondsPerBlock), then its disk blocks when it also
// knows its disk bandwidth. Blocks it cannot price are left to be
// recomputed.
func (ws *workerState) lowerTierLoad(c *Candidate, ram float64) (blocks int, seconds float64) {
	if ram <= 0 {
		return 0, 0
	}
	blocks, seconds = c.RAMBlocks, float64(c.RAMBlocks)*ram
	if c.DiskBlocks == 0 {
		return blocks, seconds
	}
	if disk := ws.diskSecondsPerBlock(); disk > 0 {
		blocks += c.DiskBlocks
		seconds += float64(c.DiskBlocks) * (disk + ram)
	}
	return blocks, seconds
}

// diskSecondsPerBlock is how long the worker takes to read one KV block
// from the node's disk into host memory; 0 when unknown.
func (ws *workerState) diskSecondsPerBlock() float64 {
	if ws.info.BlockBytes <= 0 || !(ws.info.DiskLoadBytesPerSec > 0) {
		return 0
	}
	return float64(ws.info.BlockBytes) / ws.info.DiskLoadBytesPerSec
}

// loadSecondsPerBlock is how long the worker takes to load one KV block
// from host RAM; 0 when unknown.
func (ws *workerState) loadSecondsPerBlock() float64 {
	if ws.info.BlockBytes <= 0 || !(ws.info.LoadBytesPerSec > 0) {
		return 0
	}
	return float64(ws.info.BlockBytes) / ws.info.LoadBytesPerSec
}
