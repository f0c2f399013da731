package api

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestCacheSalt: a request's cache_salt goes to the engine as sent, and the
// router gets the prompt's hashes with the salt mixed in as the ingest
// mixes it into the engine's salted blocks (tokenizer.SaltedBlockHashes),
// in the chat and the legacy completions API; an empty salt is refused as
// vLLM refuses it, in OpenAI's error shape.
func TestCacheSalt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path, body string
	}{
		{"/v1/chat/completions", `{"model":"gpt-5.5","messages":[{"role":"user","content":"%s"}],"max_tokens":4%s}`},
		{"/v1/completions", `{"model":"gpt-5.5","prompt":"%s","max_tokens":4%s}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			h := startGateway(t, nil)
			text := strings.Repeat("a long shared prefix of words ", 4)
			for _, salt := range []string{"", "tenant-a"} {
				field := ""
				if salt != "" {
					field = fmt.Sprintf(`,"cache_salt":%q`, salt)
				}
				resp, body := h.post(t, tc.path, fmt.Sprintf(tc.body, text, field))
				if resp.StatusCode != 200 {
					t.Fatalf("%d %s", resp.StatusCode, body)
				}
				reqs := h.engine.requests()
				if got, want := string(reqs[len(reqs)-1]["cache_salt"]), strings.TrimPrefix(field, `,"cache_salt":`); got != want {
					t.Errorf("engine cache_salt %s, want %s", got, want)
				}
			}
			routed := h.router.routed
			unsalted, salted := routed[len(routed)-2].Hashes, routed[len(routed)-1].Hashes
			if len(unsalted) == 0 || len(salted) != len(unsalted) {
				t.Fatalf("hashes: %d unsalted, %d salted", len(unsalted), len(salted))
			}
			for _, s := range salted {
				if slices.Contains(unsalted, s) {
					t.Fatalf("salted prompt shares hash %x with the unsalted one", s)
				}
			}
			// The same salt on the same tokens gives the same hashes again.
			h.post(t, tc.path, fmt.Sprintf(tc.body, text, `,"cache_salt":"tenant-a"`))
			if again := h.router.lastRoute(t).Hashes; !slices.Equal(again, salted) {
				t.Error("a salted repeat hashes differently")
			}
			resp, body := h.post(t, tc.path, fmt.Sprintf(tc.body, text, `,"cache_salt":""`))
			if resp.StatusCode != 400 || !strings.Contains(body, `"param":"cache_salt"`) {
				t.Errorf("empty salt: %d %s", resp.StatusCode, body)
			}
		})
	}
}
