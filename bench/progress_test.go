package bench

import (
	"bytes"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestProgressQuietWhenNotATerminal(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, false)
	p.Update(ProgressState{Label: "kv", Requests: 3})
	p.Finish(ProgressState{Label: "kv", Requests: 3})
	if b.Len() != 0 {
		t.Errorf("wrote %q to a non-terminal", b.String())
	}
}

// The redraws are throttled on real time, which in the synctest bubble
// moves only when the test sleeps.
func TestProgressThrottlesRedraws(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b bytes.Buffer
		p := NewProgress(&b, true)
		redraws := func() int { return strings.Count(b.String(), "\r\x1b[2K") }

		p.Update(ProgressState{Requests: 1})
		if redraws() != 1 {
			t.Fatalf("first update drew %d times", redraws())
		}
		time.Sleep(ProgressInterval - time.Millisecond)
		p.Update(ProgressState{Requests: 2})
		if redraws() != 1 {
			t.Errorf("an update within %v redrew", ProgressInterval)
		}
		time.Sleep(time.Millisecond)
		p.Update(ProgressState{Requests: 3})
		if redraws() != 2 || !strings.HasSuffix(b.String(), "requests 3  TTFT p50 0s") {
			t.Errorf("after %v: %q", ProgressInterval, b.String())
		}
		p.Finish(ProgressState{Requests: 4})
		if redraws() != 3 || !strings.HasSuffix(b.String(), "requests 4  TTFT p50 0s\n") {
			t.Errorf("Finish did not draw the final state and end the line: %q", b.String())
		}
		p.Update(ProgressState{Requests: 5}) // a new line starts at once
		if redraws() != 4 {
			t.Errorf("the update after Finish was throttled")
		}
	})
}

func TestProgressLine(t *testing.T) {
	tests := []struct {
		name string
		s    ProgressState
		want string
	}{
		{"sessions known", ProgressState{Label: "kv, 16 sessions", SessionsDone: 10, SessionsTotal: 40, Requests: 96, TTFTP50: 812345 * time.Microsecond},
			"kv, 16 sessions  [######..................]  25%  sessions 10/40  requests 96  TTFT p50 812ms"},
		{"by time, with errors", ProgressState{SessionsDone: 3, Elapsed: 90500 * time.Millisecond, Duration: 10 * time.Minute, Requests: 50, Errors: 2, TTFTP50: 1500 * time.Millisecond},
			"[###.....................]  15%  sessions 3  1m30s/10m0s  requests 50 (2 errors)  TTFT p50 1.5s"},
		{"nothing known", ProgressState{Requests: 7},
			"sessions 0  requests 7  TTFT p50 0s"},
		{"overrun is capped", ProgressState{SessionsDone: 50, SessionsTotal: 40},
			"[########################] 100%  sessions 50/40  requests 0  TTFT p50 0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := progressLine(tt.s); got != tt.want {
				t.Errorf("progressLine =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
