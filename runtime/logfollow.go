package runtime

// LogFollower is a Handle whose log can be read from a given line on and
// waited on. The runtimes that keep a LogRing implement it by handing the
// call to LogRing.LinesSince. The Supervisor uses it to follow an engine's
// log as it grows (hearth logs -f) and to track a start without rereading
// the whole log; a Handle without it is read whole through Logs.
type LogFollower interface {
	// LogsSince returns the complete lines numbered seq and after that are
	// still kept (the first line of a run is 0), the number of the next
	// line, and a channel closed once that line is written.
	LogsSince(seq uint64) (lines []string, next uint64, more <-chan struct{})
}

// LogCursor is a place in an engine's log, for LogsAfter: which run (each
// launch starts a new log) and which line. The zero value is the start of
// what the current run still keeps.
type LogCursor struct {
	run int
	seq uint64
}

// LogPage is an engine's log lines after a cursor.
type LogPage struct {
	Lines []string
	Next  LogCursor // where the next page starts
	// NewRun says Lines start a run after the cursor's: the engine was
	// launched again.
	NewRun bool
	// More is closed once the current run writes a line after Lines. It
	// is nil when the engine's runtime cannot tell (its Handle is not a
	// LogFollower): then a run's log comes whole, once, and only
	// Relaunched brings news.
	More <-chan struct{}
	// Relaunched is closed when the engine is launched again.
	Relaunched <-chan struct{}
}

// LogsAfter returns an engine's log lines after c; false when no engine
// has that name. A follower calls it again with the page's Next once More
// or Relaunched is closed.
func (s *Supervisor) LogsAfter(name string, c LogCursor) (LogPage, bool) {
	e := s.engine(name)
	if e == nil {
		return LogPage{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	page := LogPage{Next: LogCursor{run: e.run}, Relaunched: e.relaunched}
	if e.handle == nil {
		return page, true
	}
	sameRun := c.run == e.run
	page.NewRun = !sameRun && c.run != 0
	f, ok := e.handle.(LogFollower)
	if !ok {
		if !sameRun {
			page.Lines = e.handle.Logs()
		}
		return page, true
	}
	seq := c.seq
	if !sameRun {
		seq = 0
	}
	page.Lines, page.Next.seq, page.More = f.LogsSince(seq)
	return page, true
}
