package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// State is where an engine is in its life.
type State string

// The states of an engine. A supervised engine goes starting → loading →
// ready; when it dies it goes restarting → starting again, or failed when it
// keeps dying before it is ready; stopped when the daemon stops it.
const (
	StateStarting   State = "starting"   // being launched
	StateLoading    State = "loading"    // running, not serving yet (weights loading)
	StateReady      State = "ready"      // serving, in the router
	StateRestarting State = "restarting" // dead, waiting out its backoff
	StateFailed     State = "failed"     // given up on; see LastError and Logs
	StateStopped    State = "stopped"
)

// Supervised is one engine for the Supervisor: what to run and with which
// runtime.
type Supervised struct {
	Spec     Spec
	Launcher Launcher
}

// ReadyEngine is an engine that serves, as Attach receives it.
type ReadyEngine struct {
	Spec      Spec
	Runtime   string
	Endpoints Endpoints
	Profile   Profile
}

// Attacher puts a serving engine into service (the router, the gateway) and
// takes it out again. Attach's ctx ends when the engine goes down, just
// before detach is called; whatever Attach started on ctx (following the
// engine's KV events) must be done when detach returns.
type Attacher interface {
	Attach(ctx context.Context, e ReadyEngine) (detach func(), err error)
}

// Backoff says how a dead engine is restarted.
type Backoff struct {
	Initial time.Duration // first wait before a restart; default 1 s
	Max     time.Duration // the wait doubles up to this; default 60 s
	// ResetAfter is how long an engine must have served for its next
	// death to start again from Initial; default 10 minutes.
	ResetAfter time.Duration
	// MaxStartFailures is how many deaths in a row before becoming ready
	// mark an engine failed; default 5.
	MaxStartFailures int
}

// SupervisorConfig configures NewSupervisor.
type SupervisorConfig struct {
	Engines  []Supervised
	Attacher Attacher
	Backoff  Backoff
	// ReadyTimeout bounds a start, from launch to serving; default 20
	// minutes (a first start downloads the weights).
	ReadyTimeout time.Duration
	// KeepEngines leaves engines running when the Supervisor stops, where
	// their runtime can let go of them (a Handle that is a Detacher), for
	// the next daemon to adopt; others are stopped.
	KeepEngines bool
	// StopTimeout is how long a stopping engine may take before it is
	// killed; default 30 s.
	StopTimeout time.Duration
	// Liveness is how often a serving engine's /health is checked, and
	// LivenessFailures how many failed checks in a row mean it hangs and is
	// restarted; defaults 5 s and 3. An HTTP server can outlive the engine
	// loop behind it.
	Liveness         time.Duration
	LivenessFailures int
	// HTTPClient talks to engines; default a client of its own.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// LogLines is how many of an engine's last log lines a failure report
	// carries; default 20.
	LogLines int
}

func (c *SupervisorConfig) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Backoff.Initial, time.Second)
	def(&c.Backoff.Max, time.Minute)
	def(&c.Backoff.ResetAfter, 10*time.Minute)
	def(&c.ReadyTimeout, 20*time.Minute)
	def(&c.StopTimeout, 30*time.Second)
	def(&c.Liveness, 5*time.Second)
	if c.Backoff.MaxStartFailures <= 0 {
		c.Backoff.MaxStartFailures = 5
	}
	if c.LivenessFailures <= 0 {
		c.LivenessFailures = 3
	}
	if c.LogLines <= 0 {
		c.LogLines = 20
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second}}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Status is one engine as the API and the console show it.
type Status struct {
	Name    string
	Runtime string
	Engine  Kind
	Model   string
	GPU     GPU
	State   State
	Identity
	BaseURL   string
	Restarts  int
	LastError string
	Since     time.Time // when it entered State
	Profile   Profile   // as measured once ready
}

// Supervisor starts every engine and keeps it running. See the package
// documentation for its contract.
type Supervisor struct {
	cfg     SupervisorConfig
	log     *slog.Logger
	engines []*supervised

	unsettled sync.WaitGroup // engines not yet ready or failed once
	settled   chan struct{}
}

// supervised is the Supervisor's record of one engine.
type supervised struct {
	Supervised
	settle   sync.Once // marks the engine's first ready or failed state
	onSettle func()
	mu       sync.Mutex
	status   Status
	handle   Handle // the current one, nil between runs
}

// NewSupervisor checks the engines' specs; nothing starts before Run.
func NewSupervisor(cfg SupervisorConfig) (*Supervisor, error) {
	cfg.setDefaults()
	if cfg.Attacher == nil {
		return nil, errors.New("supervisor: no attacher")
	}
	s := &Supervisor{cfg: cfg, log: cfg.Logger, settled: make(chan struct{})}
	seen := map[string]bool{}
	for _, e := range cfg.Engines {
		if err := e.Spec.Validate(); err != nil {
			return nil, fmt.Errorf("supervisor: %w", err)
		}
		if e.Launcher == nil {
			return nil, fmt.Errorf("supervisor: engine %s has no launcher", e.Spec.Name)
		}
		if seen[e.Spec.Name] {
			return nil, fmt.Errorf("supervisor: two engines named %s", e.Spec.Name)
		}
		seen[e.Spec.Name] = true
		s.unsettled.Add(1)
		s.engines = append(s.engines, &supervised{Supervised: e, onSettle: s.unsettled.Done, status: Status{
			Name: e.Spec.Name, Runtime: e.Launcher.Name(), Engine: e.Spec.Engine, Model: e.Spec.Model,
			GPU: e.Spec.GPU, State: StateStarting, Since: time.Now(),
		}})
	}
	go func() {
		s.unsettled.Wait()
		close(s.settled)
	}()
	return s, nil
}

// Settled is closed once every engine has either become ready or failed:
// when the daemon has what it will serve with.
func (s *Supervisor) Settled() <-chan struct{} { return s.settled }

// Run supervises every engine until ctx ends, then stops them all and
// returns nil. Engines that fail do not end Run: the daemon serves with the
// others.
func (s *Supervisor) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, e := range s.engines {
		wg.Go(func() { s.supervise(ctx, e) })
	}
	wg.Wait()
	return nil
}

// Engines returns every engine's status, in the order they were given.
func (s *Supervisor) Engines() []Status {
	out := make([]Status, len(s.engines))
	for i, e := range s.engines {
		e.mu.Lock()
		out[i] = e.status
		e.mu.Unlock()
	}
	return out
}

// Logs returns an engine's last output lines, from its current or last
// run; false when no engine has that name.
func (s *Supervisor) Logs(name string) ([]string, bool) {
	for _, e := range s.engines {
		if e.Spec.Name == name {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.handle == nil {
				return nil, true
			}
			return e.handle.Logs(), true
		}
	}
	return nil, false
}

// Summary says in one line why no engine serves a model: each engine of it
// and its state ("gpu0 failed: exited at start-up 5 times: …").
func (s *Supervisor) Summary(model string) string {
	var parts []string
	for _, st := range s.Engines() {
		if model != "" && st.Model != model {
			continue
		}
		p := st.Name + " " + string(st.State)
		if st.LastError != "" && st.State != StateReady {
			p += ": " + st.LastError
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "no engine serves this model"
	}
	return strings.Join(parts, "; ")
}

func (e *supervised) set(state State, update func(*Status)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.status.State != state {
		e.status.State, e.status.Since = state, time.Now()
	}
	if state == StateReady || state == StateFailed || state == StateStopped {
		e.settle.Do(e.onSettle)
	}
	if update != nil {
		update(&e.status)
	}
}

// supervise runs one engine until ctx ends or it is given up on.
func (s *Supervisor) supervise(ctx context.Context, e *supervised) {
	log := s.log.With("engine", e.Spec.Name)
	wait := s.cfg.Backoff.Initial
	startFailures := 0
	for {
		e.set(StateStarting, nil)
		served, err := s.runOnce(ctx, e, log)
		if ctx.Err() != nil {
			e.set(StateStopped, nil)
			log.Info("engine stopped")
			return
		}
		if served >= s.cfg.Backoff.ResetAfter {
			wait = s.cfg.Backoff.Initial
		}
		if served > 0 {
			startFailures = 0
		} else {
			startFailures++
		}
		msg := err.Error()
		if startFailures >= s.cfg.Backoff.MaxStartFailures {
			msg = fmt.Sprintf("failed to start %d times in a row: %v", startFailures, err)
			e.set(StateFailed, func(st *Status) { st.LastError = msg })
			log.Error("engine failed; not restarting it", "error", msg, "log_tail", strings.Join(s.tail(e), "\n"))
			return
		}
		e.set(StateRestarting, func(st *Status) { st.LastError = msg })
		log.Warn("engine down; restarting", "error", msg, "in", wait, "log_tail", strings.Join(s.tail(e), "\n"))
		select {
		case <-ctx.Done():
			e.set(StateStopped, nil)
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, s.cfg.Backoff.Max)
		e.set(StateStarting, func(st *Status) { st.Restarts++ })
	}
}

func (s *Supervisor) tail(e *supervised) []string {
	lines, _ := s.Logs(e.Spec.Name)
	return Tail(lines, s.cfg.LogLines)
}

// runOnce launches the engine, puts it into service once ready and keeps it
// there until it dies or ctx ends. It returns how long the engine served (0:
// it never became ready) and why it ended.
func (s *Supervisor) runOnce(ctx context.Context, e *supervised, log *slog.Logger) (served time.Duration, err error) {
	h, err := e.Launcher.Launch(ctx, e.Spec)
	if err != nil {
		return 0, fmt.Errorf("launch: %w", err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() {
		exitErr = h.Wait()
		close(exited)
	}()
	ep := h.Endpoints()
	e.mu.Lock()
	e.handle = h
	e.mu.Unlock()
	e.set(StateLoading, func(st *Status) { st.Identity, st.BaseURL = h.Identity(), ep.BaseURL })
	log.Info("engine launched", "runtime", e.Launcher.Name(), "pid", h.Identity().PID,
		"container", h.Identity().Container, "base_url", ep.BaseURL)

	// stop ends the engine when Hearth gives up on it or stops itself; the
	// stop context outlives ctx, which may be what ended.
	stop := func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.StopTimeout)
		defer cancel()
		if err := h.Stop(stopCtx); err != nil {
			log.Warn("stopping engine", "error", err)
		}
		<-exited
	}
	exitError := func() error {
		if exitErr == nil {
			return errors.New("exited")
		}
		return fmt.Errorf("exited: %w", exitErr)
	}

	readyCtx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	err = h.Ready(readyCtx)
	cancel()
	if err != nil {
		if errors.Is(err, ErrExited) {
			<-exited
			return 0, exitError()
		}
		stop()
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, fmt.Errorf("not ready: %w", err)
	}
	profile := MeasureProfile(ctx, s.cfg.HTTPClient, ep.BaseURL, e.Spec.Engine, e.Spec.Estimate)
	attachCtx, cancelAttach := context.WithCancel(ctx)
	defer cancelAttach()
	detach, err := s.cfg.Attacher.Attach(attachCtx, ReadyEngine{Spec: e.Spec, Runtime: e.Launcher.Name(), Endpoints: ep, Profile: profile})
	if err != nil {
		stop()
		return 0, fmt.Errorf("attach: %w", err)
	}
	readyAt := time.Now()
	e.set(StateReady, func(st *Status) { st.Profile, st.LastError = profile, "" })
	log.Info("engine ready", "gpu_blocks", profile.GPUBlocks, "measured", profile.Measured)

	why := s.watch(ctx, e, ep, exited)
	cancelAttach()
	detach()
	served = max(time.Since(readyAt), time.Nanosecond)
	switch {
	case why == nil && s.cfg.KeepEngines:
		if d, ok := h.(Detacher); ok {
			d.Detach()
			log.Info("engine left running", "container", h.Identity().Container)
			return served, ctx.Err()
		}
		stop()
		return served, ctx.Err()
	case why == nil: // ctx ended: Hearth stops
		stop()
		return served, ctx.Err()
	case errors.Is(why, ErrExited):
		return served, exitError()
	default: // alive but not answering
		stop()
		return served, why
	}
}

// watch waits while a ready engine serves. It returns ErrExited when the
// engine exits, an error when it stops answering /health, nil when ctx ends.
func (s *Supervisor) watch(ctx context.Context, e *supervised, ep Endpoints, exited <-chan struct{}) error {
	tick := time.NewTicker(s.cfg.Liveness)
	defer tick.Stop()
	failures := 0
	for {
		select {
		case <-exited:
			return ErrExited
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := getJSON(ctx, s.cfg.HTTPClient, ep.BaseURL+"/health", nil); err != nil && ctx.Err() == nil {
				failures++
				if failures >= s.cfg.LivenessFailures {
					return fmt.Errorf("hangs: /health failed %d times in a row: %w", failures, err)
				}
				continue
			}
			failures = 0
		}
	}
}
