// Package clock is Hearth's one time source for code with timers. Code
// whose tests drive time by hand (the console's sampling and heartbeats,
// the KV-event subscriber's backoff and replay timeout, each tested over
// real sockets) takes a Clock, nil meaning Real, and its tests pass a Fake,
// whose time moves only when the test advances it. Code that only reads
// the time (a key's creation, a template's date) takes a Clock too, never
// a func() time.Time of its own.
// Code whose tests can run in a testing/synctest bubble reads the time
// package directly: the bubble's fake time is all it needs.
//
// It imports nothing from Hearth, so that every package may import it.
package clock
