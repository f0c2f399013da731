package adminapi

import (
	"errors"
	"sync"
)

// fakeEngines is a daemon's engines: a list, kept logs, and a followed
// log the test writes to.
type fakeEngines struct {
	list []Engine
	logs map[string][]string

	mu     sync.Mutex
	follow map[string]*fakeLog
}

// fakeLog is an engine's followed log: lines written so far, closed More
// channels tell a follower of new ones.
type fakeLog struct {
	mu         sync.Mutex
	lines      []string
	run        int
	more       chan struct{}
	relaunched chan struct{}
}

func newFakeLog(lines ...string) *fakeLog {
	return &fakeLog{lines: lines, more: make(chan struct{}), relaunched: make(chan struct{})}
}

func (l *fakeLog) write(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	close(l.more)
	l.more = make(chan struct{})
}

// relaunch starts a new run, whose lines are lines.
func (l *fakeLog) relaunch(lines ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines, l.run = lines, l.run+1
	close(l.relaunched)
	l.relaunched, l.more = make(chan struct{}), make(chan struct{})
}

// pageAfter is the page after the first seen lines of run.
func (l *fakeLog) pageAfter(run, seen int) LogPage {
	l.mu.Lock()
	defer l.mu.Unlock()
	if run != l.run {
		seen = 0
	}
	p := LogPage{Lines: append([]string(nil), l.lines[seen:]...), NewRun: run != l.run, More: l.more, Relaunched: l.relaunched}
	nextRun, nextSeen := l.run, len(l.lines)
	p.Next = func() LogPage { return l.pageAfter(nextRun, nextSeen) }
	return p
}

func (f *fakeEngines) Engines() []Engine { return f.list }

func (f *fakeEngines) Logs(name string) ([]string, bool) {
	lines, ok := f.logs[name]
	return lines, ok
}

func (f *fakeEngines) FollowLogs(name string) (LogPage, bool) {
	f.mu.Lock()
	l, ok := f.follow[name]
	f.mu.Unlock()
	if !ok {
		return LogPage{}, false
	}
	l.mu.Lock()
	run := l.run
	l.mu.Unlock()
	return l.pageAfter(run, 0), true
}

type fakeSessions []Session

func (f fakeSessions) Sessions() []Session { return f }

// fakeCluster is a cluster node whose operations answer as set.
type fakeCluster struct {
	nodes    NodeList
	requests JoinRequestList
	// err answers every operation when set.
	err error
	// leaveWarning is Leave's warning.
	leaveWarning error
	done         []string // "revoke ID", "accept ID", …
}

func (f *fakeCluster) Nodes() NodeList               { return f.nodes }
func (f *fakeCluster) JoinRequests() JoinRequestList { return f.requests }

func (f *fakeCluster) Revoke(id string) error     { return f.do("revoke " + id) }
func (f *fakeCluster) AcceptJoin(id string) error { return f.do("accept " + id) }
func (f *fakeCluster) RejectJoin(id string) error { return f.do("reject " + id) }

func (f *fakeCluster) Leave() (string, error, error) {
	if err := f.do("leave"); err != nil {
		return "", nil, err
	}
	return f.nodes.NodeID, f.leaveWarning, nil
}

func (f *fakeCluster) do(op string) error {
	if f.err != nil {
		return f.err
	}
	f.done = append(f.done, op)
	return nil
}

var errFlush = errors.New("cluster: nats: flush timeout")

// fakeDrain is a node's drain: by hand, and for a GPU taken when gpuTaken
// says by what.
type fakeDrain struct {
	manual   bool
	gpuTaken string
}

func (d *fakeDrain) Drain() NodeDrain {
	out := NodeDrain{Manual: d.manual, GPUTaken: d.gpuTaken != "", TakenBy: d.gpuTaken}
	out.Drained = out.Manual || out.GPUTaken
	switch {
	case out.Manual && out.GPUTaken:
		out.Text = "drained (manual; GPU taken by another program)"
	case out.Manual:
		out.Text = "drained (manual)"
	case out.GPUTaken:
		out.Text = "drained (GPU taken by another program)"
	default:
		out.Text = "serving"
	}
	return out
}

func (d *fakeDrain) SetManual(drained bool) NodeDrain {
	d.manual = drained
	return d.Drain()
}
