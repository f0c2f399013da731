// Package zmtp connects to one ZMQ endpoint (tcp:// or ipc://) and speaks
// ZMTP 3 over that connection on the caller's goroutine. The router's KV
// event subscriber and the cluster's relay of a local engine's KV events
// read engines through it, and both ask engines for replays with it.
//
// zmq4 does the handshake (NULL security) and writes messages; Conn reads
// them itself. A zmq4 socket would read every connection on a goroutine of
// its own and hand each message over a channel: a second wake-up for each
// event batch, which a busy engine sends for every request, at the moment
// its first token is on its way. zmq4's connection reads each frame's
// header and body with read calls of their own and allocates every body;
// Conn reads through a buffer, so that a burst of batches costs one system
// call, and returns frames that point into a buffer it reuses, so that a
// message costs no allocation once the buffer has grown to fit.
//
// Neither side of a connection reconnects: the caller dials again on its
// own clock. Ending the dial's context closes the connection, which ends
// any read or write in progress.
//
// Faults: a peer that accepts the connection and never completes the
// handshake holds Dial until DialTimeout or the context's end; a message
// longer than MaxMessage, a frame with reserved flag bits set, or a command
// frame that claims more to follow is an error (the caller drops the
// connection), so a peer that lies about sizes cannot make Conn allocate
// more than MaxMessage. A PING command is answered with a PONG; other
// commands are skipped.
package zmtp
