package adminapi

import (
	"context"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/goleak"
)

// serve serves the API on loopback and returns a client of it.
func serve(t *testing.T, src Sources, guard fiber.Handler) *Client {
	t.Helper()
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	if guard == nil {
		guard = func(c *fiber.Ctx) error { return c.Next() }
	}
	mount(app, guard, src, logStream{heartbeat: 10 * time.Millisecond, writeTimeout: time.Second})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { app.Listener(ln); close(served) }()
	t.Cleanup(func() {
		app.Shutdown()
		<-served
	})
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	c, err := NewClient("http://"+ln.Addr().String()+"/", "", hc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClientReadsWhatTheHandlersWrite: each endpoint, through the client,
// gives back what the sources hold, and the daemon's JSON as it came.
func TestClientReadsWhatTheHandlersWrite(t *testing.T) {
	cl := sampleCluster()
	c := serve(t, Sources{Engines: &fakeEngines{list: sampleEngines, logs: map[string][]string{"rig/gpu0": {"a", "b"}}},
		Sessions: sampleSessions, Cluster: cl}, nil)
	ctx := t.Context()
	engines, err := c.Engines(ctx)
	if err != nil || !reflect.DeepEqual(engines.Engines, sampleEngines) || !strings.HasPrefix(string(engines.Raw), `{"engines":[{"name":"rig/gpu0"`) {
		t.Errorf("Engines: %+v %v", engines, err)
	}
	sessions, err := c.Sessions(ctx)
	if err != nil || !reflect.DeepEqual(sessions.Sessions, []Session(sampleSessions)) {
		t.Errorf("Sessions: %+v %v", sessions, err)
	}
	nodes, err := c.Nodes(ctx)
	want := cl.nodes
	want.Nodes[1].GPUs, want.Nodes[1].Engines = []NodeGPU{}, []NodeEngine{}
	nodes.Raw = nil
	if err != nil || !reflect.DeepEqual(nodes, want) {
		t.Errorf("Nodes: %+v %v, want %+v", nodes, err, want)
	}
	requests, err := c.JoinRequests(ctx)
	requests.Raw = nil
	if err != nil || !reflect.DeepEqual(requests, cl.requests) {
		t.Errorf("JoinRequests: %+v %v", requests, err)
	}
	logs, err := c.Logs(ctx, "rig/gpu0")
	if err != nil || logs != "a\nb\n" {
		t.Errorf("Logs: %q %v", logs, err)
	}
	for _, op := range []struct {
		name string
		do   func() (Outcome, error)
		want Outcome
	}{
		{"Revoke", func() (Outcome, error) { return c.Revoke(ctx, "n/b") }, Outcome{Revoked: "n%2Fb"}},
		{"Accept", func() (Outcome, error) { return c.Accept(ctx, "r1") }, Outcome{Accepted: "r1"}},
		{"Reject", func() (Outcome, error) { return c.Reject(ctx, "r2") }, Outcome{Rejected: "r2"}},
		{"Leave", func() (Outcome, error) { return c.Leave(ctx) }, Outcome{Left: "n-a"}},
	} {
		got, err := op.do()
		raw := string(got.Raw)
		got.Raw = nil
		if err != nil || !reflect.DeepEqual(got, op.want) || raw == "" {
			t.Errorf("%s: %+v (%s) %v, want %+v", op.name, got, raw, err, op.want)
		}
	}
}

// TestClientErrors: any status but 200 is an *Error with the status and
// the server's message, whichever of the daemon's error shapes it came in.
func TestClientErrors(t *testing.T) {
	cases := []struct {
		name, body string
		status     int
		want       string
		is         error
	}{
		{"console's shape", `{"error":"missing API key: /api/v1 needs an admin key (Authorization: Bearer)"}`, 401,
			"401 Unauthorized: missing API key: /api/v1 needs an admin key (Authorization: Bearer)", nil},
		{"gateway's shape", `{"error":{"message":"this node belongs to no cluster","type":"invalid_request_error","param":null,"code":null}}`, 409,
			"409 Conflict: this node belongs to no cluster", ErrConflict},
		{"text", "no node \"x\" is known\n", 404, `404 Not Found: no node "x" is known`, ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c, _ := NewClient(srv.URL, "", nil)
			_, err := c.Revoke(t.Context(), "x")
			var e *Error
			if !errors.As(err, &e) || e.StatusCode != tc.status || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.is)
			}
			if errors.Is(err, ErrNotFound) && tc.is != ErrNotFound {
				t.Errorf("%v matches ErrNotFound", err)
			}
		})
	}
}

func TestClientSendsTheKey(t *testing.T) {
	var mu sync.Mutex
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Get("Authorization")
		mu.Unlock()
		w.Write([]byte(`{"engines":[]}`))
	}))
	defer srv.Close()
	for key, want := range map[string]string{"": "", "sk-admin": "Bearer sk-admin"} {
		c, _ := NewClient(srv.URL, key, nil)
		if _, err := c.Engines(t.Context()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if got != want {
			t.Errorf("key %q: Authorization %q, want %q", key, got, want)
		}
		mu.Unlock()
	}
}

// TestTrustingHearthsCA: a daemon whose certificate only its own CA
// vouches for is refused by a plain client and read by one trusting the
// CA file; a missing file trusts the system's roots only.
func TestTrustingHearthsCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"engines":[]}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	plain, _ := NewClient(srv.URL, "", nil)
	if _, err := plain.Engines(t.Context()); err == nil {
		t.Fatal("a client that trusts only the system's roots read a daemon with Hearth's certificate")
	}
	hc, err := HTTPClientTrusting(caFile)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := NewClient(srv.URL, "", hc)
	if _, err := c.Engines(t.Context()); err != nil {
		t.Errorf("trusting the CA: %v", err)
	}
	if hc, err := HTTPClientTrusting(filepath.Join(dir, "missing.pem")); err != nil || hc != http.DefaultClient {
		t.Errorf("no CA file: %v, %v; want the default client", hc, err)
	}
	bad := filepath.Join(dir, "bad.pem")
	os.WriteFile(bad, []byte("not a certificate"), 0o644)
	if _, err := HTTPClientTrusting(bad); err == nil {
		t.Error("a CA file with no certificate was taken")
	}
}

func TestNewClientRefusesABadURL(t *testing.T) {
	if _, err := NewClient("http://[::1", "", nil); err == nil {
		t.Error("NewClient took a URL that does not parse")
	}
}

// TestFollowLogs: a follower gets the kept lines, then lines written after
// it connected, and the restart of the engine with its new run's lines;
// when it goes, the stream that served it ends.
func TestFollowLogs(t *testing.T) {
	log := newFakeLog("Starting to load model Qwen/Qwen3-14B-FP8...")
	c := serve(t, Sources{Engines: &fakeEngines{follow: map[string]*fakeLog{"rig/gpu0": log}}}, nil)
	leaks := goleak.IgnoreCurrent()

	events := make(chan LogEvent, 16)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.FollowLogs(ctx, "rig/gpu0", func(ev LogEvent) { events <- ev }) }()
	next := func(want LogEvent) {
		t.Helper()
		select {
		case got := <-events:
			if got != want {
				t.Fatalf("event %+v, want %+v", got, want)
			}
		case <-t.Context().Done():
			t.Fatalf("no event; want %+v", want)
		}
	}
	next(LogEvent{Line: "Starting to load model Qwen/Qwen3-14B-FP8..."})
	log.write("Loading safetensors checkpoint shards:  50% Completed | 2/4")
	next(LogEvent{Line: "Loading safetensors checkpoint shards:  50% Completed | 2/4"})
	log.relaunch("Starting again")
	next(LogEvent{Restart: true})
	next(LogEvent{Line: "Starting again"})

	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("FollowLogs ended with %v, want ctx's error", err)
	}
	if err := goleak.Find(leaks,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).getCh.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1")); err != nil {
		t.Errorf("the follow stream outlived its client: %v", err)
	}
}

func TestFollowLogsOfAnUnknownEngine(t *testing.T) {
	c := serve(t, Sources{Engines: &fakeEngines{}}, nil)
	err := c.FollowLogs(t.Context(), "nope", func(LogEvent) { t.Error("an event from no engine") })
	if !errors.Is(err, ErrNotFound) || err.Error() != `404 Not Found: no engine named "nope"` {
		t.Errorf("FollowLogs of no engine: %v", err)
	}
}
