package router

import "time"

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
