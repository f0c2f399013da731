package api

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/hearth-llm/hearth/router/warm"
	"github.com/hearth-llm/hearth/tokenizer"
)

// learnerPrefixes is router/warm's Learner as the gateway's HotPrefixes,
// as the daemon has it (without the file).
type learnerPrefixes struct{ *warm.Learner }

func (l learnerPrefixes) ObserveFirstPrompt(model string, prompt []uint32) { l.Observe(model, prompt) }

// TestWarmEngineCachesTheSharedPrefix: the gateway tells the learner the
// first prompts of two Claude Code sessions (and not a later turn), which
// share the system text and tools; WarmEngine then prefills what they
// share on a cold simulated engine, so that a third session's first
// prompt finds it cached there; on another cold engine, not warmed, it
// finds nothing.
func TestWarmEngineCachesTheSharedPrefix(t *testing.T) {
	tok, err := tokenizer.Qwen3()
	if err != nil {
		t.Skipf("the Qwen3 tokenizer does not load: %v", err)
	}
	plain := func(h http.Handler) http.Handler { return h }
	learner := learnerPrefixes{warm.New(warm.Config{})}
	rt := newFakeRouter(Route{Worker: "sim", BaseURL: simBehind(t, tok, 0, 1000, plain)})
	h := startGateway(t, rt, func(cfg *Config, d *Deps) {
		d.Tokenizer = tok
		cfg.HotPrefixes = learner
	})
	c := toolPauseClients()[0] // Claude Code
	system := "You are a coding helper working in /home/dev/project. " + longText(150)
	first := c.first(system, "Explain what main.go does in this project.")
	answer := h.postJSON(t, c.path, first, c.headers)
	h.postJSON(t, c.path, c.first(system, "List the tests of this project and what each checks."), c.headers)
	hot := slices.Clone(learner.Hot(servedModel))
	if len(hot) != 1 || len(hot[0]) < 1024 {
		t.Fatalf("hot prefixes after two sessions: %d (first %d tokens), want one of the shared system text and tools", len(hot), len(firstOr(hot)))
	}
	if next, ok := c.next(first, answer, toolPauseResult); ok {
		h.postJSON(t, c.path, next, c.headers)
		if got := learner.Hot(servedModel); len(got) != 1 || !slices.Equal(got[0], hot[0]) {
			t.Errorf("a session's second turn changed the hot prefixes to %d (first %d tokens)", len(got), len(firstOr(got)))
		}
	} else {
		t.Log("the first answer is no tool call: a later turn is not checked")
	}

	third := c.first(system, "Find where the configuration is read.")
	sessionOn := func(url string, warmFirst bool) int {
		if warmFirst {
			n, err := h.gw.WarmEngine(context.Background(), url, servedModel)
			if n != 1 || err != nil {
				t.Fatalf("WarmEngine: %d prefixes, %v; want 1", n, err)
			}
		}
		rt.mu.Lock()
		rt.workers[0].BaseURL = url
		rt.mu.Unlock()
		return c.cached(h.postJSON(t, c.path, third, c.headers))
	}
	if cold := sessionOn(simBehind(t, tok, 0, 1000, plain), false); cold != 0 {
		t.Fatalf("a cold engine had %d tokens cached", cold)
	}
	if got := sessionOn(simBehind(t, tok, 0, 1000, plain), true); got < len(hot[0])-16 {
		t.Errorf("after WarmEngine the session's first prompt found %d tokens cached, want the %d-token shared prefix", got, len(hot[0]))
	}
}

func firstOr(ps [][]uint32) []uint32 {
	if len(ps) == 0 {
		return nil
	}
	return ps[0]
}

// A hot prefix learned under a longer context than the engines serve now
// is not sent: the engine would refuse it.
func TestWarmEngineSkipsPrefixesBeyondTheContext(t *testing.T) {
	learner := learnerPrefixes{warm.New(warm.Config{})}
	long := make([]uint32, 4096)
	for i := range long {
		long[i] = uint32(i)
	}
	learner.Observe(servedModel, append(slices.Clone(long), 1, 2, 3))
	learner.Observe(servedModel, append(slices.Clone(long), 4, 5, 6))
	engine := newFakeEngine(t)
	h := startGateway(t, newFakeRouter(Route{Worker: "w", BaseURL: engine.srv.URL}), func(cfg *Config, _ *Deps) {
		cfg.HotPrefixes = learner
		cfg.ContextTokens = 4096
	})
	n, err := h.gw.WarmEngine(context.Background(), engine.srv.URL, servedModel)
	if n != 0 || err != nil || len(engine.requests()) != 0 {
		t.Errorf("WarmEngine of a 4,096-token prefix for a 4,096-token context: %d sent, %v, %d requests at the engine; want none", n, err, len(engine.requests()))
	}
}
