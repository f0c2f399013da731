package router

import (
	"cmp"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sync"
	"time"

	"github.com/hearth-llm/hearth/tokenizer"
)

// Policy chooses the worker that serves a request. Each policy lives in a
// file of its own (policy_*.go) and registers itself by name in init
// (RegisterPolicy); a daemon picks one in Config.Policy, a request may name
// another in Request.Policy.
//
// Every Router makes its own instance of every registered policy
// (PolicyInfo.New), so an instance may keep state between decisions (the
// round-robin position) without a lock: the router calls it under its own
// lock, one request at a time.
type Policy interface {
	// Needs says what the router must work out for the policy before
	// Score. The router asks once, when it is made.
	Needs() PolicyNeeds
	// Score sets each candidate's Cost, lower being better, or leaves it
	// 0. The router calls it for every decision, also when only one worker
	// may take the request, so that the decision shows that worker's cost.
	Score(in *RouteInput, cands []Candidate)
	// Choose returns the index in cands of the worker that serves the
	// request, and a constant reason (Reason*) for the decision log. The
	// router calls it after Score, only with two candidates or more.
	Choose(in *RouteInput, cands []Candidate) (pick int, reason string)
}

// PolicyNeeds is what a policy asks the router to work out for it. What a
// policy does not ask for it does not see: a policy without LowerTiers
// sees no blocks beyond the GPU, one without QueueDelay has its waiting
// requests served in arrival order.
type PolicyNeeds struct {
	// LowerTiers asks for the prompt's blocks that each worker's host RAM
	// and its node's disk hold beyond its GPU prefix (Candidate.RAMBlocks
	// and DiskBlocks, tier-exclusive, each tier continuing where the
	// faster one stopped). Without it both are 0 and the index is not
	// asked.
	LowerTiers bool
	// QueueDelay orders the policy's requests in the router queue, within
	// a strict priority and a priority: earliest deadline first, the
	// deadline being a request's arrival plus QueueDelay seconds. It is
	// called once, when the request starts to wait, with the candidates it
	// would have then (the workers' load left out of them is the same for
	// every waiter). nil: arrival order, FIFO as Dynamo's queue is.
	QueueDelay func(in *RouteInput, cands []Candidate) float64
}

// RouteInput is what a policy knows of the request it routes. The router
// reuses it for the next request: a policy must not keep it.
type RouteInput struct {
	Request      *Request
	Hashes       []tokenizer.SeqHash // the prompt's block hashes
	PromptTokens int
	PromptBlocks int // ceil(PromptTokens / block size), at least HashBlocks
	HashBlocks   int // full blocks with a hash
	OSLBlocks    int // ceil(expected output tokens / block size)
	// Now is the router's clock at the decision (zero in QueueDelay).
	Now time.Time

	r    *Router
	sess *session // the request's session, if the router knows it (decisions only)
}

// Rand is the router's seeded source of random choices (Config.Seed),
// shared by its policies so that a run is reproducible.
func (in *RouteInput) Rand() *rand.Rand { return in.r.rng }

// PickLowest returns the index of the candidate of lowest Cost and its
// reason. Ties go to the worker with the fewest blocks cached on its GPU,
// then to a seeded random choice.
func (in *RouteInput) PickLowest(cands []Candidate) (int, string) {
	return pickMin(cands, &in.r.cachedBlocks, in.r.rng)
}

// PolicyInfo registers a routing policy.
type PolicyInfo struct {
	// Name is what Config.Policy and Request.Policy name the policy by.
	Name string
	// Rank orders the policies in PolicyNames (help texts, the console's
	// choice), lowest first; ties by name.
	Rank int
	// New makes a router's own instance from its configuration, defaults
	// filled in.
	New func(cfg Config) Policy
}

// policies holds the registered policies by name.
var policies struct {
	mu     sync.RWMutex
	byName map[string]PolicyInfo
}

// RegisterPolicy makes a policy known by its name to every Router made
// afterwards, to Config.Validate and to PolicyNames. Policies register in
// init; it panics when the name is empty or taken or New is nil, as
// database/sql.Register does.
func RegisterPolicy(p PolicyInfo) {
	if p.Name == "" || p.New == nil {
		panic("router: RegisterPolicy without a name or New")
	}
	policies.mu.Lock()
	defer policies.mu.Unlock()
	if _, dup := policies.byName[p.Name]; dup {
		panic(fmt.Sprintf("router: policy %q registered twice", p.Name))
	}
	if policies.byName == nil {
		policies.byName = map[string]PolicyInfo{}
	}
	policies.byName[p.Name] = p
}

// PolicyNames returns the names of the registered policies, by rank.
func PolicyNames() []string {
	policies.mu.RLock()
	defer policies.mu.RUnlock()
	infos := make([]PolicyInfo, 0, len(policies.byName))
	for _, p := range policies.byName {
		infos = append(infos, p)
	}
	slices.SortFunc(infos, func(a, b PolicyInfo) int {
		return cmp.Or(cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.Name, b.Name))
	})
	names := make([]string, len(infos))
	for i, p := range infos {
		names[i] = p.Name
	}
	return names
}

// knownPolicy reports whether a policy is registered under name.
func knownPolicy(name string) bool {
	policies.mu.RLock()
	defer policies.mu.RUnlock()
	_, ok := policies.byName[name]
	return ok
}

// routerPolicy is a router's instance of a registered policy.
type routerPolicy struct {
	Policy
	name  string
	needs PolicyNeeds
}

// newPolicies makes a router's instance of every registered policy.
func newPolicies(cfg Config) map[string]*routerPolicy {
	policies.mu.RLock()
	defer policies.mu.RUnlock()
	out := make(map[string]*routerPolicy, len(policies.byName))
	for name, info := range policies.byName {
		p := info.New(cfg)
		out[name] = &routerPolicy{Policy: p, name: name, needs: p.Needs()}
	}
	return out
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
