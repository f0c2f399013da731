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
// One client address (an IP) holds at most MaxConnsPerAddr of them (a
// quarter by default): a connection beyond that is closed once accepted,
// so that one client cannot take every slot from the others. While an
// address holds three quarters of its share, or the listener three
// quarters of its slots, the read deadlines set on that address's
// connections are cut to CrowdedTimeout, so that kept-idle and slow
// connections give their slots back sooner.
//
// The timeouts that close silent and idle connections are set on each
// server: fasthttp's (the API gateway sets them from its Config) or
// net/http's, through Server and BodyDeadline. Headers, and the TLS
// handshake before them, get HeaderTimeout; a body BodyTimeout; a kept
// connection IdleTimeout. An answer gets no deadline, so that streams last.
//
// A net/http handler that may answer while another goroutine still reads
// its request's body (a reverse proxy, whose transport copies the body
// upstream) is served through FullDuplex. net/http's HTTP/1 server lets a
// read of the body outlive the handler, and in full duplex reads what the
// handler left of the body only after its guard against a second reader
// of the connection: either ends in "invalid concurrent Body.Read call", a
// panic that kills the process when it strikes a transport's goroutine
// (golang/go#68560). FullDuplex fences the body: the handler returns only
// once no read of it is in progress, none can start, and the body has been
// read to its end (or given up on, which closes the connection).
// BodyDeadline goes outside it, and neither leaves its wrapper in the
// request after the handler, where net/http looks for a body it gave up on.
package netguard
