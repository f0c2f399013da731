package api

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// readUntilClosed reads conn until the server closes it, and fails the
// test when that takes longer than within.
func readUntilClosed(t *testing.T, conn net.Conn, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	conn.SetReadDeadline(start.Add(within))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %s", within)
	}
	return time.Since(start)
}

func TestSilentConnectionClosedAtHeaderTimeout(t *testing.T) {
	h := startGateway(t, nil, withConfig(func(c *Config) { c.HeaderTimeout = 200 * time.Millisecond }))
	conn, err := net.Dial("tcp", h.url[len("http://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if took := readUntilClosed(t, conn, 5*time.Second); took > 3*time.Second {
		t.Errorf("closed after %s, want about 200ms", took)
	}
}

func TestIdleKeptConnectionClosed(t *testing.T) {
	h := startGateway(t, nil, withConfig(func(c *Config) { c.IdleTimeout = 200 * time.Millisecond }))
	conn, err := net.Dial("tcp", h.url[len("http://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	readUntilClosed(t, conn, 5*time.Second)
}

// A slow body is not cut by the header timeout: the body has BodyTimeout.
func TestSlowBodyOutlivesHeaderTimeout(t *testing.T) {
	h := startGateway(t, nil, withConfig(func(c *Config) { c.HeaderTimeout = 200 * time.Millisecond }))
	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, `{"model":"qwen3-14b",`)
		time.Sleep(500 * time.Millisecond)
		io.WriteString(pw, `"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions", pr)
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = int64(len(`{"model":"qwen3-14b",`) + len(`"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// A stream outlasts every connection timeout: the engine is silent for
// longer than them (the client watcher keeps peeking meanwhile) and then
// writes slowly.
func TestStreamOutlastsConnectionTimeouts(t *testing.T) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		time.Sleep(400 * time.Millisecond) // a long prefill
		for i := range 4 {
			fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"}}]}\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(150 * time.Millisecond)
		}
		io.WriteString(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer engine.Close()
	h := startGateway(t, newFakeRouter(Route{Worker: "w1", BaseURL: engine.URL}), withConfig(func(c *Config) {
		c.HeaderTimeout, c.BodyTimeout, c.IdleTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
		c.ClientCheck = 20 * time.Millisecond
	}))
	resp, body := h.post(t, "/v1/chat/completions", `{"model":"qwen3-14b","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	for _, want := range []string{"w0 ", "w3 ", "[DONE]"} {
		if !strings.Contains(body, want) {
			t.Errorf("the stream lacks %q:\n%s", want, body)
		}
	}
}
