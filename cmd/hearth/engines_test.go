package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/daemon"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// ringEngine is an engine that never becomes ready and writes its output
// to a LogRing the test writes to, as a child process's would.
type ringEngine struct {
	ring   *hruntime.LogRing
	exited chan struct{}
	once   sync.Once
}

func (e *ringEngine) Endpoints() hruntime.Endpoints {
	return hruntime.Endpoints{BaseURL: "http://127.0.0.1:1"}
}
func (e *ringEngine) Identity() hruntime.Identity { return hruntime.Identity{PID: 4242} }
func (e *ringEngine) Logs() []string              { return e.ring.Lines() }
func (e *ringEngine) LogsSince(seq uint64) ([]string, uint64, <-chan struct{}) {
	return e.ring.LinesSince(seq)
}

func (e *ringEngine) Ready(ctx context.Context) error {
	select {
	case <-e.exited:
		return hruntime.ErrExited
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *ringEngine) Wait() error {
	<-e.exited
	return nil
}

func (e *ringEngine) Stop(context.Context) error {
	e.once.Do(func() { close(e.exited) })
	return nil
}

type ringLauncher struct{ launched chan *ringEngine }

func (l ringLauncher) Name() string { return "fake" }

func (l ringLauncher) Launch(context.Context, hruntime.Spec) (hruntime.Handle, error) {
	e := &ringEngine{ring: hruntime.NewLogRing(100, nil), exited: make(chan struct{})}
	l.launched <- e
	return e, nil
}

type noAttacher struct{}

func (noAttacher) Attach(context.Context, hruntime.ReadyEngine) (func(), error) {
	return nil, errors.New("not in this test")
}

// loadingEngine runs a supervisor with one engine that stays loading and
// returns it with the engine's log to write to.
func loadingEngine(t *testing.T) (*hruntime.Supervisor, *ringEngine) {
	t.Helper()
	l := ringLauncher{launched: make(chan *ringEngine, 1)}
	sup, err := hruntime.NewSupervisor(hruntime.SupervisorConfig{
		Engines:  []hruntime.Supervised{{Spec: hruntime.Spec{Name: "rig/gpu0", Engine: hruntime.KindVLLM, Model: "m"}, Launcher: l}},
		Attacher: noAttacher{},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The log's first page, taken before the launch, says when the run
	// starts: the engine is loading by then.
	before, _ := sup.LogsAfter("rig/gpu0", hruntime.LogCursor{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sup.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	e := <-l.launched
	<-before.Relaunched
	return sup, e
}

// serveLogs serves the admin API on a supervisor's engines.
func serveLogs(t *testing.T, sup *hruntime.Supervisor) string {
	t.Helper()
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	open := func(c *fiber.Ctx) error { return c.Next() }
	adminapi.Mount(app, open, daemon.AdminSources(sup.Engines, sup, api.NewTraffic(api.TrafficLimits{}), nil, nil, ""))
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
	return "http://" + ln.Addr().String()
}

func writeLog(t *testing.T, e *ringEngine, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(e.ring, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
}

// syncBuffer is a bytes.Buffer the command writes while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	// grew, when not nil, is signalled after each write.
	grew chan struct{}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.grew <- struct{}{}:
	default:
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	for {
		b.mu.Lock()
		has := strings.Contains(b.buf.String(), s)
		b.mu.Unlock()
		if has {
			return
		}
		select {
		case <-b.grew:
		case <-t.Context().Done():
			return
		}
	}
}

func TestLogsFollowCommand(t *testing.T) {
	sup, engine := loadingEngine(t)
	baseURL := serveLogs(t, sup)
	writeLog(t, engine, "first line")
	out := &syncBuffer{grew: make(chan struct{}, 1)}
	env := &environment{stdin: strings.NewReader(""), stdout: out, stderr: io.Discard, getenv: func(string) string { return "" }}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, env, []string{"logs", "rig/gpu0", "-f", "--addr", baseURL}) }()
	out.waitFor(t, "first line\n")
	writeLog(t, engine, "second line")
	out.waitFor(t, "second line\n")
	cancel() // Ctrl-C
	if err := <-done; err != nil {
		t.Errorf("hearth logs -f ended with %v, want nil on interrupt", err)
	}
	if got := out.buf.String(); got != "first line\nsecond line\n" {
		t.Errorf("printed %q, want the two lines, nothing else", got)
	}
}

// TestEnginesCommandShowsALoadingEnginesPhase, read from a live
// supervisor's engine that is capturing CUDA graphs.
func TestEnginesCommandShowsALoadingEnginesPhase(t *testing.T) {
	sup, engine := loadingEngine(t)
	baseURL := serveLogs(t, sup)
	writeLog(t, engine, "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  40%|████      | 27/67 [00:05<00:07,  5.43it/s]")
	out, _, err := runHearth(t, "", "engines", "--addr", baseURL)
	if err != nil || !strings.Contains(out, "loading: capturing CUDA graphs 40%") {
		t.Errorf("hearth engines: %v\n%s", err, out)
	}
}

func TestEnginesCommandShowsTheDiagnosis(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"engines":[{"name":"rig/gpu0","runtime":"docker","kind":"vllm","model":"m","gpu":0,"state":"failed",
			"last_error":"failed to start 5 times in a row: exited: exit status 1: meta-llama/Llama-3.1-8B is a gated model: set HF_TOKEN to a token with access to it","cause":"gated_model","since":"2026-01-01T00:00:00Z"}]}`)
	}))
	defer srv.Close()
	out, _, err := runHearth(t, "", "engines", "--addr", srv.URL)
	if err != nil || !strings.Contains(out, "set HF_TOKEN to a token with access to it") {
		t.Errorf("hearth engines: %v\n%s", err, out)
	}
}

// TestEnginesCommandShowsATensorParallelEngineOnce: one row for an engine
// over two GPUs, naming both.
func TestEnginesCommandShowsATensorParallelEngineOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"engines":[{"name":"rig/gpu0","runtime":"docker","kind":"vllm","model":"m","gpu":0,"gpus":[0,1],"state":"ready",
			"since":"2026-01-01T00:00:00Z"}]}`)
	}))
	defer srv.Close()
	out, _, err := runHearth(t, "", "engines", "--addr", srv.URL)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 2 || !strings.Contains(lines[1], "  m  ") || !strings.Contains(lines[1], "  0,1  ") {
		t.Errorf("hearth engines: %v\n%s", err, out)
	}
}
