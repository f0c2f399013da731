package runtime

import (
	"bytes"
	"sync"
)

// maxLogLine bounds one kept line: a progress bar redrawn with carriage
// returns and no newline must not grow without end.
const maxLogLine = 4096

// LogRing keeps the last lines written to it. It is an io.Writer for an
// engine's stdout and stderr; a line is kept once its newline arrives, or
// when it reaches maxLogLine bytes. Lines are numbered from 0 in the order
// written, so that a reader can ask for those after the last it saw
// (LinesSince) and wait for more without polling. Safe for concurrent use.
type LogRing struct {
	mu      sync.Mutex
	lines   []string // ring of up to cap(lines) lines
	next    int      // where the next line goes once the ring is full
	partial []byte
	written uint64 // complete lines ever kept: the number of the next
	// more is closed when the next line is kept. It is made only when a
	// reader asks for it, so that writing stays free of allocations
	// beyond the lines themselves while nobody follows.
	more chan struct{}
	// onLine, when set, sees every complete line (the daemon's log, a
	// diagnosis); it runs with mu held and must not call back.
	onLine func(string)
}

// NewLogRing keeps the last n lines (at least one).
func NewLogRing(n int, onLine func(string)) *LogRing {
	return &LogRing{lines: make([]string, 0, max(n, 1)), onLine: onLine}
}

// Write splits p into lines. It never fails.
func (r *LogRing) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		end := bytes.IndexAny(p, "\r\n")
		found := end >= 0
		if !found {
			end = len(p)
		}
		if room := maxLogLine - len(r.partial); end > room {
			// Too long for one line: keep it as several.
			r.partial = append(r.partial, p[:room]...)
			p = p[room:]
			r.flushLocked()
			continue
		}
		r.partial = append(r.partial, p[:end]...)
		if !found {
			break
		}
		p = p[end+1:]
		r.flushLocked()
	}
	return n, nil
}

func (r *LogRing) flushLocked() {
	line := string(bytes.TrimRight(r.partial, " \t"))
	r.partial = r.partial[:0]
	if line == "" {
		return
	}
	if r.onLine != nil {
		r.onLine(line)
	}
	r.written++
	if r.more != nil {
		close(r.more)
		r.more = nil
	}
	if len(r.lines) < cap(r.lines) {
		r.lines = append(r.lines, line)
		return
	}
	r.lines[r.next] = line
	r.next = (r.next + 1) % len(r.lines)
}

// LinesSince returns the complete lines numbered seq and after that the
// ring still keeps, oldest first; the number the next line will have; and
// a channel closed once that line is kept. Lines gone from the ring are
// skipped: next-uint64(len(lines)) > seq says some were. A line still being
// written is not returned until it is complete.
func (r *LogRing) LinesSince(seq uint64) (lines []string, next uint64, more <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.more == nil {
		r.more = make(chan struct{})
	}
	next = r.written
	oldest := next - uint64(len(r.lines))
	seq = max(seq, oldest)
	if seq >= next {
		return nil, next, r.more
	}
	// The kept lines in order are lines[r.next:] then lines[:r.next]; the
	// oldest has number `oldest`.
	skip := int(seq - oldest)
	out := make([]string, 0, int(next-seq))
	ordered := [2][]string{r.lines[r.next:], r.lines[:r.next]}
	for _, part := range ordered {
		if skip >= len(part) {
			skip -= len(part)
			continue
		}
		out = append(out, part[skip:]...)
		skip = 0
	}
	return out, next, r.more
}

// Lines returns the kept lines, oldest first, and a line still being
// written last.
func (r *LogRing) Lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.lines)+1)
	out = append(out, r.lines[r.next:]...)
	out = append(out, r.lines[:r.next]...)
	if len(r.partial) > 0 {
		out = append(out, string(r.partial))
	}
	return out
}

// Tail returns up to n of the last lines.
func Tail(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}
