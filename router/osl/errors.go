package osl

import (
	"math"
	"slices"
	"sync"
)

// WarmTurns is how many turns of a session the estimator must have learned
// from before its predictions count as warm in Summary.
const WarmTurns = 3

// Errors keeps the relative errors |predicted − actual| / actual of the
// most recent predictions in two rings: all of them, and those made after
// the session's first WarmTurns turns. It is safe for concurrent use.
type Errors struct {
	mu          sync.Mutex
	all, warm   ring
	unpredicted int
}

type ring struct {
	v    []float64
	next int
	full bool
}

func (r *ring) add(x float64) {
	r.v[r.next] = x
	r.next++
	if r.next == len(r.v) {
		r.next, r.full = 0, true
	}
}

func (r *ring) values() []float64 {
	if r.full {
		return slices.Clone(r.v)
	}
	return slices.Clone(r.v[:r.next])
}

// NewErrors returns a record of the last window predictions' errors
// (window ≥ 1).
func NewErrors(window int) *Errors {
	window = max(window, 1)
	return &Errors{all: ring{v: make([]float64, window)}, warm: ring{v: make([]float64, window)}}
}

// Add records the outcome of a prediction: est as Predict returned it and
// the request's actual output tokens. A request that had no estimate is
// counted apart; one that produced no tokens is left out.
func (e *Errors) Add(est Estimate, actual int) {
	if actual <= 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if est.Tokens <= 0 {
		e.unpredicted++
		return
	}
	rel := math.Abs(float64(est.Tokens-actual)) / float64(actual)
	e.all.add(rel)
	if est.SessionTurns >= WarmTurns {
		e.warm.add(rel)
	}
}

// Summary is the error of recent predictions: p50 and p90 of the relative
// error, over all predictions and over the warm ones (made after the
// session's first WarmTurns turns).
type Summary struct {
	N       int     `json:"n"`
	P50     float64 `json:"p50"`
	P90     float64 `json:"p90"`
	WarmN   int     `json:"warm_n"`
	WarmP50 float64 `json:"warm_p50"`
	WarmP90 float64 `json:"warm_p90"`
	Unknown int     `json:"unpredicted"` // requests that ended without an estimate
}

// Summary reports the errors recorded so far.
func (e *Errors) Summary() Summary {
	e.mu.Lock()
	all, warm, unknown := e.all.values(), e.warm.values(), e.unpredicted
	e.mu.Unlock()
	s := Summary{N: len(all), WarmN: len(warm), Unknown: unknown}
	s.P50, s.P90 = Quantile(all, 0.5), Quantile(all, 0.9)
	s.WarmP50, s.WarmP90 = Quantile(warm, 0.5), Quantile(warm, 0.9)
	return s
}

// Quantile returns the q-quantile of xs by the nearest-rank method (0 for
// none); it sorts xs.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}
