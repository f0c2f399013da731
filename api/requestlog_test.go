package api

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// logBuffer collects JSON log lines written from the server's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// requests returns the "request" lines logged so far, decoded.
func (b *logBuffer) requests(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "request" {
			out = append(out, m)
		}
	}
	return out
}

// waitRequests waits until n request lines were logged: a streamed
// answer's line is written when its stream ends, just after the client
// read its end.
func (b *logBuffer) waitRequests(t *testing.T, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := b.requests(t)
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// barrierPath is a route no test uses: a request to it is logged as a 404.
const barrierPath = "/v1/barrier"

func withLog(b *logBuffer) harnessOption {
	return func(_ *Config, d *Deps) {
		d.Logger = slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
}

func TestEveryAPIRequestIsLoggedOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		keys    []string
		path    string
		body    string
		headers []string
		want    map[string]any // fields the line must have; "*" for any value
		absent  []string
	}{
		{
			name: "streamed answer", path: "/v1/chat/completions", body: chatBody(""),
			headers: []string{"x-session-id", "s-1", "User-Agent", "opencode/1.0"},
			want: map[string]any{"level": "INFO", "method": "POST", "path": "/v1/chat/completions", "client": "opencode",
				"session": "s-1", "model": servedModel, "worker": "w1", "prompt_tokens": "*", "cached_tokens": "*",
				"ttft_ms": "*", "status": 200.0, "duration_ms": "*", "kind": "side", "hints": "priority=-1(inferred)"},
			absent: []string{"error"},
		},
		{
			name: "whole answer", path: "/v1/chat/completions", body: strings.Replace(chatBody(""), `"stream":true`, `"stream":false`, 1),
			headers: []string{"x-claude-code-session-id", "cc-9"},
			want: map[string]any{"level": "INFO", "client": "claude-code", "session": "cc-9", "worker": "w1", "status": 200.0,
				"hints": "priority=-1(inferred)"},
			absent: []string{"error"},
		},
		{
			name: "missing key", keys: []string{"sk-1"}, path: "/v1/messages", body: `{}`,
			headers: []string{"User-Agent", "curl/8.5"},
			want:    map[string]any{"level": "WARN", "method": "POST", "path": "/v1/messages", "client": "curl", "status": 401.0, "error": "*"},
			absent:  []string{"worker", "ttft_ms"},
		},
		{
			name: "bad request", path: "/v1/chat/completions", body: `{"model":`,
			want:   map[string]any{"level": "WARN", "status": 400.0, "error": "*"},
			absent: []string{"worker"},
		},
		{
			name: "no such route", path: "/v1/nowhere", body: `{}`,
			want: map[string]any{"level": "WARN", "path": "/v1/nowhere", "status": 404.0, "error": "*"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			h := startGateway(t, nil, withLog(&logs), withKeys(tc.keys...))
			resp, body := h.post(t, tc.path, tc.body, tc.headers...)
			if got := resp.StatusCode; float64(got) != tc.want["status"] {
				t.Fatalf("status %d: %s", got, body)
			}
			// A second request is the barrier: the gateway logs a request
			// before it answers, so once the barrier's line is written,
			// any second line of the first would be too.
			logs.waitRequests(t, 1)
			h.post(t, barrierPath, `{}`)
			lines := logs.waitRequests(t, 2)
			if len(lines) != 2 || lines[1]["path"] != barrierPath {
				t.Fatalf("%d request lines, want the request's and the barrier's: %v", len(lines), lines)
			}
			line := lines[0]
			for k, v := range tc.want {
				got, ok := line[k]
				if !ok {
					t.Errorf("no %s in %v", k, line)
				} else if v != "*" && got != v {
					t.Errorf("%s = %v, want %v", k, got, v)
				}
			}
			for _, k := range tc.absent {
				if v, ok := line[k]; ok {
					t.Errorf("%s = %v, want none", k, v)
				}
			}
		})
	}
}

func TestConsoleAndHealthAreNotLoggedAtInfo(t *testing.T) {
	var logs logBuffer
	h := startGateway(t, nil, withLog(&logs))
	resp, err := http.Get(h.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := logs.requests(t); len(got) != 0 {
		t.Errorf("logged %v", got)
	}
}

func TestClientsWithoutKey(t *testing.T) {
	keys := &fakeKeys{}
	h := startGateway(t, nil, func(_ *Config, d *Deps) { d.Keys = keys })
	before := time.Now()
	h.post(t, "/v1/chat/completions", chatBody(""), "User-Agent", "opencode/1.2")
	h.post(t, "/v1/chat/completions", chatBody(""), "User-Agent", "opencode/1.2")
	h.post(t, "/v1/chat/completions", chatBody(""), "x-claude-code-session-id", "cc")
	keys.set([]string{"sk-1"}, nil)
	h.post(t, "/v1/chat/completions", chatBody(""), "User-Agent", "codex_cli_rs/0.1") // refused: not open any more
	got := h.gw.ClientsWithoutKey(before)
	var names []string
	for _, c := range got {
		names = append(names, c.Client)
	}
	if strings.Join(names, ",") != "claude-code,opencode" {
		t.Errorf("clients %v, want claude-code then opencode", names)
	}
	if later := h.gw.ClientsWithoutKey(time.Now().Add(time.Second)); len(later) != 0 {
		t.Errorf("clients seen after now: %v", later)
	}
}

// A client that leaves mid-stream is logged once, as the traffic record
// has it: 499, with the reason.
func TestClientGoingAwayIsLogged(t *testing.T) {
	var logs logBuffer
	h := startGateway(t, nil, withLog(&logs), withConfig(func(c *Config) { c.ClientCheck = 10 * time.Millisecond }))
	h.engine.script = func(map[string]json.RawMessage, []chatMessage) engineReply { return engineReply{Hold: true} }
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/messages",
		strings.NewReader(`{"model":"claude-x","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil { // message_start arrived
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	h.router.waitFreed(t, 1)
	lines := logs.waitRequests(t, 1)
	if len(lines) != 1 {
		t.Fatalf("%d request lines, want 1", len(lines))
	}
	if l := lines[0]; l["status"] != float64(statusClientGone) || l["level"] != "WARN" || l["error"] != errClientGone.Error() || l["worker"] != "w1" {
		t.Errorf("line %v", l)
	}
}
