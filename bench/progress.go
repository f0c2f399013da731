package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// ProgressInterval is the least time between two redraws of the progress
// line.
const ProgressInterval = 100 * time.Millisecond

// ProgressState is what the progress line shows.
type ProgressState struct {
	// Label names the run, e.g. "kv, 16 sessions".
	Label string
	// SessionsDone of SessionsTotal have finished; a zero total means the
	// number is not known in advance.
	SessionsDone, SessionsTotal int
	// Elapsed of Duration of the workload's own time (virtual in a
	// simulation) have passed; a zero Duration means no time limit.
	Elapsed, Duration time.Duration
	// Requests have ended so far, Errors of them failed.
	Requests, Errors int
	// TTFTP50 is the median time to first token so far.
	TTFTP50 time.Duration
}

// Progress draws a one-line progress bar on a terminal, redrawn in place at
// most every ProgressInterval. When the writer is not a terminal it writes
// nothing at all, so logs and pipes stay clean. Write errors are ignored: a
// broken progress display must not stop a benchmark. It is not safe for
// concurrent use.
type Progress struct {
	w     io.Writer
	tty   bool
	last  time.Time
	drawn bool
}

// NewProgress returns a progress display on w; isTerminal is the caller's
// decision whether w is a terminal.
func NewProgress(w io.Writer, isTerminal bool) *Progress {
	return &Progress{w: w, tty: isTerminal}
}

// Update redraws the line with s, unless the last redraw was less than
// ProgressInterval ago.
func (p *Progress) Update(s ProgressState) {
	if !p.tty {
		return
	}
	now := time.Now()
	if p.drawn && now.Sub(p.last) < ProgressInterval {
		return
	}
	p.last, p.drawn = now, true
	io.WriteString(p.w, "\r\x1b[2K"+progressLine(s))
}

// Finish draws s unconditionally and ends the line, leaving the final state
// on the terminal; the next Update starts a new line.
func (p *Progress) Finish(s ProgressState) {
	if !p.tty {
		return
	}
	io.WriteString(p.w, "\r\x1b[2K"+progressLine(s)+"\n")
	p.drawn = false
}

// progressBarWidth is the number of cells of the bar.
const progressBarWidth = 24

// progressLine renders s without any terminal control codes.
func progressLine(s ProgressState) string {
	var b strings.Builder
	if s.Label != "" {
		b.WriteString(s.Label)
		b.WriteString("  ")
	}
	frac := -1.0
	switch {
	case s.SessionsTotal > 0:
		frac = float64(s.SessionsDone) / float64(s.SessionsTotal)
	case s.Duration > 0:
		frac = float64(s.Elapsed) / float64(s.Duration)
	}
	if frac >= 0 {
		frac = min(frac, 1)
		full := int(frac * progressBarWidth)
		fmt.Fprintf(&b, "[%s%s] %3d%%  ", strings.Repeat("#", full), strings.Repeat(".", progressBarWidth-full), int(frac*100))
	}
	if s.SessionsTotal > 0 {
		fmt.Fprintf(&b, "sessions %d/%d  ", s.SessionsDone, s.SessionsTotal)
	} else {
		fmt.Fprintf(&b, "sessions %d  ", s.SessionsDone)
	}
	if s.Duration > 0 {
		fmt.Fprintf(&b, "%v/%v  ", s.Elapsed.Truncate(time.Second), s.Duration)
	}
	fmt.Fprintf(&b, "requests %d", s.Requests)
	if s.Errors > 0 {
		fmt.Fprintf(&b, " (%d errors)", s.Errors)
	}
	fmt.Fprintf(&b, "  TTFT p50 %v", s.TTFTP50.Round(time.Millisecond))
	return b.String()
}
