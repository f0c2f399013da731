package router

// PolicyRoundRobin sends each request to the next worker in turn.
const PolicyRoundRobin = "round_robin"

func init() {
	RegisterPolicy(PolicyInfo{Name: PolicyRoundRobin, Rank: 10, New: func(Config) Policy { return &roundRobin{} }})
}

// roundRobin counts the decisions it made among two workers or more; one
// that had a single worker to send to does not move the turn.
type roundRobin struct{ next int }

func (*roundRobin) Needs() PolicyNeeds { return PolicyNeeds{} }

func (*roundRobin) Score(*RouteInput, []Candidate) {}

func (p *roundRobin) Choose(_ *RouteInput, cands []Candidate) (int, string) {
	pick := p.next % len(cands)
	p.next++
	return pick, ReasonRoundRobin
}
