package clocktest

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of ending the
// test, so that WaitFor's own failure can be checked.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	for _, a := range args {
		if s, ok := a.(string); ok {
			r.failed += " " + s
		}
	}
}

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	WaitFor(t, "the third call", 5*time.Second, func() bool { return calls.Add(1) == 3 })
	if n := calls.Load(); n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

func TestWaitForFailsNamingWhatItWaitedFor(t *testing.T) {
	r := &recorder{TB: t}
	WaitFor(r, "a thing that never happens", 50*time.Millisecond, func() bool { return r.failed != "" })
	if !strings.Contains(r.failed, "timed out") || !strings.Contains(r.failed, "a thing that never happens") {
		t.Fatalf("failure %q names neither the timeout nor what was awaited", r.failed)
	}
}
