package api

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/goccy/go-json"
)

// HotPrefixes is what the gateway needs of the memory of the prefixes
// agent sessions share (router/warm's Learner, kept by the daemon).
type HotPrefixes interface {
	// ObserveFirstPrompt is told the token ids of a session's first
	// prompt: a turn without an assistant message yet.
	ObserveFirstPrompt(model string, prompt []uint32)
	// Hot returns the prefixes to prefill on a starting engine of model;
	// the caller does not modify them.
	Hot(model string) [][]uint32
}

// observeFirstPrompt tells Config.HotPrefixes of a session's first
// prompt. A salted prompt is cached apart from every other, so it is
// nobody's shared prefix.
func (g *Gateway) observeFirstPrompt(req *engineRequest, ids []uint32) {
	if g.cfg.HotPrefixes == nil || req.Kind != KindTurn || req.CacheSalt != "" {
		return
	}
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			return // a later turn: its history is the session's own
		}
	}
	g.cfg.HotPrefixes.ObserveFirstPrompt(req.Model, ids)
}

// WarmEngine prefills, on the engine at baseURL serving model, each hot
// prefix of the model (Config.HotPrefixes), one after the other, as
// one-token completions of the prompt's token ids at background priority:
// the sessions that start after an engine's start find the prefix they
// share cached instead of each waiting for its computation. A prefix that
// does not fit the served context (Config.ContextTokens) is skipped. It
// returns how many the engine took; the first failure ends it (the engine went away,
// or ctx ended), and a failed warm-up costs nothing but its own time.
func (g *Gateway) WarmEngine(ctx context.Context, baseURL, model string) (int, error) {
	if g.cfg.HotPrefixes == nil {
		return 0, nil
	}
	done := 0
	for _, p := range g.cfg.HotPrefixes.Hot(model) {
		if g.cfg.ContextTokens > 0 && len(p) >= g.cfg.ContextTokens {
			continue // learned under a longer context than the engines serve now
		}
		body, err := json.Marshal(completionPrefill{Model: model, Prompt: p, MaxTokens: 1,
			Priority: g.enginePriority(PriorityBackground)})
		if err != nil {
			return done, err
		}
		hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(baseURL, "/")+"/v1/completions", bytes.NewReader(body))
		if err != nil {
			return done, err
		}
		hreq.Header.Set("Content-Type", "application/json")
		resp, err := g.client.do(ctx, hreq)
		if err != nil {
			return done, fmt.Errorf("warming %s: %w", baseURL, err)
		}
		msg, _ := readBounded(resp, 4<<10)
		if resp.StatusCode != http.StatusOK {
			return done, fmt.Errorf("warming %s: %s: %s", baseURL, resp.Status, strings.TrimSpace(string(msg)))
		}
		done++
	}
	return done, nil
}

// readBounded reads at most limit bytes of resp's body and closes it.
func readBounded(resp *http.Response, limit int64) ([]byte, error) {
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err := buf.ReadFrom(http.MaxBytesReader(nil, resp.Body, limit))
	return buf.Bytes(), err
}
