package doctor

import "context"

// CheckKVEventsPrefix starts the name of an engine's KV-event check:
// "kv events: sim/gpu0".
const CheckKVEventsPrefix = "kv events: "

// EngineKVEvents is what a running daemon's start-up KV-event self-check
// found for one engine: State "match", "differs" or "unchecked", and
// Summary, the finding in one sentence (how many probe blocks matched, the
// first difference).
type EngineKVEvents struct {
	Engine, State, Summary string
}

// KVEventsSource reads the KV-event self-checks of a running daemon's
// engines. An error (no daemon running) adds no checks.
type KVEventsSource interface {
	EngineKVEvents(ctx context.Context) ([]EngineKVEvents, error)
}

// fixKVEvents is what to do when an engine's KV events do not name the
// blocks Hearth predicts: the router cannot follow its cache.
const fixKVEvents = "run an engine release Hearth knows (docs/engine-conformance.md, \"Releases\") with the KV-event flags Hearth passes; " +
	"until then that engine is routed on predicted caches"

// checkKVEvents weighs each engine's KV-event self-check: a match
// passes, a difference or a check that could not run warns (the daemon
// keeps serving, on predicted caches for a difference).
func (d *Doctor) checkKVEvents(ctx context.Context) []Check {
	if d.KVEvents == nil {
		return nil
	}
	engines, err := d.KVEvents.EngineKVEvents(ctx)
	if err != nil {
		return nil
	}
	var found []selfCheck
	for _, e := range engines {
		found = append(found, selfCheck(e))
	}
	return weighSelfChecks(CheckKVEventsPrefix, "match", found, fixKVEvents, func(engine string) string {
		return "check that the engine answers POST /v1/completions and publishes on its KV-event endpoint; hearth logs " + engine + " shows its errors"
	})
}
