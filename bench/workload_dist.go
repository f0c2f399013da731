package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// DurationDist is a distribution of durations, such as a tool's running
// time. String gives the form ParseDist reads back.
type DurationDist interface {
	Sample(r *Rand) time.Duration
	String() string
}

// z90 is the standard normal quantile at 0.9.
const z90 = 1.2815515655446004

// LogNormal is a log-normal distribution given by its median and 90th
// percentile, the two figures people know about tool latencies; P90 must be
// at least Median. Samples are rounded to the millisecond.
type LogNormal struct {
	Median, P90 time.Duration
}

// Sample draws one duration.
func (d LogNormal) Sample(r *Rand) time.Duration {
	mu := math.Log(d.Median.Seconds())
	sigma := math.Log(d.P90.Seconds()/d.Median.Seconds()) / z90
	s := math.Exp(mu + sigma*r.NormFloat64())
	// A wide distribution has a far tail: cap it well inside time.Duration.
	return time.Duration(math.Round(min(s, maxSample.Seconds())*1000)) * time.Millisecond
}

// maxSample caps samples of a distribution with an unbounded tail.
const maxSample = 10 * maxDist

func (d LogNormal) String() string { return "lognormal:" + d.Median.String() + "," + d.P90.String() }

// MarshalJSON writes {"kind":"lognormal","median":"3s","p90":"20s"}.
func (d LogNormal) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Kind   string `json:"kind"`
		Median string `json:"median"`
		P90    string `json:"p90"`
	}{"lognormal", d.Median.String(), d.P90.String()})
}

// Constant is a distribution with a single value.
type Constant struct {
	Value time.Duration
}

// Sample returns the value.
func (d Constant) Sample(*Rand) time.Duration { return d.Value }

func (d Constant) String() string { return "const:" + d.Value.String() }

// MarshalJSON writes {"kind":"const","value":"2s"}.
func (d Constant) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Kind  string `json:"kind"`
		Value string `json:"value"`
	}{"const", d.Value.String()})
}

// Uniform is a uniform distribution over [Min, Max], rounded to the
// millisecond.
type Uniform struct {
	Min, Max time.Duration
}

// Sample draws one duration.
func (d Uniform) Sample(r *Rand) time.Duration {
	s := d.Min.Seconds() + r.Float64()*(d.Max-d.Min).Seconds()
	return time.Duration(math.Round(s*1000)) * time.Millisecond
}

func (d Uniform) String() string { return "uniform:" + d.Min.String() + "," + d.Max.String() }

// MarshalJSON writes {"kind":"uniform","min":"1s","max":"5s"}.
func (d Uniform) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Kind string `json:"kind"`
		Min  string `json:"min"`
		Max  string `json:"max"`
	}{"uniform", d.Min.String(), d.Max.String()})
}

// ErrBadDist is returned by ParseDist for text it cannot read.
var ErrBadDist = errors.New("bad distribution")

// maxDist bounds every duration ParseDist accepts, so that sampled values
// and sums of them cannot overflow a time.Duration.
const maxDist = 1000 * time.Hour

// ParseDist reads a duration distribution from a command-line value:
//
//	lognormal:MEDIAN,P90   e.g. lognormal:3s,20s
//	uniform:MIN,MAX        e.g. uniform:1s,5s
//	const:VALUE            e.g. const:2s (a bare duration means the same)
//
// Durations use time.ParseDuration's syntax, lie in [0, 1000h], and a
// log-normal's median must be positive.
func ParseDist(s string) (DurationDist, error) {
	kind, args, found := strings.Cut(strings.TrimSpace(s), ":")
	if !found {
		kind, args = "const", kind
	}
	var ds []time.Duration
	for a := range strings.SplitSeq(args, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(a))
		if err != nil {
			return nil, fmt.Errorf("bench: %q: %w: %w", s, ErrBadDist, err)
		}
		if d < 0 || d > maxDist {
			return nil, fmt.Errorf("bench: %q: %w: %v out of [0, %v]", s, ErrBadDist, d, maxDist)
		}
		ds = append(ds, d)
	}
	want := map[string]int{"lognormal": 2, "uniform": 2, "const": 1}[kind]
	if want == 0 {
		return nil, fmt.Errorf("bench: %q: %w: unknown kind %q (want lognormal, uniform or const)", s, ErrBadDist, kind)
	}
	if len(ds) != want {
		return nil, fmt.Errorf("bench: %q: %w: %s takes %d durations", s, ErrBadDist, kind, want)
	}
	var d DurationDist
	switch kind {
	case "lognormal":
		d = LogNormal{Median: ds[0], P90: ds[1]}
	case "uniform":
		d = Uniform{Min: ds[0], Max: ds[1]}
	default:
		d = Constant{Value: ds[0]}
	}
	if err := validateDist(d); err != nil {
		return nil, fmt.Errorf("bench: %q: %w", s, err)
	}
	return d, nil
}

// validateDist checks a distribution's parameters, whoever built it.
func validateDist(d DurationDist) error {
	switch d := d.(type) {
	case nil:
		return fmt.Errorf("%w: none given", ErrBadDist)
	case LogNormal:
		if d.Median <= 0 || d.P90 < d.Median || d.P90 > maxDist {
			return fmt.Errorf("%w: lognormal needs 0 < median <= p90 <= %v", ErrBadDist, maxDist)
		}
	case Uniform:
		if d.Min < 0 || d.Max < d.Min || d.Max > maxDist {
			return fmt.Errorf("%w: uniform needs 0 <= min <= max <= %v", ErrBadDist, maxDist)
		}
	case Constant:
		if d.Value < 0 || d.Value > maxDist {
			return fmt.Errorf("%w: const needs 0 <= value <= %v", ErrBadDist, maxDist)
		}
	}
	return nil
}

// IntRange is an inclusive range of token counts; samples are uniform in it.
type IntRange struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// Sample draws one value.
func (g IntRange) Sample(r *Rand) int {
	return g.Min + r.IntN(g.Max-g.Min+1)
}

func (g IntRange) String() string {
	if g.Min == g.Max {
		return strconv.Itoa(g.Min)
	}
	return strconv.Itoa(g.Min) + "-" + strconv.Itoa(g.Max)
}

// maxTokens bounds token counts in a workload's configuration.
const maxTokens = 1 << 24

func (g IntRange) validate(name string, min int) error {
	if g.Min < min || g.Max < g.Min || g.Max > maxTokens {
		return fmt.Errorf("bench: %s %v: want %d <= min <= max <= %d", name, g, min, maxTokens)
	}
	return nil
}

// ErrBadRange is returned by ParseIntRange for text it cannot read.
var ErrBadRange = errors.New("bad range")

// ParseIntRange reads "MIN-MAX" or a single number (a range of one value).
func ParseIntRange(s string) (IntRange, error) {
	lo, hi, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found {
		hi = lo
	}
	a, err := strconv.Atoi(strings.TrimSpace(lo))
	if err != nil {
		return IntRange{}, fmt.Errorf("bench: range %q: %w", s, ErrBadRange)
	}
	b, err := strconv.Atoi(strings.TrimSpace(hi))
	if err != nil {
		return IntRange{}, fmt.Errorf("bench: range %q: %w", s, ErrBadRange)
	}
	if a < 0 || b < a || b > maxTokens {
		return IntRange{}, fmt.Errorf("bench: range %q: %w: want 0 <= min <= max <= %d", s, ErrBadRange, maxTokens)
	}
	return IntRange{Min: a, Max: b}, nil
}
