// Package clocktest holds the one way Hearth's tests wait on the wall
// clock for something they cannot be told of: WaitFor polls a condition
// until it holds, or fails the test naming what it waited for. A test
// that can wait on an event (a channel, a fake clock's timer, a log line)
// does that instead; WaitFor is for state read from outside (a router's
// worker list, a page, a peer's view), and never for "nothing happened".
package clocktest
