package api

import (
	"context"
	"net"
	"sync"
	"time"
)

// clientWatcher notices clients that went away while their requests wait
// for something to send: in the router's queue, or for a silent engine
// during a long prefill. Every interval it peeks at each watched
// connection and cancels the request of a client that closed it. A write
// to a vanished client fails, which is how a flowing stream notices sooner.
//
// One ticker serves every request in flight: a timer per request would
// wake the network poller's thread for each request, on its way to the
// engine.
type clientWatcher struct {
	every time.Duration

	mu      sync.Mutex
	watches map[*clientWatch]struct{}
}

func newClientWatcher(every time.Duration) *clientWatcher {
	return &clientWatcher{every: every, watches: make(map[*clientWatch]struct{})}
}

// clientWatch is one request's watch.
type clientWatch struct {
	cw     *clientWatcher
	conn   net.Conn
	cancel context.CancelCauseFunc
	until  time.Time // guarded by cw.mu; when set, the watch stops then
}

// watch starts watching conn; the context it returns ends when the client
// goes away or the watch is stopped.
func (cw *clientWatcher) watch(conn net.Conn) (context.Context, *clientWatch) {
	ctx, cancel := context.WithCancelCause(context.Background())
	w := &clientWatch{cw: cw, conn: conn, cancel: cancel}
	cw.mu.Lock()
	cw.watches[w] = struct{}{}
	cw.mu.Unlock()
	return ctx, w
}

// run checks the watched connections every interval until done is closed.
func (cw *clientWatcher) run(done <-chan struct{}) {
	t := time.NewTicker(cw.every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			cw.check(now)
		}
	}
}

// check cancels the requests whose clients left, and stops the watches
// whose time is up.
func (cw *clientWatcher) check(now time.Time) {
	cw.mu.Lock()
	watches := make([]*clientWatch, 0, len(cw.watches))
	var expired []*clientWatch
	for w := range cw.watches {
		if !w.until.IsZero() && now.After(w.until) {
			expired = append(expired, w)
			continue
		}
		watches = append(watches, w)
	}
	cw.mu.Unlock()
	for _, w := range expired {
		w.stop()
	}
	// Peeking is a system call each: done without the lock, which every
	// request takes on its way in and out.
	for _, w := range watches {
		if peerClosed(w.conn) {
			w.cancel(errClientGone)
		}
	}
}

// stop ends the watch and cancels its context, which ends the engine
// request if it is still running.
func (w *clientWatch) stop() {
	w.cw.mu.Lock()
	delete(w.cw.watches, w)
	w.cw.mu.Unlock()
	w.cancel(context.Canceled)
}

// stopAfter stops the watch once d has passed, give or take an interval.
func (w *clientWatch) stopAfter(d time.Duration) {
	w.cw.mu.Lock()
	w.until = time.Now().Add(d)
	w.cw.mu.Unlock()
}
