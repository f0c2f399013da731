package daemon_test

import (
	"html"
	"net/http"
	"strings"
	"testing"
)

// TestUpServesTheHealthPage: hearth up's console shows the checks, its own
// API port among them as serving.
func TestUpServesTheHealthPage(t *testing.T) {
	baseURL := startUpWithConsole(t, 0, 0)
	status, body, _ := get(t, http.DefaultClient, baseURL+"/console/health")
	if status != http.StatusOK {
		t.Fatalf("status %d\n%s", status, body)
	}
	text := html.UnescapeString(body)
	for _, want := range []string{"simulated GPUs: no driver needed", "Hearth serves the API on", "gpu 1 memory", "Check again",
		"tokenizer: ", "the engine's tokenizer agrees with Hearth's", "kv events: ", "KV events: 12 of 12 probe blocks matched"} {
		if !strings.Contains(text, want) {
			t.Errorf("Health page lacks %q", want)
		}
	}
}
