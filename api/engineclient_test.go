package api

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func post(t *testing.T, c *engineClient, ctx context.Context, url, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return c.do(ctx, req)
}

// waitIdleClosed waits until the engine's close of every connection the
// client keeps for url has reached the client.
func waitIdleClosed(t *testing.T, c *engineClient, url string) {
	t.Helper()
	c.mu.Lock()
	idle := slices.Clone(c.idle[strings.TrimPrefix(url, "http://")])
	c.mu.Unlock()
	if len(idle) == 0 {
		t.Fatal("the client keeps no connection")
	}
	for _, conn := range idle {
		waitPeerClosed(t, conn.Conn)
	}
}

func TestEngineClientKeepsConnections(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	})
	c := newEngineClient()
	defer c.closeIdle()
	get := func(body string, readAll bool) {
		t.Helper()
		resp, err := post(t, c, context.Background(), srv.URL+"/echo", body)
		if err != nil {
			t.Fatal(err)
		}
		if readAll {
			got, _ := io.ReadAll(resp.Body)
			if string(got) != body {
				t.Fatalf("echo %q, want %q", got, body)
			}
		}
		resp.Body.Close()
	}
	get("one", true)
	get("two", true)
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for two requests read to their end, want 1", n)
	}
	get("three", false) // closed unread: the connection cannot be reused
	get("four", true)
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections after a body closed unread, want 2", n)
	}
	// The engine drops its idle connections (vLLM does after 5 s). The
	// one kept came back less than trustIdle ago, so it is used without a
	// look, fails, and the request goes again on a fresh one.
	srv.CloseClientConnections()
	waitIdleClosed(t, c, srv.URL)
	get("five", true)
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections after the engine closed the idle one, want 3", n)
	}

	// A connection idle for longer is looked at before it is used, so that
	// even a body that cannot be sent twice goes out once, on a fresh one.
	c.mu.Lock()
	for _, conn := range c.idle[strings.TrimPrefix(srv.URL, "http://")] {
		conn.idleSince = time.Now().Add(-2 * trustIdle)
	}
	c.mu.Unlock()
	srv.CloseClientConnections()
	waitIdleClosed(t, c, srv.URL)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/echo", io.NopCloser(strings.NewReader("six")))
	resp, err := c.do(context.Background(), req)
	if err != nil {
		t.Fatalf("the closed idle connection was used: %v", err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != "six" || conns.Load() != 4 {
		t.Fatalf("echo %q over %d connections, want six over 4", got, conns.Load())
	}
}

func TestEngineClientCancelClosesTheConnection(t *testing.T) {
	gone := make(chan struct{})
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("data: first\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	})
	c := newEngineClient()
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := post(t, c, ctx, srv.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("reading after the context ended did not fail")
	}
	resp.Body.Close()
	select {
	case <-gone:
	case <-time.After(failSafe):
		t.Fatal("the engine did not see the request end")
	}
}

func TestEngineClientRefusesHTTPS(t *testing.T) {
	if _, err := post(t, newEngineClient(), context.Background(), "https://127.0.0.1:1/", "{}"); err == nil || !strings.Contains(err.Error(), "only http://") {
		t.Errorf("err = %v", err)
	}
}
