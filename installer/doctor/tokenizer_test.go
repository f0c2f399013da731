package doctor

import (
	"context"
	"errors"
	"slices"
	"testing"
)

type fakeTokenizers struct {
	engines []EngineTokenizer
	err     error
}

func (f fakeTokenizers) EngineTokenizers(context.Context) ([]EngineTokenizer, error) {
	return f.engines, f.err
}

// TestTokenizerChecks: each engine's self-check becomes a check of its
// own after the host's; no daemon, no checks.
func TestTokenizerChecks(t *testing.T) {
	d, _, _, _ := healthy()
	d.Tokenizers = fakeTokenizers{engines: []EngineTokenizer{
		{Engine: "sim/gpu0", State: "agrees", Summary: "the engine's tokenizer agrees with Hearth's (900 tokens)"},
		{Engine: "sim/gpu1", State: "differs", Summary: "sample \"tool round\" differs at token 191"},
		{Engine: "sim/gpu2", State: "unchecked", Summary: "POST /tokenize: 404"},
	}}
	checks := d.Check(context.Background())
	got := checks[len(checks)-3:]
	want := []struct {
		name   string
		status Status
	}{{"tokenizer: sim/gpu0", Pass}, {"tokenizer: sim/gpu1", Warn}, {"tokenizer: sim/gpu2", Warn}}
	for i, w := range want {
		if got[i].Name != w.name || got[i].Status != w.status || (w.status == Warn) == (got[i].Fix == "") {
			t.Errorf("check %d: %+v, want %s %s", i, got[i], w.name, w.status)
		}
	}
	d.Tokenizers = fakeTokenizers{err: errors.New("connection refused")}
	if slices.ContainsFunc(d.Check(context.Background()), func(c Check) bool { return c.Name == "tokenizer: sim/gpu0" }) {
		t.Error("a tokenizer check without a daemon")
	}
}
