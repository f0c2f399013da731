// Package daemontest holds what tests of a running daemon share, in
// package daemon and in cmd/hearth alike: requests as clients and the
// console send them, and waits for what the daemon reports.
package daemontest

import (
	"bufio"
	"context"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/adminapi"
)

// Get fetches u and returns its status, body and header.
func Get(t *testing.T, client *http.Client, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// WaitLive reads the console's live stream of a page until one update
// contains every want, and returns it. Updates follow the hub's samples,
// so this waits for the sample that saw what the test just did.
func WaitLive(t *testing.T, baseURL, topic string, want ...string) string {
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

// PostMessages sends a short Claude Code request in session, with key
// when set, and returns its status.
func PostMessages(t *testing.T, baseURL, session, key string) int {
	t.Helper()
	status, _ := PostMessagesHeader(t, baseURL, session, key)
	return status
}

// PostMessagesHeader sends a short Claude Code request and returns its
// status and headers.
func PostMessagesHeader(t *testing.T, baseURL, session, key string) (int, http.Header) {
	t.Helper()
	body := `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"Say hello."}]}`
	return PostJSON(t, baseURL+"/v1/messages", body, key,
		"User-Agent", "claude-cli/2.1.197 (external, sdk-cli)", "X-Claude-Code-Session-Id", session)
}

// PostJSON posts a JSON body to u with key as its bearer key ("" for
// none) and the header name/value pairs given, reads the answer and
// returns its status and header.
func PostJSON(t *testing.T, u, body, key string, header ...string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
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

// ListEngines is GET /api/v1/engines.
func ListEngines(t *testing.T, baseURL string) []adminapi.Engine {
	t.Helper()
	resp, err := http.Get(baseURL + "/api/v1/engines")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Engines []adminapi.Engine `json:"engines"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/api/v1/engines: %s, %v", resp.Status, err)
	}
	return list.Engines
}

// WaitEngine waits until the engine name is as ok wants it.
func WaitEngine(t *testing.T, baseURL, name string, bound time.Duration, ok func(adminapi.Engine) bool) adminapi.Engine {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		for _, e := range ListEngines(t, baseURL) {
			if e.Name == name && ok(e) {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine %s: not as wanted within %v: %+v", name, bound, ListEngines(t, baseURL))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// KVFindingShown checks that an engine whose start-up KV-event check
// found summary shows it on the Health page (hearth doctor's checks) and on
// its console card, and that the engine is routed on predicted caches: a
// repeated prompt for model is predicted cached from the routing of the
// first, whatever the engine's events say.
func KVFindingShown(t *testing.T, baseURL, engine, model, summary string) {
	t.Helper()
	status, body, _ := Get(t, http.DefaultClient, baseURL+"/console/health")
	if text := html.UnescapeString(body); status != http.StatusOK || !strings.Contains(text, "kv events: "+engine) || !strings.Contains(text, summary) {
		t.Errorf("Health page (%d) lacks the KV-event check of %s", status, engine)
	}
	WaitLive(t, baseURL, "overview", `data-label="kv-events-note"`, html.EscapeString(summary))

	prompt := `{"model":"` + model + `","max_tokens":2,"messages":[{"role":"user","content":"` +
		strings.Repeat("Describe the paged KV cache of an inference engine in detail. ", 12) + `"}]}`
	for i, wantCached := range []bool{false, true} {
		_, h := PostJSON(t, baseURL+"/v1/chat/completions", prompt, "")
		cached, err := strconv.Atoi(h.Get("x-hearth-cached-blocks"))
		if err != nil || (cached > 0) != wantCached {
			t.Errorf("request %d: x-hearth-cached-blocks %q, want cached %v", i+1, h.Get("x-hearth-cached-blocks"), wantCached)
		}
	}
}

// Start runs serve, a daemon that writes the clients' settings to stdout
// once its engines are ready, and returns when it has: stop ends the
// daemon (the test's cleanup does too) and returns what serve returned.
// With HEARTH_TEST_LOG set, the daemon logs to stderr; otherwise its last
// log lines are kept and printed if the test fails, so that a failure seen
// only on a loaded CI machine says what the daemon did.
func Start(t testing.TB, serve func(ctx context.Context, stdout io.Writer, log *slog.Logger) error) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	printed := &firstWrite{c: make(chan struct{})}
	tail := &logTail{max: 400}
	logger := slog.New(slog.NewTextHandler(tail, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if os.Getenv("HEARTH_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	go func() { done <- serve(ctx, printed, logger) }()
	select {
	case <-printed.c:
	case err := <-done:
		cancel()
		t.Fatalf("hearth up ended before its engines were ready: %v", err)
	}
	var once bool
	var result error
	stop = func() error {
		if !once {
			once = true
			cancel()
			result = <-done
		}
		return result
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("hearth up: %v", err)
		}
		if t.Failed() {
			t.Logf("the daemon's last log lines:\n%s", tail)
		}
	})
	return stop
}

// logTail keeps the last max lines written to it.
type logTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimRight(string(p), "\n"))
	if over := len(l.lines) - l.max; over > 0 {
		l.lines = append(l.lines[:0], l.lines[over:]...)
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// firstWrite closes c when something is first written to it.
type firstWrite struct {
	once sync.Once
	c    chan struct{}
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.c) })
	return len(p), nil
}
