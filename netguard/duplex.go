package netguard

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// FullDuplex serves h in full duplex (http.ResponseController's
// EnableFullDuplex): h may answer while something it started, such as a
// reverse proxy's transport, still reads the request's body. h sees the
// body behind a fence, and FullDuplex returns only once no read of the
// body is in progress, none can start (a read after the fence fails with
// http.ErrBodyReadAfterClose), and the body has been read to its end or
// closed.
//
// net/http's HTTP/1 server does not keep its connection safe from a body
// read that outlives the handler, nor, in full duplex, from a body left
// unread (golang/go#68560). When the handler returns it stops a background
// read of the connection in progress, then closes the body, which reads
// what is left of it; at the body's end net/http starts a background read
// of the connection, which then nobody stops, and the server's next read
// of the connection panics with "invalid concurrent Body.Read call": its
// read of the next request, or a read of the next request's body from
// another goroutine (a transport's writeLoop, where nothing recovers the
// panic and the process dies). A read that outlives the handler (a reverse
// proxy's transport may still be in one when the answer has been copied)
// reaches the body's end at the same wrong time. Behind FullDuplex both
// happen while the handler still runs, before net/http's stop.
//
// A read blocked on a client that sends no more holds FullDuplex until
// the client sends or the connection's read deadline (BodyDeadline's)
// passes, as net/http holds a handler that is not in full duplex while it
// reads the rest of the body before the answer.
func FullDuplex(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		orig := r.Body
		fence := &fencedBody{rc: orig}
		r.Body = fence
		returned := false
		defer func() {
			// The server itself asserts the body's type after the
			// handler (an early close of the body ends the connection).
			r.Body = orig
			if !returned {
				// A panic: net/http stops reads and closes the
				// connection, which it will not read again.
				fence.fenced.Store(true)
			}
		}()
		h.ServeHTTP(w, r)
		returned = true
		fence.close(expectsContinue(r))
	})
}

// expectsContinue reports whether the client waits for "100 Continue"
// before it sends the body.
func expectsContinue(r *http.Request) bool {
	return strings.EqualFold(strings.TrimSpace(r.Header.Get("Expect")), "100-continue")
}

// fencedBody is a request body that stops being read once fenced.
type fencedBody struct {
	mu     sync.Mutex // held through a read, so that close waits for it
	rc     io.ReadCloser
	read   bool // a read has reached rc
	fenced atomic.Bool
}

func (b *fencedBody) Read(p []byte) (int, error) {
	if b.fenced.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fenced.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	b.read = true
	return b.rc.Read(p)
}

// Close fences the body and closes it, as close does; a reverse proxy
// never calls it (it hands its transport a body whose Close does nothing).
func (b *fencedBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fenced.Store(true)
	return b.rc.Close()
}

// close waits for a read in progress, fences the body and closes it:
// net/http's Close reads the rest of a body of up to 256 KiB (larger, it
// gives up and closes the connection after the answer), so the body's end,
// and the background read net/http starts there, come before the handler
// returns. A client that waits for "100 Continue", which only a read sends,
// sends no body: net/http closes that connection after the answer, and
// reading the body would wait for it in vain.
func (b *fencedBody) close(expectsContinue bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fenced.Swap(true) {
		return // closed by the handler
	}
	if expectsContinue && !b.read {
		return
	}
	_ = b.rc.Close()
}
