package console

import (
	"sync"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// loginLimiter slows password and token guessing. An attempt is counted
// as a failure when it begins (begin), before its check runs, and one
// client address has one attempt in flight at a time: parallel guesses
// from one address are refused, not checked. Each client address gets a
// few free failures, then must wait twice as long after each further one
// (up to maxDelay), counted from the failure's answer; a success clears
// its record. Across all addresses,
// more than globalFailures failures within globalWindow make everyone
// wait out the window, so that an attacker with many addresses gains
// little; one address, held to its own delays, fails a handful of times a
// minute and cannot reach that cap to lock the owner out.
type loginLimiter struct {
	clock clock.Clock

	freeFailures   int
	baseDelay      time.Duration
	maxDelay       time.Duration
	globalFailures int
	globalWindow   time.Duration

	mu       sync.Mutex
	clients  map[string]*loginFailures
	recent   []time.Time // failures within globalWindow, oldest first
	lastTrim time.Time
}

type loginFailures struct {
	count    int
	until    time.Time // no attempt before this
	last     time.Time
	inFlight time.Time // when the attempt being checked began; zero: none
}

// maxAttempt is how long an attempt in flight holds back its client's
// next: past it, the attempt is taken for lost (its handler failed before
// it settled) and no longer blocks.
const maxAttempt = time.Minute

// loginOutcome is how an attempt that began ended.
type loginOutcome int

const (
	loginFailed    loginOutcome = iota // a wrong secret: stays counted
	loginSucceeded                     // forgets the client's failures
	loginUncounted                     // not the client's fault (a store error): as if never tried
)

func newLoginLimiter(clk clock.Clock) *loginLimiter {
	return &loginLimiter{
		clock:          clk,
		freeFailures:   3,
		baseDelay:      2 * time.Second,
		maxDelay:       15 * time.Minute,
		globalFailures: 100,
		globalWindow:   time.Minute,
		clients:        make(map[string]*loginFailures),
	}
}

// begin starts an attempt of client: when the client must wait (its
// delay, the global cap, or another of its attempts in flight) it returns
// that wait and no attempt; otherwise the attempt is counted as a failure
// now, and end, called once with the outcome, settles it.
func (l *loginLimiter) begin(client string) (end func(loginOutcome), wait time.Duration) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trimGlobal(now)
	f, ok := l.clients[client]
	switch {
	case ok && !f.inFlight.IsZero() && now.Sub(f.inFlight) < maxAttempt:
		return nil, l.baseDelay
	case ok && now.Before(f.until):
		return nil, f.until.Sub(now)
	case len(l.recent) >= l.globalFailures:
		return nil, l.recent[0].Add(l.globalWindow).Sub(now)
	}
	if !ok {
		l.forgetIdle(now)
		f = &loginFailures{}
		l.clients[client] = f
	}
	before := *f
	l.failLocked(f, now)
	f.inFlight = now
	return func(o loginOutcome) {
		l.mu.Lock()
		defer l.mu.Unlock()
		f.inFlight = time.Time{}
		if o == loginFailed {
			// The wait runs from the answer, which is when the client
			// learns of the failure: a slow check does not use it up.
			if d := l.delayAfter(f.count); d > 0 {
				f.until = l.clock.Now().Add(d)
			}
			return
		}
		l.unrecordLocked(now)
		switch {
		case o == loginSucceeded:
			if l.clients[client] == f {
				delete(l.clients, client)
			}
		default:
			f.count, f.until, f.last = before.count, before.until, before.last
		}
	}, 0
}

// forget drops client's record.
func (l *loginLimiter) forget(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.clients, client)
}

// failLocked counts a failure of f at now.
func (l *loginLimiter) failLocked(f *loginFailures, now time.Time) {
	l.recent = append(l.recent, now)
	f.count++
	f.last = now
	if d := l.delayAfter(f.count); d > 0 {
		f.until = now.Add(d)
	}
}

// delayAfter is how long a client waits after its count-th failure: none
// for the free ones, then baseDelay doubling up to maxDelay.
func (l *loginLimiter) delayAfter(count int) time.Duration {
	over := count - l.freeFailures
	switch {
	case over <= 0:
		return 0
	case over >= 30:
		return l.maxDelay
	}
	return min(l.baseDelay<<(over-1), l.maxDelay)
}

// unrecordLocked takes back one global failure counted at.
func (l *loginLimiter) unrecordLocked(at time.Time) {
	for i := len(l.recent) - 1; i >= 0; i-- {
		if l.recent[i].Equal(at) {
			l.recent = append(l.recent[:i], l.recent[i+1:]...)
			return
		}
	}
}

func (l *loginLimiter) trimGlobal(now time.Time) {
	i := 0
	for i < len(l.recent) && !now.Before(l.recent[i].Add(l.globalWindow)) {
		i++
	}
	l.recent = l.recent[i:]
}

// forgetIdle drops clients that have not failed for a day, so that the
// map stays small; it runs at most once an hour.
func (l *loginLimiter) forgetIdle(now time.Time) {
	if now.Sub(l.lastTrim) < time.Hour {
		return
	}
	l.lastTrim = now
	for k, f := range l.clients {
		if now.Sub(f.last) > 24*time.Hour && !now.Before(f.until) {
			delete(l.clients, k)
		}
	}
}
