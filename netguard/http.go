package netguard

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// BodyTimeout is how long a client of a net/http server may take to send
// a request's body.
const BodyTimeout = 60 * time.Second

// Server sets the timeouts of a net/http server: headers (and the TLS
// handshake, which net/http bounds by the same) within HeaderTimeout, kept
// connections closed after IdleTimeout, and no deadline on the answer, so
// that streams last. Bodies need BodyDeadline around the handler:
// net/http's ReadTimeout would also end a long answer, by cancelling its
// request once the deadline passes.
func Server(srv *http.Server) *http.Server {
	if srv.ReadHeaderTimeout <= 0 {
		srv.ReadHeaderTimeout = HeaderTimeout
	}
	if srv.IdleTimeout <= 0 {
		srv.IdleTimeout = IdleTimeout
	}
	return srv
}

// BodyDeadline gives each request's body d to arrive: the connection's
// read deadline is set when the handler starts and lifted once the body
// has been read to its end. The deadline is lifted by a read of the body,
// so nothing may read it after the handler returned: a handler that
// leaves a read of its body to another goroutine (a reverse proxy's
// transport) must be served through FullDuplex.
func BodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			h.ServeHTTP(w, r)
			return
		}
		orig := r.Body
		r.Body = &deadlineBody{ReadCloser: orig, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		// net/http looks at the body in the request after the handler:
		// one it closed early ends the connection, which a wrapper
		// would hide (what follows is the body's rest, not a request).
		defer func() { r.Body = orig }()
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline at the body's end: a deadline
// left in place would cancel the request when it passed.
type deadlineBody struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}
