package api

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// announceBody opens a connection and sends a POST's headers announcing a
// body of length bytes, and one byte of it: a client that would go on
// sending a byte every few seconds.
func announceBody(t *testing.T, h *harness, path, key string, length int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n{", path, key, length)
	return conn
}

// answerBeforeBody reads the answer to a request whose body was not sent.
// The deadline only bounds a failing test: the server that reads the body
// first never answers.
func answerBeforeBody(t *testing.T, conn net.Conn) (*http.Response, string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer while the body was still unsent: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// A request with a wrong key that announces a 32 MB body is refused from
// its headers: no memory is set aside for its body, and it gets its 401 in
// its dialect with the connection closed.
func TestWrongKeyIsRefusedBeforeItsBody(t *testing.T) {
	h := startGateway(t, nil, withKeys("right-key"))
	const conns = 8
	before := heapInUse()
	var open []net.Conn
	for i := range conns {
		path := "/v1/messages"
		if i%2 == 1 {
			path = "/v1/chat/completions"
		}
		open = append(open, announceBody(t, h, path, "wrong-key", 33554000))
	}
	for i, conn := range open {
		resp, body := answerBeforeBody(t, conn)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401: %s", resp.StatusCode, body)
		}
		want := `"type":"authentication_error"` // Anthropic's
		if i%2 == 1 {
			want = `"code":"invalid_api_key"` // OpenAI's
		}
		if !strings.Contains(body, want) {
			t.Errorf("refusal %s is not in the client's dialect (want %s)", body, want)
		}
		if !resp.Close {
			t.Errorf("the connection of a refused body stays open")
		}
		readUntilClosed(t, conn, 10*time.Second)
	}
	if grew := int64(heapInUse()) - int64(before); grew > 16<<20 {
		t.Errorf("the heap grew by %d MiB for %d refused requests", grew>>20, conns)
	}
	if held := h.gw.gate.held(); held != 0 {
		t.Errorf("%d body bytes still held", held)
	}
	// The right key is still served.
	if resp, body := h.post(t, "/v1/chat/completions", `{"model":"qwen3-14b","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer right-key"); resp.StatusCode != http.StatusOK {
		t.Fatalf("with the right key: %d %s", resp.StatusCode, body)
	}
}

// Bodies being received count against one budget shared by every
// connection: past it, a request gets a 503 in its dialect without its
// body being read, and the budget comes back as those bodies end.
func TestBodiesInFlightShareABudget(t *testing.T) {
	h := startGateway(t, nil, withKeys("right-key"), withConfig(func(c *Config) {
		c.MaxBodyBytes = 1 << 20
		c.MaxBodyBytesInFlight = 2 << 20
	}))
	slow := []net.Conn{
		announceBody(t, h, "/v1/chat/completions", "right-key", 1<<20),
		announceBody(t, h, "/v1/chat/completions", "right-key", 1<<20),
	}
	waitHeld(t, h, 2<<20)

	over := announceBody(t, h, "/v1/messages", "right-key", 1<<20)
	resp, body := answerBeforeBody(t, over)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"type":"overloaded_error"`) {
		t.Fatalf("over the budget: %d %s, want 503 overloaded_error", resp.StatusCode, body)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("the refusal says nothing of when to retry")
	}
	for _, c := range slow {
		c.Close() // the slow clients give up: their bodies end
	}
	waitHeld(t, h, 0)
	if resp, body := h.post(t, "/v1/chat/completions", `{"model":"qwen3-14b","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer right-key"); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the slow bodies ended: %d %s", resp.StatusCode, body)
	}
}

// waitHeld waits for the gate to hold want bytes: the server reads the
// headers on its own goroutines.
func waitHeld(t *testing.T, h *harness, want int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for h.gw.gate.held() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the gate holds %d bytes, want %d", h.gw.gate.held(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
