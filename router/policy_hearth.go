package router

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/hearth-llm/hearth/tokenizer"
)

// PolicyHearth estimates each worker's time to first token in seconds and
// adds decode load, session affinity and cache-capacity terms (the model
// is in the package doc); it orders the router queue by a deadline of
// arrival plus HearthConfig.QueueStretch times a request's own cost.
const PolicyHearth = "hearth"

func init() {
	RegisterPolicy(PolicyInfo{Name: PolicyHearth, Rank: 50, New: func(cfg Config) Policy { return &hearthPolicy{cfg: cfg} }})
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
	// seconds (uncached prefill, RAM load, KV share; see queueCost).
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
	// that frees room fast still wins. Before a worker released anything
	// the reload price stands. Default 20; negative: the reload price
	// everywhere, the session's own worker included.
	//
	// The session's own worker is not priced at its release rate: its
	// context is there, and sending the turn elsewhere to recompute it
	// cost more on the agentic workloads than the usual wait
	// (docs/perf-history.md, "Queue order", (§)). Its missing room costs the time its
	// running requests take to end and free it (drainWait): each ends
	// after its expected output tokens (Hints.OSL) at the decode seconds
	// per expected token that the worker's ended requests took, and one
	// past that end runs as long again as it has decoded; at least the
	// reload price, which stands alone until the worker has a decode time
	// to go by. A turn whose worker's KV is held by another session's long
	// answer (a compaction's summary: 1,000-2,000 tokens, 25-50 s on a
	// 4090) so moves to a worker with room instead of waiting for it
	// (docs/perf.md, "Routing on the client presets, one engine per GPU").
	// This holds only while another worker has room for the request beside
	// its running requests; where none has, the turn would wait elsewhere
	// too and recompute its context there, and the reload price stands
	// (pricing the drain there too raised TTFT p50 1.6-2x on two 4090s at
	// eight sessions, where every worker is full most of the time).
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

// hearthPolicy reads Hearth of its router's configuration.
type hearthPolicy struct {
	cfg  Config
	ends []drainEnd // scratch of drainWait
}

// drainEnd is when one running request is expected to end, in seconds
// from now, and the blocks it frees then.
type drainEnd struct{ in, blocks float64 }

// Needs asks for lower tiers, whose blocks it prices at their load time,
// and for its queue order unless QueueStretch turned it off.
func (p *hearthPolicy) Needs() PolicyNeeds {
	needs := PolicyNeeds{LowerTiers: true}
	if p.cfg.Hearth.QueueStretch != 0 {
		needs.QueueDelay = p.queueDelay
	}
	return needs
}

// Choose takes the lowest cost.
func (p *hearthPolicy) Choose(in *RouteInput, cands []Candidate) (int, string) {
	return in.PickLowest(cands)
}

// Score costs each worker in estimated seconds:
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
//     HearthConfig.RoomWaitWindow); on the session's own worker at the
//     time its running requests are expected to take to free them
//     (drainWait) while another worker has room for the request, at
//     least their refetch time;
//   - capacity: if the new blocks do not fit in the worker's free cache, the
//     engine evicts least recently used blocks, which are the context of
//     paused sessions (an agent waiting on a tool): their recompute time
//     (their reload time on a worker with a host-RAM tier, which keeps a
//     copy), weighted by PausedEvictionWeight, is added;
//   - affinity: a session's last worker gets AffinityBonus off unless it is
//     saturated, so ties and near ties keep a session where its context is.
func (p *hearthPolicy) Score(in *RouteInput, cands []Candidate) {
	r, sess, now := in.r, in.sess, in.Now
	h := p.cfg.Hearth
	bs := tokenizer.DefaultBlockSize
	reqBlocks := in.PromptBlocks + in.OSLBlocks
	// The own worker's missing room is priced at its expected drain only
	// while another worker has room for the request (RoomWaitWindow).
	drainOwn := h.RoomWaitWindow > 0 && sess != nil && sess.hasWorker && p.roomElsewhere(r, cands, sess.worker, reqBlocks)
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
		uncached := max(in.PromptTokens-(c.CachedBlocks+loaded)*bs, 0)
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
					wait := over * refetch
					if drainOwn {
						if drain, ok := p.drainWait(r, c.WorkerID, over, now); ok {
							wait = max(wait, drain)
						}
					}
					cost += wait
				} else {
					cost += p.roomWait(ws, over, refetch, float64(bs)/eff, now)
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

// roomElsewhere reports whether a worker other than own has room for
// reqBlocks more blocks beside its running requests.
func (p *hearthPolicy) roomElsewhere(r *Router, cands []Candidate, own WorkerID, reqBlocks int) bool {
	for _, c := range cands {
		if c.WorkerID == own {
			continue
		}
		capacity := r.workers[c.WorkerID].info.CapacityBlocks
		if capacity > 0 && r.active.workers[c.WorkerID].blocks()+reqBlocks-r.activeDepth[c.WorkerID] <= capacity {
			return true
		}
	}
	return false
}

// drainWait is how long, in seconds from now, worker w's running requests
// are expected to take to free over blocks: they end in the order of
// their expected ends, each freeing its prompt and output blocks, and the
// wait is the end of the one that brings the freed blocks to over (of the
// last when all of them free less). A request ends its expected output
// tokens (Hints.OSL) after its first token, at the decode seconds per
// expected token of the worker's ended requests (secondsPerToken); one
// still in prefill ends that long after now, and one already past its
// expected end runs as long again as it has decoded: the longer an
// answer has outrun its estimate, the longer it is likely to go on (a
// compaction's summary estimated as a turn's). ok is false until the
// worker has a decode time or while it runs nothing.
func (p *hearthPolicy) drainWait(r *Router, w WorkerID, over float64, now time.Time) (float64, bool) {
	perToken, ok := r.workers[w].secondsPerToken()
	if !ok {
		return 0, false
	}
	ends := p.ends[:0]
	for _, ar := range r.active.reqs {
		if ar.worker != w {
			continue
		}
		in := float64(ar.outputTokens) * perToken
		if ar.prefillDone {
			decoded := now.Sub(ar.prefillAt).Seconds()
			if in -= decoded; in < 0 {
				in = decoded
			}
		}
		ends = append(ends, drainEnd{in: in, blocks: float64(len(ar.hashes) + ar.extraBlocks)})
	}
	p.ends = ends
	if len(ends) == 0 {
		return 0, false
	}
	slices.SortFunc(ends, func(a, b drainEnd) int { return cmp.Compare(a.in, b.in) })
	freed := 0.0
	for _, e := range ends {
		if freed += e.blocks; freed >= over {
			return e.in, true
		}
	}
	return ends[len(ends)-1].in, true
}

// roomWait is the price of over blocks that do not fit in the worker's KV
// capacity: the time its running requests take to release them at the
// rate they have been releasing blocks (HearthConfig.RoomWaitWindow),
// between refetch and recompute seconds a block; refetch a block until the
// rate is known.
func (p *hearthPolicy) roomWait(ws *workerState, over, refetch, recompute float64, now time.Time) float64 {
	floor := over * refetch
	rate, ok := ws.releaseRate(now, p.cfg.Hearth.RoomWaitWindow)
	if !ok {
		return floor
	}
	wait := over * recompute
	if rate > 0 {
		wait = min(over/rate, wait)
	}
	return max(wait, floor)
}

// queueDelay puts a waiting request's deadline QueueStretch times its own
// cost (queueCost) after its arrival. Earliest deadline first means a
// request B that arrives after A goes first only if it arrives less than
// QueueStretch × (cost A − cost B) after A: a request is overtaken only
// within QueueStretch times its own cost of its arrival, a bound that
// shortest-job-first with a fixed aging rate lacks (there a cheap
// request's cost is no bound on anything).
func (p *hearthPolicy) queueDelay(in *RouteInput, cands []Candidate) float64 {
	return p.cfg.Hearth.QueueStretch * p.queueCost(in, cands)
}

// queueCost is a queued request's own cost in seconds: on
// the worker where it is least, its uncached prompt tokens at that
// worker's prefill speed plus the load time of the blocks its host RAM and
// its node's disk hold (see Score), plus DecodeWeight × the share of the worker's KV capacity the
// request will hold (prompt and expected output). A turn whose context is
// cached is cheap, one that must recompute it dear. What the worker is
// doing when the request arrives (prompts waiting there, the running
// requests' load) is left out: it is the same for every waiter and
// changes before any of them runs.
func (p *hearthPolicy) queueCost(in *RouteInput, cands []Candidate) float64 {
	r := in.r
	h := p.cfg.Hearth
	bs := tokenizer.DefaultBlockSize
	best := math.Inf(1)
	for _, c := range cands {
		ws := r.workers[c.WorkerID]
		speed := ws.info.PrefillTokensPerSec
		if speed <= 0 {
			speed = h.DefaultPrefillTokensPerSec
		}
		loaded, loadSeconds := ws.lowerTierLoad(&c, ws.loadSecondsPerBlock())
		uncached := max(in.PromptTokens-(c.CachedBlocks+loaded)*bs, 0)
		cost := float64(uncached)/speed + loadSeconds
		if capacity := float64(ws.info.CapacityBlocks); capacity > 0 {
			cost += h.DecodeWeight * float64(in.PromptBlocks+in.OSLBlocks) / capacity
		}
		best = math.Min(best, cost)
	}
	return best
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
