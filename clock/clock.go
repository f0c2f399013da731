package clock

import "time"

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
	// NewTicker returns a channel that receives every d, holding at most
	// one tick as time.Ticker does, and a func that stops it.
	NewTicker(d time.Duration) (<-chan time.Time, func())
}

// Real is the system's clock.
type Real struct{}

func (Real) Now() time.Time                         { return time.Now() }
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (Real) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// Or returns c, or Real when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}
