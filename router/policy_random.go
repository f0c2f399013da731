package router

// PolicyRandom sends each request to a worker drawn uniformly, from the
// router's seeded source (Config.Seed).
const PolicyRandom = "random"

func init() {
	RegisterPolicy(PolicyInfo{Name: PolicyRandom, Rank: 20, New: func(Config) Policy { return randomPolicy{} }})
}

type randomPolicy struct{}

func (randomPolicy) Needs() PolicyNeeds { return PolicyNeeds{} }

func (randomPolicy) Score(*RouteInput, []Candidate) {}

func (randomPolicy) Choose(in *RouteInput, cands []Candidate) (int, string) {
	return in.Rand().Intn(len(cands)), ReasonRandom
}
