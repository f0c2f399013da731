package console

import (
	"sync"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// loginLimiter slows password and token guessing. Each client address
// gets a few free failures, then must wait twice as long after each
// further one (up to maxDelay); a success clears its record. Across all
// addresses, more than globalFailures failures within globalWindow make
// everyone wait out the window, so that an attacker with many addresses
// gains little.
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
	count int
	until time.Time // no attempt before this
	last  time.Time
}

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

// wait returns how long client must wait before its next attempt; zero
// lets it try now.
func (l *loginLimiter) wait(client string) time.Duration {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trimGlobal(now)
	var d time.Duration
	if f, ok := l.clients[client]; ok && now.Before(f.until) {
		d = f.until.Sub(now)
	}
	if len(l.recent) >= l.globalFailures {
		d = max(d, l.recent[0].Add(l.globalWindow).Sub(now))
	}
	return d
}

// failed records a failed attempt of client.
func (l *loginLimiter) failed(client string) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recent = append(l.recent, now)
	f, ok := l.clients[client]
	if !ok {
		l.forgetIdle(now)
		f = &loginFailures{}
		l.clients[client] = f
	}
	f.count++
	f.last = now
	if over := f.count - l.freeFailures; over > 0 {
		delay := l.maxDelay
		if over < 30 {
			delay = min(l.baseDelay<<(over-1), l.maxDelay)
		}
		f.until = now.Add(delay)
	}
}

// succeeded forgets client's failures.
func (l *loginLimiter) succeeded(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.clients, client)
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
