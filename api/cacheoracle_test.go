package api

import (
	"net/http"
	"testing"
)

// With keys required, how much of a prompt the engines held is told to
// admin keys only: to any client, the counts would tell block by block
// whether another session's prompt starts with a guessed text.
func TestCacheCountsGoToAdminKeysOnly(t *testing.T) {
	keys := &adminKeys{admin: []string{"sk-admin"}}
	keys.set([]string{"sk-admin", "sk-inference"}, nil)
	h := startGateway(t, nil, withKeys("sk-cli"), func(_ *Config, d *Deps) { d.Keys = keys })
	open := startGateway(t, nil)
	const body = `{"model":"qwen3-14b","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name   string
		h      *harness
		key    string
		reveal bool
	}{
		{"inference key", h, "sk-inference", false},
		{"admin key", h, "sk-admin", true},
		{"command-line key", h, "sk-cli", true},
		{"no keys configured", open, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if tc.key != "" {
				headers = []string{"Authorization", "Bearer " + tc.key}
			}
			resp, b := tc.h.post(t, "/v1/chat/completions", body, headers...)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			for _, name := range []string{"x-hearth-cached-blocks", "x-hearth-tier-blocks"} {
				if got := resp.Header.Get(name) != ""; got != tc.reveal {
					t.Errorf("%s sent: %v, want %v", name, got, tc.reveal)
				}
			}
			if resp.Header.Get("x-hearth-worker") == "" {
				t.Errorf("x-hearth-worker missing")
			}
		})
	}
}
