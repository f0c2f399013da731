package sim

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

// stuckEngine accepts requests and never schedules them: a scheduler that
// hangs while the HTTP server lives on.
type stuckEngine struct{ fakeEngine }

func (e *stuckEngine) Submit(ctx context.Context, req *Request) (<-chan TokenOutput, error) {
	return make(chan TokenOutput), nil
}

// stoppedEngine's loop has ended: every request is refused.
type stoppedEngine struct{ fakeEngine }

func (e *stoppedEngine) Submit(context.Context, *Request) (<-chan TokenOutput, error) {
	return nil, ErrStopped
}

func TestSGLangHealthGenerate(t *testing.T) {
	tests := []struct {
		name   string
		engine Engine
		want   int
	}{
		{"working engine", newTestEngine(t, 1000), http.StatusOK},
		{"stuck scheduler", &stuckEngine{}, http.StatusServiceUnavailable},
		{"dead scheduler", &stoppedEngine{}, http.StatusServiceUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, tc.engine, func(o *ServerOptions) {
				o.Kind = hruntime.KindSGLang
				o.HealthCheckTimeout = 50 * time.Millisecond
			})
			waitHealthy(t, ts)
			if resp, _ := ts.get(t, "/health_generate"); resp.StatusCode != tc.want {
				t.Errorf("/health_generate: %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

// waitHealthy waits until /health answers 200: the engine loop runs.
func waitHealthy(t *testing.T, ts *testServer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, _ := ts.get(t, "/health")
		if resp.StatusCode == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health stays %d", resp.StatusCode)
		}
		<-ts.handled // the next probe after this one's handler returned
	}
}

func TestSGLangOnlyEndpoints(t *testing.T) {
	for _, tc := range []struct {
		flavor hruntime.Kind
		want   int
	}{{hruntime.KindVLLM, http.StatusNotFound}, {hruntime.KindSGLang, http.StatusOK}} {
		ts := startServer(t, &fakeEngine{}, func(o *ServerOptions) { o.Kind = tc.flavor })
		for _, path := range []string{"/server_info", "/get_server_info", "/get_model_info"} {
			if resp, _ := ts.get(t, path); resp.StatusCode != tc.want {
				t.Errorf("%v: GET %s = %d, want %d", tc.flavor, path, resp.StatusCode, tc.want)
			}
		}
		_, body := ts.get(t, "/v1/models")
		if want := `"owned_by":"` + string(tc.flavor) + `"`; !strings.Contains(string(body), want) {
			t.Errorf("%v: /v1/models %s lacks %s", tc.flavor, body, want)
		}
	}
}

// TestSGLangDeprecatedServerInfo: SGLang answers /get_server_info as
// /server_info and logs a warning on every call (http_server.py).
func TestSGLangDeprecatedServerInfo(t *testing.T) {
	var logs bytes.Buffer
	ts := startServer(t, &fakeEngine{}, func(o *ServerOptions) {
		o.Kind = hruntime.KindSGLang
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	_, current := ts.get(t, "/server_info")
	if strings.Contains(logs.String(), "deprecated") {
		t.Errorf("/server_info warned: %s", logs.String())
	}
	_, old := ts.get(t, "/get_server_info")
	if !bytes.Equal(old, current) {
		t.Errorf("/get_server_info %s, /server_info %s", old, current)
	}
	if want := "Endpoint '/get_server_info' is deprecated"; !strings.Contains(logs.String(), want) {
		t.Errorf("log %q lacks %q", logs.String(), want)
	}
}
