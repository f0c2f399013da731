// Package models decides which of the configured models are resident on
// the GPUs when more are configured than fit at once (docs/models.md).
//
// A Manager holds every configured model with its state (on disk, loading,
// resident, sleeping) and the GPU memory it needs. Acquire brings a model
// in for a request, evicting others while what is resident would not
// leave room, and counts the request until its Release. Eviction takes the
// least recently used model first, weighed by what bringing it back costs
// (a model that reloads in a second goes before one that takes half a
// minute), and never takes a pinned model, one with requests in flight,
// or one with an agent session in a tool pause younger than the model's
// tool-pause grace (the p90 of the pauses seen on it, bounded): the next
// turn of an agent's loop must not pay a swap, but a pause longer than the
// tools run does not hold the GPU from the other models' requests. Tool
// pauses are per session (ToolPause): only the session's own next request
// ends one. An evicted model sleeps where its engine can (Mover.Sleep) and
// stops otherwise.
//
// Requests wait in line (Enqueue, Ticket; queue.go): by priority, then
// arrival, within a model; by claim (time waited, priority weighed as the
// router's queue weighs it) between models. A resident model owes its
// room to a request for another model that came first once that request
// has waited what bringing the resident model back would cost (its
// tool-pause grace for a side request): it then admits nothing more, and
// a tool pause that began after that request arrived no longer keeps it. A swap, once begun, finishes even when the request that
// started it gives up. Run puts models idle past their keep-alive to sleep
// and loads the preloaded ones at start (Preloaded says when it has);
// Load, Unload and Pin are the operator's (hearth models). Models whose
// bytes fit the capacity together are resident at once: the caller plans
// each model's bytes so that the sets it means to fit do. Every load,
// wake, sleep and stop is recorded with its duration on the injected
// clock; Transitions returns the latest MaxTransitions of them.
//
// The package owns the policy only: it moves engines through the Mover
// its caller gives (the daemon's supervisor and the engines' sleep
// endpoints), reads time from an injected clock, and imports no other
// Hearth package but clock.
package models
