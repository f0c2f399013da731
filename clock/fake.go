package clock

import (
	"sync"
	"time"
)

// Fake is a Clock whose time moves only when a test moves it (Advance,
// Set). Timers and tickers fire during Advance, in time order, each
// receiving the time it was due; like time.Ticker, a ticker holds at most
// one tick that nobody has read.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*waiter
}

// waiter is an After or a ticker: due at at, every period (0: once).
type waiter struct {
	at      time.Time
	period  time.Duration
	c       chan time.Time
	stopped bool
}

// NewFake returns a Fake at t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

var _ Clock = (*Fake)(nil)

// Now is the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After fires once d has been advanced past.
func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &waiter{at: f.now.Add(d), c: make(chan time.Time, 1)}
	f.waiters = append(f.waiters, w)
	return w.c
}

// NewTicker fires every d of advanced time until stopped.
func (f *Fake) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &waiter{at: f.now.Add(d), period: d, c: make(chan time.Time, 1)}
	f.waiters = append(f.waiters, w)
	return w.c, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		w.stopped = true
	}
}

// Advance moves the time forward by d, firing what falls due.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the time to t (never backwards), firing what falls due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.Before(f.now) {
		return
	}
	for {
		var next *waiter
		for _, w := range f.waiters {
			if !w.stopped && !w.at.After(t) && (next == nil || w.at.Before(next.at)) {
				next = w
			}
		}
		if next == nil {
			break
		}
		f.now = next.at
		select {
		case next.c <- next.at:
		default: // a tick nobody read: dropped, as time.Ticker does
		}
		if next.period > 0 {
			next.at = next.at.Add(next.period)
		} else {
			next.stopped = true
		}
	}
	f.now = t
	live := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.stopped {
			live = append(live, w)
		}
	}
	clear(f.waiters[len(live):])
	f.waiters = live
}
