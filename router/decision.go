package router

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/tokenizer"
)

// Candidate is one worker as a policy saw it for one request.
type Candidate struct {
	WorkerID             WorkerID
	Worker               string  // the worker's name (WorkerInfo.Name)
	CachedBlocks         int     // leading prompt blocks cached on the worker's GPU
	RAMBlocks            int     // prompt blocks in the worker's host RAM after its GPU overlap
	DiskBlocks           int     // prompt blocks on the worker's disk after GPU and RAM
	ActiveBlocks         int     // blocks held by its running requests
	PendingPrefillTokens int     // prompt tokens routed to it and not yet prefilled
	Cost                 float64 // the policy's cost; lower is better (0 for policies without one)
}

// Reasons a policy gives for its choice. They are constants so that deciding
// never formats a string.
const (
	ReasonRoundRobin    = "next in turn"
	ReasonRandom        = "uniform random"
	ReasonLowestCost    = "lowest cost"
	ReasonTieIndex      = "lowest cost, tie broken by fewest cached blocks"
	ReasonTieRandom     = "lowest cost, tie broken at random"
	ReasonSampled       = "sampled by temperature"
	ReasonOnlyCandidate = "only worker"
)

// Decision is the record of one routing decision. It is returned to the
// caller and kept in a bounded log for the console. Its Candidates slice is
// shared with the log and must not be modified.
type Decision struct {
	RequestID  string
	Policy     string
	WorkerID   WorkerID // the winner
	Worker     string   // the winner's name (WorkerInfo.Name)
	BaseURL    string   // the winner's WorkerInfo.BaseURL
	Reason     string
	Candidates []Candidate

	CachedBlocks int // the winner's leading prompt blocks on its GPU (Candidate.CachedBlocks)
	// RAMBlocks and DiskBlocks split the winner's blocks beyond its GPU
	// prefix by tier: in host RAM after the GPU overlap, then on disk (its
	// node's, when it shares one) after GPU and RAM. kv and hearth only.
	RAMBlocks       int
	DiskBlocks      int
	LowerTierBlocks int // RAMBlocks + DiskBlocks
	PromptBlocks    int // ceil(prompt tokens / block size)
	// PredictedHitRate is (CachedBlocks + LowerTierBlocks) / PromptBlocks,
	// the share of the prompt the engine will not compute (0 for an empty
	// prompt).
	PredictedHitRate float64

	SpeculativePrefill bool          // carried from the request's hints for the gateway
	Queued             time.Duration // time spent waiting in the router queue
	At                 time.Time     // when the decision was made (router clock)
}

// decisionLog is a ring of the most recent decisions.
type decisionLog struct {
	ring []Decision
	next int
	full bool
}

func newDecisionLog(n int) *decisionLog {
	return &decisionLog{ring: make([]Decision, n)}
}

func (l *decisionLog) add(d Decision) {
	if len(l.ring) == 0 {
		return
	}
	l.ring[l.next] = d
	l.next++
	if l.next == len(l.ring) {
		l.next = 0
		l.full = true
	}
}

// last returns up to n decisions, newest first.
func (l *decisionLog) last(n int) []Decision {
	size := l.next
	if l.full {
		size = len(l.ring)
	}
	if n <= 0 || n > size {
		n = size
	}
	out := make([]Decision, 0, n)
	for i := 1; i <= n; i++ {
		j := l.next - i
		if j < 0 {
			j += len(l.ring)
		}
		out = append(out, l.ring[j])
	}
	return out
}

// candidatesLocked lists the workers a request may go to: all but the
// excluded and the drained ones; when that leaves none, all but the
// excluded; when that leaves none, all.
func (r *Router) candidatesLocked(exclude []WorkerID, model string) []Candidate {
	cands := make([]Candidate, 0, len(r.order))
	for pass := 0; pass < 3 && len(cands) == 0; pass++ {
		for _, id := range r.order {
			if !r.servesLocked(id, model) || pass < 2 && slices.Contains(exclude, id) || pass == 0 && r.workers[id].drained {
				continue
			}
			aw := &r.active.workers[id]
			cands = append(cands, Candidate{
				WorkerID:             id,
				Worker:               r.workers[id].info.Name,
				CachedBlocks:         r.overlap[id],
				RAMBlocks:            r.ramOverlap[id],
				DiskBlocks:           r.diskOverlap[id],
				ActiveBlocks:         aw.blocks(),
				PendingPrefillTokens: aw.pending(),
			})
		}
	}
	return cands
}

// matchLocked fills the scratch arrays (overlap per tier, active depth,
// cached blocks) for a request and r.in, what a policy knows of it; the
// lower tiers only when the policy needs them.
func (r *Router) matchLocked(req *Request, hashes []tokenizer.SeqHash, isl int, needs PolicyNeeds) *RouteInput {
	bs := tokenizer.DefaultBlockSize
	in := &r.in
	in.Request = req
	in.Hashes = hashes
	in.PromptTokens = isl
	in.PromptBlocks = (isl + bs - 1) / bs
	in.HashBlocks = len(hashes)
	in.OSLBlocks = (req.Hints.OSL + bs - 1) / bs
	in.PromptBlocks = max(in.PromptBlocks, in.HashBlocks)
	r.ix.Match(hashes, kvtier.GPU, &r.overlap)
	r.ramOverlap, r.diskOverlap = [MaxWorkers]int{}, [MaxWorkers]int{}
	if needs.LowerTiers {
		// What lower tiers add after the GPU prefix: an engine loads it
		// instead of recomputing it.
		r.ix.MatchBeyond(hashes, kvtier.RAM, &r.overlap, &r.ramOverlap)
		for w := range r.reach {
			r.reach[w] = r.overlap[w] + r.ramOverlap[w]
		}
		r.ix.MatchBeyond(hashes, kvtier.Disk, &r.reach, &r.diskOverlap)
	}
	r.active.activeDepth(hashes, &r.activeDepth)
	r.ix.BlockCounts(kvtier.GPU, &r.cachedBlocks)
	return in
}

// decideLocked scores the live workers, picks one and records the request
// as running there. The Candidates slice is its only allocation besides the
// active-request record.
func (r *Router) decideLocked(req *Request, hashes []tokenizer.SeqHash, isl int, policy *routerPolicy, now time.Time, queued time.Duration) Decision {
	start := time.Now()
	bs := tokenizer.DefaultBlockSize
	in := r.matchLocked(req, hashes, isl, policy.needs)
	cands := r.candidatesLocked(req.Exclude, req.Model)
	var sess *session
	if req.SessionID != "" {
		sess = r.sessions[req.SessionID]
	}
	in.Now, in.sess = now, sess

	policy.Score(in, cands)
	pick, reason := 0, ReasonOnlyCandidate
	if len(cands) > 1 {
		pick, reason = policy.Choose(in, cands)
	}
	win := cands[pick]

	extra := in.PromptBlocks - in.HashBlocks + in.OSLBlocks
	// Blocks in lower tiers are loaded, not computed.
	prefill := max(isl-(win.CachedBlocks+win.RAMBlocks+win.DiskBlocks)*bs, 0)
	ar := r.active.add(req.ID, win.WorkerID, hashes, extra, prefill, req.SessionID, now)
	ar.outputTokens = max(req.Hints.OSL, 0)
	if r.workers[win.WorkerID].info.Approximate {
		r.approx.insert(r.ix, win.WorkerID, ar.hashes, now)
	}
	if req.SessionID != "" {
		r.sessionRoutedLocked(req.SessionID, sess, win.WorkerID, in.PromptBlocks+in.OSLBlocks, now)
	}
	r.publishLocked(win.WorkerID)

	d := Decision{
		RequestID:          req.ID,
		Policy:             policy.name,
		WorkerID:           win.WorkerID,
		Worker:             win.Worker,
		BaseURL:            r.workers[win.WorkerID].info.BaseURL,
		Reason:             reason,
		Candidates:         cands,
		CachedBlocks:       win.CachedBlocks,
		RAMBlocks:          win.RAMBlocks,
		DiskBlocks:         win.DiskBlocks,
		LowerTierBlocks:    win.RAMBlocks + win.DiskBlocks,
		PromptBlocks:       in.PromptBlocks,
		SpeculativePrefill: req.Hints.SpeculativePrefill,
		Queued:             queued,
		At:                 now,
	}
	if in.PromptBlocks > 0 {
		d.PredictedHitRate = float64(win.CachedBlocks+d.LowerTierBlocks) / float64(in.PromptBlocks)
	}
	r.decisions.add(d)
	r.metrics.observeDecision(&d, time.Since(start), r.ix)
	if r.log.Enabled(context.Background(), slog.LevelDebug) {
		r.log.LogAttrs(context.Background(), slog.LevelDebug, "routed",
			slog.String("request", req.ID), slog.String("policy", policy.name),
			slog.String("worker", win.Worker), slog.Int("cached_blocks", win.CachedBlocks),
			slog.Int("prompt_blocks", in.PromptBlocks), slog.String("reason", reason))
	}
	return d
}
