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
// The timeouts that close idle and silent connections belong to each
// server (fasthttp's or net/http's); HeaderTimeout and IdleTimeout are the
// defaults Hearth's servers use.
package netguard
