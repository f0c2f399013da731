package doctor

import (
	"context"
	"errors"
	"slices"
	"testing"
)

type fakeKVEvents struct {
	engines []EngineKVEvents
	err     error
}

func (f fakeKVEvents) EngineKVEvents(context.Context) ([]EngineKVEvents, error) {
	return f.engines, f.err
}

// TestKVEventChecks: each engine's KV-event self-check becomes a check of
// its own, last; a match passes, a difference or a check that could not
// run warns with a fix; no daemon, no checks.
func TestKVEventChecks(t *testing.T) {
	d, _, _, _ := healthy()
	d.KVEvents = fakeKVEvents{engines: []EngineKVEvents{
		{Engine: "sim/gpu0", State: "match", Summary: "KV events: 12 of 12 probe blocks matched"},
		{Engine: "sim/gpu1", State: "differs", Summary: "KV events: 0 of 12 probe blocks matched; first difference at block 0: no KV events arrived"},
		{Engine: "sim/gpu2", State: "unchecked", Summary: "KV events: not checked: the probe request: 404"},
	}}
	checks := d.Check(context.Background())
	got := checks[len(checks)-3:]
	want := []struct {
		name   string
		status Status
	}{{"kv events: sim/gpu0", Pass}, {"kv events: sim/gpu1", Warn}, {"kv events: sim/gpu2", Warn}}
	for i, w := range want {
		if got[i].Name != w.name || got[i].Status != w.status || (w.status == Warn) == (got[i].Fix == "") {
			t.Errorf("check %d: %+v, want %s %s", i, got[i], w.name, w.status)
		}
	}
	d.KVEvents = fakeKVEvents{err: errors.New("connection refused")}
	if slices.ContainsFunc(d.Check(context.Background()), func(c Check) bool { return c.Name == "kv events: sim/gpu0" }) {
		t.Error("a KV-event check without a daemon")
	}
}
