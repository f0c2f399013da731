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

	"github.com/hearth-llm/hearth/catalog"
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
	Profile   catalog.Profile
	// Tokenizer is what the start-up self-check found (tokcheck.go).
	Tokenizer TokenizerCheck
	// KVEvents is what the start-up KV-event self-check found
	// (kvcheck.go); an engine that differs is routed on predicted caches.
	KVEvents KVEventsCheck
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
	// ReadyTimeout bounds a start, from launch to serving, when the
	// engine downloads nothing; default 5 minutes (a warm vLLM start takes
	// one to three). DownloadReadyTimeout bounds a start whose log shows a
	// weight download by the time ReadyTimeout passes; default 20 minutes,
	// or ReadyTimeout when that is longer.
	ReadyTimeout         time.Duration
	DownloadReadyTimeout time.Duration
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
	// Tokenizer returns Hearth's tokenizer of a spec's model, for the
	// self-check of every engine that becomes ready (CheckTokenizer); nil,
	// or a nil result, checks nothing.
	Tokenizer func(Spec) ChatTokenizer
	// KVEventTap subscribes to an engine's KV events for the KV-event
	// self-check (CheckKVEvents) of every engine that becomes ready and
	// publishes them; nil checks nothing. KVCheckWait bounds the check's
	// wait for the probe's events; default DefaultKVCheckWait.
	KVEventTap  KVEventTap
	KVCheckWait time.Duration
	// HTTPClient talks to engines; default NewProbeClient().
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
	def(&c.ReadyTimeout, 5*time.Minute)
	def(&c.DownloadReadyTimeout, max(20*time.Minute, c.ReadyTimeout))
	def(&c.StopTimeout, 30*time.Second)
	def(&c.Liveness, 5*time.Second)
	def(&c.KVCheckWait, DefaultKVCheckWait)
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
		c.HTTPClient = NewProbeClient()
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
	// Simulated says Hearth's simulator plays Engine (Spec.Simulated).
	Simulated bool
	Model     string
	GPU       GPU
	// TensorParallel are the engine's further GPUs (Spec.TensorParallel):
	// one engine over all of them.
	TensorParallel []GPU
	State          State
	Identity
	BaseURL  string
	Restarts int
	// LastError is why the engine last went down: the error, then the
	// diagnosis's sentence when Hearth recognised the cause ("exited: exit
	// status 1: CUDA ran out of memory …: lower --max-model-len …").
	LastError string
	// Diagnosis is the recognised cause of the last failure; its Cause is
	// empty when there is none, and it is cleared once the engine serves.
	Diagnosis Diagnosis
	// Load is where a loading engine's start is, read from its log;
	// Load.Phase is empty and Load.Progress -1 in the other states.
	Load    LoadState
	Since   time.Time       // when it entered State
	Profile catalog.Profile // as measured once ready
	// Tokenizer is the self-check of the engine's last ready run, and
	// KVEvents its KV-event self-check.
	Tokenizer TokenizerCheck
	KVEvents  KVEventsCheck
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
	handle   Handle // the current run's, or the last one's until a new launch
	run      int    // counts launches; a LogCursor names its run
	// relaunched is closed when the next run's handle arrives, for log
	// followers.
	relaunched chan struct{}
	// The start of the current run, as far as its log has been read:
	// incrementally from a LogFollower handle, from line loadSeq on.
	load    LoadTracker
	loadSeq uint64
	// heldFor is why the engine is held stopped ("" when it is not), and
	// holdChanged is closed and replaced whenever that changes. cancelRun
	// ends the current run, for Hold.
	heldFor     string
	holdChanged chan struct{}
	cancelRun   context.CancelFunc
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
		s.engines = append(s.engines, &supervised{Supervised: e, onSettle: s.unsettled.Done, relaunched: make(chan struct{}), holdChanged: make(chan struct{}), status: Status{
			Name: e.Spec.Name, Runtime: e.Launcher.Name(), Engine: e.Spec.Engine, Simulated: e.Spec.Simulated, Model: e.Spec.Model,
			GPU: e.Spec.GPU, TensorParallel: e.Spec.TensorParallel, State: StateStarting, Since: time.Now(), Load: LoadState{Progress: -1},
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

// Engines returns every engine's status, in the order they were given. A
// loading engine's Load is read from its log now: the console and the API
// ask about once a second, and a LogFollower handle hands over only the
// lines since the last read, so the work is proportional to what the
// engine printed and needs no goroutine of its own.
func (s *Supervisor) Engines() []Status {
	out := make([]Status, len(s.engines))
	for i, e := range s.engines {
		e.mu.Lock()
		out[i] = e.status
		if out[i].State == StateLoading {
			out[i].Load = e.loadLocked()
		}
		e.mu.Unlock()
	}
	return out
}

// Logs returns an engine's last output lines, from its current or last
// run; false when no engine has that name.
func (s *Supervisor) Logs(name string) ([]string, bool) {
	e := s.engine(name)
	if e == nil {
		return nil, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.handle == nil {
		return nil, true
	}
	return e.handle.Logs(), true
}

// Hold stops an engine, if it runs, and keeps it stopped until Release,
// with reason as its LastError: its GPU is lost, and restarting it would
// only fail. A held engine counts as settled. Holding a held engine updates
// the reason. It returns false when no engine has that name.
func (s *Supervisor) Hold(name, reason string) bool {
	e := s.engine(name)
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.heldFor = reason
	e.status.LastError = reason
	close(e.holdChanged)
	e.holdChanged = make(chan struct{})
	if e.cancelRun != nil {
		e.cancelRun()
	}
	return true
}

// Release lets a held engine start again, at once and with a fresh
// backoff. It returns false when no engine has that name.
func (s *Supervisor) Release(name string) bool {
	e := s.engine(name)
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.heldFor != "" {
		e.heldFor = ""
		close(e.holdChanged)
		e.holdChanged = make(chan struct{})
	}
	return true
}

// hold returns why the engine is held ("" when it is not) and a channel
// closed when that changes.
func (e *supervised) hold() (string, <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.heldFor, e.holdChanged
}

// runContext returns the context of one run, which Hold cancels; it is
// already cancelled when the engine is held.
func (e *supervised) runContext(ctx context.Context) (context.Context, context.CancelFunc) {
	runCtx, cancel := context.WithCancel(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cancelRun = cancel
	if e.heldFor != "" {
		cancel()
	}
	return runCtx, cancel
}

func (e *supervised) held() bool {
	reason, _ := e.hold()
	return reason != ""
}

// awaitRelease waits while the engine is held, stopped; false when ctx
// ends first.
func (e *supervised) awaitRelease(ctx context.Context, log *slog.Logger) bool {
	for {
		reason, changed := e.hold()
		if reason == "" {
			return true
		}
		e.set(StateStopped, func(st *Status) { st.LastError, st.Diagnosis = reason, Diagnosis{} })
		log.Warn("engine held stopped", "reason", reason)
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
	}
}

func (s *Supervisor) engine(name string) *supervised {
	for _, e := range s.engines {
		if e.Spec.Name == name {
			return e
		}
	}
	return nil
}

// launched makes h the engine's current run, loading. Log followers are
// woken once the status says so.
func (e *supervised) launched(h Handle) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.handle = h
	e.run++
	e.load, e.loadSeq = LoadTracker{}, 0
	e.setLocked(StateLoading, func(st *Status) { st.Identity, st.BaseURL = h.Identity(), h.Endpoints().BaseURL })
	close(e.relaunched)
	e.relaunched = make(chan struct{})
}

// loadLocked reads the current run's log on from where it was last read
// and says where the start is; e.mu is held.
func (e *supervised) loadLocked() LoadState {
	if e.handle == nil {
		return LoadState{Progress: -1}
	}
	f, ok := e.handle.(LogFollower)
	if !ok {
		return ParseLoad(e.handle.Logs())
	}
	lines, next, _ := f.LogsSince(e.loadSeq)
	for _, l := range lines {
		e.load.Line(l)
	}
	e.loadSeq = next
	return e.load.State()
}

func (e *supervised) loadState() LoadState {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.loadLocked()
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
	e.setLocked(state, update)
}

func (e *supervised) setLocked(state State, update func(*Status)) {
	if e.status.State != state {
		e.status.State, e.status.Since = state, time.Now()
	}
	e.status.Load = LoadState{Progress: -1} // Engines reads it while loading
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
		if !e.awaitRelease(ctx, log) {
			e.set(StateStopped, nil)
			return
		}
		e.set(StateStarting, nil)
		runCtx, cancelRun := e.runContext(ctx)
		served, err := s.runOnce(runCtx, e, log)
		cancelRun()
		if ctx.Err() != nil {
			e.set(StateStopped, nil)
			log.Info("engine stopped")
			return
		}
		if reason, _ := e.hold(); reason != "" {
			// Stopped for a hold, not dead: start afresh once released.
			wait, startFailures = s.cfg.Backoff.Initial, 0
			continue
		}
		if served >= s.cfg.Backoff.ResetAfter {
			wait = s.cfg.Backoff.Initial
		}
		if served > 0 {
			startFailures = 0
		} else {
			startFailures++
		}
		diag, msg := s.diagnose(e, err)
		if startFailures >= s.cfg.Backoff.MaxStartFailures {
			msg = fmt.Sprintf("failed to start %d times in a row: %s", startFailures, msg)
			e.set(StateFailed, func(st *Status) { st.LastError, st.Diagnosis = msg, diag })
			log.Error("engine failed; not restarting it", "error", msg, "cause", diag.Cause, "log_tail", strings.Join(s.tail(e), "\n"))
			return
		}
		e.set(StateRestarting, func(st *Status) { st.LastError, st.Diagnosis = msg, diag })
		log.Warn("engine down; restarting", "error", msg, "cause", diag.Cause, "in", wait, "log_tail", strings.Join(s.tail(e), "\n"))
		_, holdChanged := e.hold()
		select {
		case <-ctx.Done():
			e.set(StateStopped, nil)
			return
		case <-holdChanged:
			continue // held while waiting: awaitRelease takes over
		case <-time.After(wait):
		}
		wait = min(2*wait, s.cfg.Backoff.Max)
		e.set(StateStarting, func(st *Status) { st.Restarts++ })
	}
}

// diagnose says why a run ended: the diagnosis, when the error or the
// run's log shows a known cause, and the message for LastError, the error
// followed by the diagnosis's sentence. A launch that failed has no log of
// its own; the last run's would mislead.
func (s *Supervisor) diagnose(e *supervised, err error) (Diagnosis, string) {
	var lines []string
	if le := (*launchError)(nil); !errors.As(err, &le) {
		lines, _ = s.Logs(e.Spec.Name)
	}
	d, ok := Diagnose(lines, err)
	if !ok {
		return Diagnosis{}, err.Error()
	}
	return d, err.Error() + ": " + d.Message
}

// launchError is a Launch that failed: nothing ran.
type launchError struct{ err error }

func (e *launchError) Error() string { return "launch: " + e.err.Error() }
func (e *launchError) Unwrap() error { return e.err }

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
		return 0, &launchError{err}
	}
	exited := make(chan struct{})
	var exitErr error
	go func() {
		exitErr = h.Wait()
		close(exited)
	}()
	ep := h.Endpoints()
	e.launched(h)
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

	err = s.awaitReady(ctx, e, h)
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
	spec := ReleaseAtStart(ctx, s.cfg.HTTPClient, ep.BaseURL, e.Spec, log)
	check := s.checkTokenizer(ctx, e.Spec, ep.BaseURL, log)
	kvCheck := s.checkKVEvents(ctx, spec, ep, check, log)
	attachCtx, cancelAttach := context.WithCancel(ctx)
	defer cancelAttach()
	detach, err := s.cfg.Attacher.Attach(attachCtx, ReadyEngine{Spec: spec, Runtime: e.Launcher.Name(), Endpoints: ep, Profile: profile,
		Tokenizer: check, KVEvents: kvCheck})
	if err != nil {
		stop()
		return 0, fmt.Errorf("attach: %w", err)
	}
	readyAt := time.Now()
	e.set(StateReady, func(st *Status) {
		st.Profile, st.Tokenizer, st.KVEvents, st.LastError, st.Diagnosis = profile, check, kvCheck, "", Diagnosis{}
	})
	log.Info("engine ready", "gpu_blocks", profile.GPUBlocks, "measured", profile.Measured)

	why := s.watch(ctx, e, ep, exited)
	cancelAttach()
	detach()
	served = max(time.Since(readyAt), time.Nanosecond)
	switch {
	case why == nil && s.cfg.KeepEngines && !e.held():
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

// errNotReadyInTime is why a start that took longer than its bound is
// given up on (the cause of Ready's context).
var errNotReadyInTime = errors.New("did not become ready in time")

// awaitReady waits for the engine to serve. The bound is ReadyTimeout;
// when it passes and the log shows a weight download (under way, or done
// during this start), it is extended to DownloadReadyTimeout from launch:
// a first start fetches tens of gigabytes, a warm one only loads them. It
// returns Ready's error, or one saying how long it waited and where the
// start was.
func (s *Supervisor) awaitReady(ctx context.Context, e *supervised, h Handle) error {
	readyCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ready := make(chan error, 1)
	go func() { ready <- h.Ready(readyCtx) }()
	bound := s.cfg.ReadyTimeout
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for {
		select {
		case err := <-ready:
			return err
		case <-timer.C:
		}
		load := e.loadState()
		if bound < s.cfg.DownloadReadyTimeout && load.Downloaded {
			timer.Reset(s.cfg.DownloadReadyTimeout - bound)
			bound = s.cfg.DownloadReadyTimeout
			continue
		}
		cancel(errNotReadyInTime)
		if err := <-ready; errors.Is(err, ErrExited) {
			return err
		}
		where := ""
		if load.Phase != "" {
			where = " (" + load.Phase.Label() + ")"
		}
		return fmt.Errorf("still not serving %v after launch%s", bound, where)
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
			if err := getJSON(ctx, s.cfg.HTTPClient, ep.BaseURL+e.Spec.Engine.Descriptor().LivenessPath, nil); err != nil && ctx.Err() == nil {
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
