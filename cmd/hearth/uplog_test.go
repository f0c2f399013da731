package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// settingsWatch is hearth up's stdout: it keeps what the log said before
// the client settings were printed.
type settingsWatch struct {
	log     *syncBuffer
	once    sync.Once
	printed chan struct{}
	before  string // the log when the settings began
	out     syncBuffer
}

func (w *settingsWatch) Write(p []byte) (int, error) {
	w.once.Do(func() {
		w.before = w.log.String()
		close(w.printed)
	})
	return w.out.Write(p)
}

// TestUpLogsJSON runs hearth up --log-format json as main does: every line
// on stderr is a JSON object; the start says what it is waiting for before
// the client settings are printed; every API request gets one line with
// its fields, and a refused one its reason.
func TestUpLogsJSON(t *testing.T) {
	var stderr syncBuffer
	stdout := &settingsWatch{log: &stderr, printed: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // hearth up listens itself; a port just freed is free
	env := &environment{stdout: stdout, stderr: &stderr, getenv: func(string) string { return "" }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runUp(ctx, env, []string{"--sim", "2x4090", "--speedup", "100", "--data-dir", t.TempDir(),
			"--listen", addr, "--log-format", "json", "--layout", "per-gpu"})
	}()
	select {
	case <-stdout.printed:
	case err := <-done:
		cancel()
		t.Fatalf("hearth up ended: %v\n%s", err, stderr.String())
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("no settings printed\n%s", stderr.String())
	}
	for _, want := range []string{`"msg":"starting: 2 engines loading…"`, `"msg":"serving on http://` + addr + `; waiting for engines"`, `"msg":"engine ready"`} {
		if !strings.Contains(stdout.before, want) {
			t.Errorf("before the settings the log lacks %s:\n%s", want, stdout.before)
		}
	}

	post := func(body string, headers ...string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := post(`{"model":"qwen3-14b-fp8","max_tokens":4,"stream":true,"messages":[{"role":"user","content":"Say hello."}]}`,
		"User-Agent", "opencode/1.0", "x-session-affinity", "ses_log"); s != 200 {
		t.Fatalf("status %d", s)
	}
	if s := post(`{"model":`); s != 400 {
		t.Fatalf("bad request: status %d", s)
	}

	var requests []map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for len(requests) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		requests = requests[:0]
		for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("log line is not JSON: %q: %v", line, err)
			}
			if m["msg"] == "request" {
				requests = append(requests, m)
			}
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("hearth up: %v", err)
	}
	if len(requests) != 2 {
		t.Fatalf("%d request lines, want 2:\n%s", len(requests), stderr.String())
	}
	slices.SortFunc(requests, func(a, b map[string]any) int { return int(a["status"].(float64) - b["status"].(float64)) })
	ok, bad := requests[0], requests[1]
	for _, k := range []string{"time", "level", "method", "path", "client", "session", "model", "worker",
		"prompt_tokens", "cached_tokens", "ttft_ms", "status", "duration_ms"} {
		if _, has := ok[k]; !has {
			t.Errorf("answered request: no %s in %v", k, ok)
		}
	}
	if ok["level"] != "INFO" || ok["client"] != "opencode" || ok["session"] != "ses_log" || ok["model"] != "qwen3-14b-fp8" ||
		!strings.HasPrefix(ok["worker"].(string), "sim/gpu") || ok["status"] != 200.0 {
		t.Errorf("answered request: %v", ok)
	}
	if bad["level"] != "WARN" || bad["status"] != 400.0 || bad["error"] == nil || bad["path"] != "/v1/chat/completions" {
		t.Errorf("bad request: %v", bad)
	}
}
