package runtime

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeHandle is an engine the test drives: it becomes ready or dies when
// told to.
type fakeHandle struct {
	n      int // which launch made it, from 1
	ready  chan struct{}
	exited chan struct{}
	once   sync.Once
	err    error
	logs   []string
	ring   *LogRing // with fakeLauncher.rings
	stops  int
}

func newFakeHandle(n int) *fakeHandle {
	return &fakeHandle{n: n, ready: make(chan struct{}), exited: make(chan struct{})}
}

func (h *fakeHandle) becomeReady() { close(h.ready) }

func (h *fakeHandle) die(err error) {
	h.once.Do(func() {
		h.err = err
		close(h.exited)
	})
}

func (h *fakeHandle) Endpoints() Endpoints { return Endpoints{BaseURL: "http://engine.test"} }
func (h *fakeHandle) Identity() Identity   { return Identity{PID: 1000 + h.n} }
func (h *fakeHandle) Logs() []string       { return h.logs }
func (h *fakeHandle) Wait() error {
	<-h.exited
	return h.err
}

func (h *fakeHandle) Ready(ctx context.Context) error {
	select {
	case <-h.ready:
		return nil
	case <-h.exited:
		return ErrExited
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *fakeHandle) Stop(context.Context) error {
	h.stops++
	h.die(errors.New("signal: terminated"))
	return nil
}

// ringHandle is a fakeHandle whose output goes to a LogRing, which can be
// followed, as the process runtime's does.
type ringHandle struct{ *fakeHandle }

func (h ringHandle) Logs() []string { return h.ring.Lines() }

func (h ringHandle) LogsSince(seq uint64) ([]string, uint64, <-chan struct{}) {
	return h.ring.LinesSince(seq)
}

var _ LogFollower = ringHandle{}

// fakeLauncher hands each launch's handle to the test.
type fakeLauncher struct {
	launched chan *fakeHandle
	n        int
	// onLaunch, when set, acts on a handle before Launch returns it.
	onLaunch func(*fakeHandle)
	// rings makes every handle write to a LogRing (fakeHandle.ring) and
	// be a LogFollower.
	rings bool
	// fail, when set, is the error of the launches it returns true for.
	fail func(n int) error
}

func (l *fakeLauncher) Name() string { return "fake" }

func (l *fakeLauncher) Launch(ctx context.Context, spec Spec) (Handle, error) {
	l.n++
	if l.fail != nil {
		if err := l.fail(l.n); err != nil {
			return nil, err
		}
	}
	h := newFakeHandle(l.n)
	if l.rings {
		h.ring = NewLogRing(100, nil)
	}
	if l.onLaunch != nil {
		l.onLaunch(h)
	}
	if l.launched != nil {
		l.launched <- h
	}
	if l.rings {
		return ringHandle{h}, nil
	}
	return h, nil
}

// fakeAttacher records what is in service.
type fakeAttacher struct {
	mu       sync.Mutex
	attached map[string]int // engine name → times attached
	live     map[string]bool
}

func (a *fakeAttacher) Attach(ctx context.Context, e ReadyEngine) (func(), error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.attached == nil {
		a.attached, a.live = map[string]int{}, map[string]bool{}
	}
	a.attached[e.Spec.Name]++
	a.live[e.Spec.Name] = true
	return func() {
		if ctx.Err() == nil {
			panic("detach before the attach context ended")
		}
		a.mu.Lock()
		a.live[e.Spec.Name] = false
		a.mu.Unlock()
	}, nil
}

func (a *fakeAttacher) state(name string) (attached int, live bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.attached[name], a.live[name]
}

// healthyEngine answers every probe with 200 and an empty body, or 503
// while fail says so (for failPath only, when set).
type healthyEngine struct {
	fail     func() bool
	failPath string
}

func (e healthyEngine) RoundTrip(r *http.Request) (*http.Response, error) {
	status := http.StatusOK
	if e.fail != nil && e.fail() && (e.failPath == "" || r.URL.Path == e.failPath) {
		status = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

func testSpec(name string) Spec { return Spec{Name: name, Engine: KindVLLM, Model: "m"} }

func newTestSupervisor(t *testing.T, l Launcher, a Attacher, transport http.RoundTripper) *Supervisor {
	return newTestSupervisorOf(t, testSpec("gpu0"), l, a, transport)
}

func newTestSupervisorOf(t *testing.T, spec Spec, l Launcher, a Attacher, transport http.RoundTripper) *Supervisor {
	t.Helper()
	s, err := NewSupervisor(SupervisorConfig{
		Engines:    []Supervised{{Spec: spec, Launcher: l}},
		Attacher:   a,
		HTTPClient: &http.Client{Transport: transport},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func status(t *testing.T, s *Supervisor) Status {
	t.Helper()
	return s.Engines()[0]
}

func TestSupervisorRestartsADeadEngineWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLauncher{launched: make(chan *fakeHandle)}
		a := &fakeAttacher{}
		s := newTestSupervisor(t, l, a, healthyEngine{})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()

		h := <-l.launched
		synctest.Wait()
		if st := status(t, s); st.State != StateLoading || st.PID != 1001 {
			t.Fatalf("launched engine: %+v, want loading with its PID", st)
		}
		h.becomeReady()
		synctest.Wait()
		if n, live := a.state("gpu0"); n != 1 || !live {
			t.Fatalf("ready engine attached %d times, live %v", n, live)
		}
		if st := status(t, s); st.State != StateReady {
			t.Fatalf("state %s, want ready", st.State)
		}

		// It dies after serving: out of service at once, back after 1 s.
		died := time.Now()
		h.die(errors.New("signal: killed"))
		synctest.Wait()
		if _, live := a.state("gpu0"); live {
			t.Fatal("a dead engine is still in service")
		}
		st := status(t, s)
		if st.State != StateRestarting || !strings.Contains(st.LastError, "signal: killed") {
			t.Fatalf("dead engine: %+v, want restarting with the exit reason", st)
		}
		h2 := <-l.launched
		if waited := time.Since(died); waited != time.Second {
			t.Errorf("restarted after %v, want 1s", waited)
		}
		h2.becomeReady()
		synctest.Wait()
		if n, live := a.state("gpu0"); n != 2 || !live {
			t.Fatalf("restarted engine attached %d times, live %v", n, live)
		}
		if st := status(t, s); st.State != StateReady || st.Restarts != 1 || st.LastError != "" {
			t.Fatalf("restarted engine: %+v, want ready with 1 restart", st)
		}

		// Stopping the supervisor stops the engine and takes it out.
		cancel()
		<-done
		if h2.stops != 1 {
			t.Errorf("engine stopped %d times, want 1", h2.stops)
		}
		if _, live := a.state("gpu0"); live {
			t.Error("stopped engine still in service")
		}
		if st := status(t, s); st.State != StateStopped {
			t.Errorf("state %s after stop, want stopped", st.State)
		}
	})
}

func TestSupervisorGivesUpAfterFiveFailedStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLauncher{onLaunch: func(h *fakeHandle) {
			h.logs = []string{"loading weights", "torch.OutOfMemoryError: CUDA out of memory"}
			h.die(errors.New("exit status 1"))
		}}
		a := &fakeAttacher{}
		s := newTestSupervisor(t, l, a, healthyEngine{})
		start := time.Now()
		s.Run(t.Context()) // returns once the only engine has failed
		if l.n != 5 {
			t.Errorf("launched %d times, want 5", l.n)
		}
		// Waits of 1, 2, 4 and 8 s between the five starts.
		if took := time.Since(start); took != 15*time.Second {
			t.Errorf("gave up after %v, want 15s of backoff", took)
		}
		st := status(t, s)
		if st.State != StateFailed || !strings.Contains(st.LastError, "5 times") || !strings.Contains(st.LastError, "exit status 1") {
			t.Fatalf("engine: %+v, want failed after 5 starts with the exit status", st)
		}
		if logs, _ := s.Logs("gpu0"); len(logs) == 0 || !strings.Contains(logs[len(logs)-1], "out of memory") {
			t.Errorf("failed engine's logs: %q, want its last lines", logs)
		}
		if !strings.Contains(s.Summary("m"), "gpu0 failed") {
			t.Errorf("summary %q does not say the engine failed", s.Summary("m"))
		}
		if n, _ := a.state("gpu0"); n != 0 {
			t.Errorf("an engine that never became ready was attached %d times", n)
		}
	})
}

func TestSupervisorBackoffDoublesToAMinuteAndResetsAfterTenHealthyMinutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLauncher{launched: make(chan *fakeHandle)}
		s := newTestSupervisor(t, l, &fakeAttacher{}, healthyEngine{})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go s.Run(ctx)

		var waits []time.Duration
		h := <-l.launched
		for range 8 {
			h.becomeReady()
			synctest.Wait()
			time.Sleep(time.Second) // serves a second, then dies
			h.die(errors.New("crash"))
			died := time.Now()
			h = <-l.launched
			waits = append(waits, time.Since(died))
		}
		want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60}
		for i := range want {
			if waits[i] != want[i]*time.Second {
				t.Fatalf("waits %v, want %v seconds", waits, want)
			}
		}
		// Ten healthy minutes forgive the past.
		h.becomeReady()
		synctest.Wait()
		time.Sleep(10 * time.Minute)
		h.die(errors.New("crash"))
		died := time.Now()
		<-l.launched
		if w := time.Since(died); w != time.Second {
			t.Errorf("after 10 healthy minutes the restart waited %v, want 1s", w)
		}
		if st := status(t, s); st.Restarts != 9 {
			t.Errorf("restarts %d, want 9", st.Restarts)
		}
	})
}

func TestSupervisorRestartsAnEngineThatStopsAnswering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		hung := false
		l := &fakeLauncher{launched: make(chan *fakeHandle)}
		a := &fakeAttacher{}
		s := newTestSupervisor(t, l, a, healthyEngine{fail: func() bool { mu.Lock(); defer mu.Unlock(); return hung }})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go s.Run(ctx)

		h := <-l.launched
		h.becomeReady()
		time.Sleep(time.Minute)
		synctest.Wait()
		if st := status(t, s); st.State != StateReady {
			t.Fatalf("a healthy engine is %s after a minute", st.State)
		}
		mu.Lock()
		hung = true
		mu.Unlock()
		// Three failed checks, 5 s apart.
		time.Sleep(15 * time.Second)
		synctest.Wait()
		st := status(t, s)
		if st.State != StateRestarting || !strings.Contains(st.LastError, "hangs") {
			t.Fatalf("hung engine: %+v, want restarting because it hangs", st)
		}
		if h.stops != 1 {
			t.Errorf("hung engine stopped %d times, want 1", h.stops)
		}
		if _, live := a.state("gpu0"); live {
			t.Error("hung engine still in service")
		}
	})
}

func TestNewSupervisorRejectsBadEngines(t *testing.T) {
	l := &fakeLauncher{}
	cases := []struct {
		name    string
		engines []Supervised
		want    string
	}{
		{"no name", []Supervised{{Spec: Spec{Engine: KindVLLM, Model: "m"}, Launcher: l}}, "name is empty"},
		{"no launcher", []Supervised{{Spec: testSpec("a")}}, "no launcher"},
		{"twice the same name", []Supervised{{Spec: testSpec("a"), Launcher: l}, {Spec: testSpec("a"), Launcher: l}}, "two engines named a"},
		{"unknown engine", []Supervised{{Spec: Spec{Name: "a", Engine: "tgi", Model: "m"}, Launcher: l}}, "unknown engine"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSupervisor(SupervisorConfig{Engines: tc.engines, Attacher: &fakeAttacher{}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestSupervisorProbesSGLangsScheduler: an SGLang engine whose HTTP server
// answers /health while its scheduler is dead fails /health_generate, and
// is restarted.
func TestSupervisorProbesSGLangsScheduler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		dead := false
		l := &fakeLauncher{launched: make(chan *fakeHandle)}
		spec := testSpec("gpu0")
		spec.Engine = KindSGLang
		s := newTestSupervisorOf(t, spec, l, &fakeAttacher{}, healthyEngine{
			fail:     func() bool { mu.Lock(); defer mu.Unlock(); return dead },
			failPath: "/health_generate",
		})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go s.Run(ctx)

		h := <-l.launched
		h.becomeReady()
		synctest.Wait()
		mu.Lock()
		dead = true
		mu.Unlock()
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if st := status(t, s); st.State != StateRestarting || !strings.Contains(st.LastError, "hangs") {
			t.Fatalf("SGLang with a dead scheduler: %+v, want restarting", st)
		}
	})
}

func TestSupervisorHoldStopsAnEngineUntilReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLauncher{launched: make(chan *fakeHandle)}
		a := &fakeAttacher{}
		s, err := NewSupervisor(SupervisorConfig{
			Engines:  []Supervised{{Spec: testSpec("gpu0"), Launcher: l}},
			Attacher: a, HTTPClient: &http.Client{Transport: healthyEngine{}},
			// Even engines meant to outlive the daemon are stopped for a hold.
			KeepEngines: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go s.Run(ctx)

		h := <-l.launched
		h.becomeReady()
		synctest.Wait()
		if !s.Hold("gpu0", "GPU lost: GPU is lost") {
			t.Fatal("Hold did not find gpu0")
		}
		synctest.Wait()
		if h.stops != 1 {
			t.Errorf("held engine stopped %d times, want 1", h.stops)
		}
		if _, live := a.state("gpu0"); live {
			t.Error("a held engine is still in service")
		}
		st := status(t, s)
		if st.State != StateStopped || st.LastError != "GPU lost: GPU is lost" {
			t.Fatalf("held engine: %+v, want stopped with the reason", st)
		}
		select {
		case <-s.Settled():
		default:
			t.Error("a held engine does not count as settled")
		}

		// Held for an hour: no launch, no restart counted.
		time.Sleep(time.Hour)
		synctest.Wait()
		select {
		case h := <-l.launched:
			t.Fatalf("a held engine was launched again (launch %d)", h.n)
		default:
		}

		released := time.Now()
		s.Release("gpu0")
		h2 := <-l.launched
		if waited := time.Since(released); waited != 0 {
			t.Errorf("relaunched %v after the release, want at once", waited)
		}
		h2.becomeReady()
		synctest.Wait()
		if n, live := a.state("gpu0"); n != 2 || !live {
			t.Fatalf("released engine attached %d times, live %v", n, live)
		}
		if st := status(t, s); st.State != StateReady || st.LastError != "" || st.Restarts != 0 {
			t.Errorf("released engine: %+v, want ready, no error, no restart counted", st)
		}
		if s.Hold("gpu9", "x") || s.Release("gpu9") {
			t.Error("Hold or Release found an engine that does not exist")
		}
	})
}

func TestSupervisorHoldDuringBackoffAndBeforeStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLauncher{launched: make(chan *fakeHandle)}
		s := newTestSupervisor(t, l, &fakeAttacher{}, healthyEngine{})
		// Held before Run: the engine never starts.
		s.Hold("gpu0", "GPU lost at start")
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go s.Run(ctx)
		time.Sleep(time.Minute)
		synctest.Wait()
		if st := status(t, s); st.State != StateStopped || l.n != 0 {
			t.Fatalf("engine held before Run: %+v after %d launches", st, l.n)
		}
		s.Release("gpu0")
		h := <-l.launched
		// It dies while loading; held during the backoff, it stays down.
		h.die(errors.New("CUDA error: unspecified launch failure"))
		synctest.Wait()
		if st := status(t, s); st.State != StateRestarting {
			t.Fatalf("state %s, want restarting", st.State)
		}
		s.Hold("gpu0", "GPU lost")
		time.Sleep(time.Minute)
		synctest.Wait()
		if st := status(t, s); st.State != StateStopped || st.LastError != "GPU lost" || l.n != 1 {
			t.Fatalf("engine held in backoff: %+v after %d launches", st, l.n)
		}
	})
}
