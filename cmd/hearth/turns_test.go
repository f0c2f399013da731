package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type turnUsage struct{ prompt, cached int }

// chatTurn sends a conversation (user, assistant, user, ...) and returns
// its prompt and cached tokens.
func chatTurn(t *testing.T, baseURL string, turns []string) turnUsage {
	t.Helper()
	return chatTurnWith(t, baseURL, turns, nil)
}

// chatTurnWith is chatTurn that also hands the answer's header to header
// (nil: none).
func chatTurnWith(t *testing.T, baseURL string, turns []string, header func(http.Header)) turnUsage {
	t.Helper()
	var msgs []string
	for i, text := range turns {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, fmt.Sprintf(`{"role":%q,"content":%q}`, role, text))
	}
	body := `{"model":"qwen3-14b-fp8","max_tokens":4,"messages":[` + strings.Join(msgs, ",") + `]}`
	req, err := http.NewRequest(http.MethodPost, baseURL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-session-id", "restart-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if header != nil {
		header(resp.Header)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: %s: %s", resp.Status, raw)
	}
	var out struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			Details      struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("chat: %v: %s", err, raw)
	}
	return turnUsage{out.Usage.PromptTokens, out.Usage.Details.CachedTokens}
}

// countBlocks counts the block files under a node store: Hearth's own,
// and the pages the simulated SGLang writes there as HiCacheFile does.
func countBlocks(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".kv") || strings.HasSuffix(path, ".bin")) {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
