package api

import (
	"testing"

	"github.com/hearth-llm/hearth/tokenizer"
)

// TestQwen3TemplateKeepsTurnsCacheable repeats the cache-stability check
// with the real Qwen3 tokenizer and chat template: each client's turn 2
// must start with every block of its turn 1.
func TestQwen3TemplateKeepsTurnsCacheable(t *testing.T) {
	tok, err := tokenizer.Qwen3()
	if err != nil {
		t.Skipf("the Qwen3 tokenizer does not load (%v); the fake tokenizer covers the same property", err)
	}
	for _, tc := range conversationFixtures {
		t.Run(tc.client, func(t *testing.T) {
			h := startGateway(t, nil, func(_ *Config, d *Deps) { d.Tokenizer = tok })
			h.send(t, loadFixture(t, tc.turn1))
			h.send(t, loadFixture(t, tc.turn2))
			r1, r2 := h.router.routed[0], h.router.routed[1]
			if len(r1.Hashes) < 8 {
				t.Fatalf("turn 1 has only %d blocks", len(r1.Hashes))
			}
			if n := commonPrefix(r1.Hashes, r2.Hashes); n != len(r1.Hashes) {
				t.Errorf("turn 2 shares %d of turn 1's %d blocks", n, len(r1.Hashes))
			}
			// Another session of the same client shares the system prompt
			// and tools: at least half of turn 1 in these fixtures.
			other := loadFixture(t, tc.turn1).with(tc.otherClient...)
			h.send(t, other)
			r3 := h.router.routed[2]
			t.Logf("turn 1 %d blocks, turn 2 %d, second session shares %d", len(r1.Hashes), len(r2.Hashes), commonPrefix(r1.Hashes, r3.Hashes))
			if n := commonPrefix(r1.Hashes, r3.Hashes); n < len(r1.Hashes)/2 {
				t.Errorf("a second session shares only %d of %d blocks", n, len(r1.Hashes))
			}
		})
	}
}
