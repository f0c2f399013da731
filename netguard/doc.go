// Package netguard guards the listeners Hearth serves on against clients
// that hold connections open or use up the process's file descriptors.
//
// Listen wraps a listener so that at most MaxConns of its connections are
// open at once (further clients wait in the kernel's backlog until one
// closes), and so that Accept never returns a temporary error such as
// EMFILE ("too many open files"): it waits, backing off up to a second, and
// tries again. A server whose accept loop gives up on such an error (as
// fasthttp's does) would otherwise stop serving for good.
//
// The timeouts that close silent and idle connections are set on each
// server: fasthttp's (the API gateway sets them from its Config) or
// net/http's, through Server and BodyDeadline. Headers, and the TLS
// handshake before them, get HeaderTimeout; a body BodyTimeout; a kept
// connection IdleTimeout. An answer gets no deadline, so that streams last.
package netguard
