package bench

import (
	"math"
	"math/bits"
)

// Rand is a small deterministic pseudo-random source (SplitMix64). The
// workloads use it instead of math/rand so that a seed gives the same
// workload on every Go release and platform (math/rand/v2 promises its
// sources but not its derived methods): golden files and cross-run
// comparisons depend on it. Its zero value is a valid source
// seeded with 0. It is not safe for concurrent use.
type Rand struct {
	state uint64
}

// NewRand returns a source seeded with seed.
func NewRand(seed uint64) *Rand {
	return &Rand{state: seed}
}

// Uint64 returns 64 uniformly distributed bits.
func (r *Rand) Uint64() uint64 {
	r.state += 0x9e3779b97f4a7c15
	return mix64(r.state)
}

// Float64 returns a uniform value in [0, 1).
func (r *Rand) Float64() float64 {
	return float64(r.Uint64()>>11) / (1 << 53)
}

// IntN returns a uniform value in [0, n); it returns 0 for n <= 0. The
// multiply-shift reduction has a bias below 2^-40 for any n a workload uses.
func (r *Rand) IntN(n int) int {
	if n <= 0 {
		return 0
	}
	hi, _ := bits.Mul64(r.Uint64(), uint64(n))
	return int(hi)
}

// NormFloat64 returns a standard normal value (Box-Muller, one value per
// call so that the stream does not depend on how many were drawn before).
func (r *Rand) NormFloat64() float64 {
	u1 := 1 - r.Float64() // (0, 1]: keeps the logarithm finite
	u2 := r.Float64()
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// mix64 is SplitMix64's finaliser, a bijection on 64 bits.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// deriveSeed combines a seed with labels into an independent seed, so that
// every part of a workload (the shared prefix, session 12, block 345) has a
// stream of its own that does not depend on the order parts are made in.
func deriveSeed(seed uint64, labels ...uint64) uint64 {
	h := mix64(seed ^ 0x5851f42d4c957f2d)
	for _, l := range labels {
		h = mix64(h ^ mix64(l+0x9e3779b97f4a7c15))
	}
	return h
}
