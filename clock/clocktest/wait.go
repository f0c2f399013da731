package clocktest

import (
	"testing"
	"time"
)

// pollEvery is how often WaitFor checks: short beside the waits tests
// use (seconds), long enough not to busy a 2-core machine.
const pollEvery = 20 * time.Millisecond

// WaitFor calls cond until it returns true, and fails t if that takes
// longer than timeout, saying "timed out after <timeout> waiting for
// <what>".
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(pollEvery)
	}
}
