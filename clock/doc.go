// Package clock is Hearth's one time source for code with timers: the
// console's sampling and heartbeats, the KV-event subscriber's backoff and
// replay timeout, the simulated engine's step waits, the benchmark's live
// tool pauses. Such code takes a Clock, nil meaning Real; its tests pass a
// hand-driven fake or run under testing/synctest, whose bubble Real follows.
//
// It imports nothing from Hearth, so that every package may import it.
package clock
