package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/daemon"
)

func get(t *testing.T, client *http.Client, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// waitLive reads the console's live stream of a page until one update
// contains every want, and returns it. Updates follow the hub's samples,
// so this waits for the sample that saw what the test just did.
func waitLive(t *testing.T, baseURL, topic string, want ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/console/events/"+topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	var event strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			event.WriteString(strings.TrimPrefix(line, "data:"))
			event.WriteByte('\n')
			continue
		}
		got := event.String()
		event.Reset()
		if containsAll(got, want) {
			return got
		}
	}
	t.Fatalf("no live update of %s contained %q (stream: %v)", topic, want, sc.Err())
	return ""
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func postMessages(t *testing.T, baseURL, session, key string) int {
	t.Helper()
	status, _ := postMessagesHeader(t, baseURL, session, key)
	return status
}

// postMessagesHeader sends a short Claude Code request and returns its
// status and headers.
func postMessagesHeader(t *testing.T, baseURL, session, key string) (int, http.Header) {
	t.Helper()
	body := `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"Say hello."}]}`
	req, err := http.NewRequest(http.MethodPost, baseURL+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "claude-cli/2.1.197 (external, sdk-cli)")
	req.Header.Set("X-Claude-Code-Session-Id", session)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// startUpWithConsole is startUp with the console sampling every interval
// and its charts reaching back chartWindow (0: the defaults).
func startUpWithConsole(t *testing.T, interval, chartWindow time.Duration) string {
	t.Helper()
	baseURL, _ := serveTestUp(t, []string{"--sim", "2x4090", "--speedup", "20", "--data-dir", t.TempDir()}, daemon.WithConsoleTiming(interval, chartWindow))
	return baseURL
}
