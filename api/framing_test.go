package api

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawExchange writes raw bytes to the gateway and returns every response it
// reads back before the connection closes or goes quiet.
func rawExchange(t *testing.T, h *harness, raw string) []*http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	br := bufio.NewReader(conn)
	var got []*http.Response
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return got
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
		got = append(got, resp)
	}
}

func TestFramingAmbiguousRequestsAreRefused(t *testing.T) {
	smuggled := "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	cases := []struct {
		name string
		raw  string
	}{
		{"content-length and transfer-encoding",
			"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
				"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled},
		{"transfer-encoding then content-length",
			"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
				"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + smuggled},
		{"differing content-lengths",
			"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
				"Content-Length: 2\r\nContent-Length: 40\r\n\r\n{}" + smuggled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := startGateway(t, nil)
			got := rawExchange(t, h, tc.raw)
			if len(got) != 1 {
				t.Fatalf("got %d responses, want exactly one (a 400) and the connection closed", len(got))
			}
			if got[0].StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400", got[0].StatusCode)
			}
		})
	}
}

func TestFramingErrorDoesNotEchoTheRequest(t *testing.T) {
	h := startGateway(t, nil)
	const secret = "sk-hearth-very-secret"
	raw := "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + secret +
		"\r\nBroken header line without colon\r\nContent-Length: 2\r\n\r\n{}"
	got := rawExchange(t, h, raw)
	if len(got) == 0 {
		t.Fatal("no response to a malformed header")
	}
	body, _ := io.ReadAll(got[0].Body)
	if got[0].StatusCode != http.StatusBadRequest {
		t.Errorf("status %d, want 400", got[0].StatusCode)
	}
	if strings.Contains(string(body), secret) {
		t.Errorf("the 400's body echoes the request's bearer key: %q", body)
	}
}

func TestKeylessLoopbackAPIRefusesWebPages(t *testing.T) {
	h := startGateway(t, nil)
	body := `{"model":"qwen3-14b","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`
	cases := []struct {
		name        string
		headers     []string
		contentType string
		want        int
	}{
		{"an agent client", nil, "application/json", http.StatusOK},
		{"json with a charset", nil, "application/json; charset=utf-8", http.StatusOK},
		{"localhost by name", []string{"Host", "localhost:8000"}, "application/json", http.StatusOK},
		{"a rebound name", []string{"Host", "attacker.example:8000"}, "application/json", http.StatusForbidden},
		{"a cross-site form", nil, "text/plain", http.StatusUnsupportedMediaType},
		{"a urlencoded form", nil, "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", tc.contentType)
			for i := 0; i+1 < len(tc.headers); i += 2 {
				if tc.headers[i] == "Host" {
					req.Host = tc.headers[i+1]
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.want, b)
			}
		})
	}
}
