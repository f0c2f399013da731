package models

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// State is where a configured model is.
type State string

const (
	OnDisk   State = "on disk"
	Loading  State = "loading"
	Resident State = "resident"
	Sleeping State = "sleeping"
	// Unloading is a model being put to sleep or stopped.
	Unloading State = "unloading"
)

// DefaultKeepAlive is how long a model stays resident after its last
// request: long enough for an agent's tool call (a build, a test run) and
// the user reading the answer, so that the loop does not pay a swap.
const DefaultKeepAlive = 30 * time.Minute

// The bounds of a tool pause's grace: how long after a session's turn
// ended in a tool call its model is kept from a request for another model.
// The grace is the running p90 of the tool pauses the Manager has seen on
// the model (the time from a ToolPause to the model's next request),
// within [MinToolPauseGrace, MaxToolPauseGrace] and never past the model's
// keep-alive; DefaultToolPauseGrace until toolPauseSamples pauses are seen.
// A pause longer than the grace is a user reading or a session that ended:
// waiting for it would hold the GPU from the other model's turns for
// nothing.
const (
	MinToolPauseGrace     = 5 * time.Second
	MaxToolPauseGrace     = 2 * time.Minute
	DefaultToolPauseGrace = 30 * time.Second
	// toolPauseSamples is how many pauses the grace needs before it is
	// learned, and how many of the latest it is learned from (twice that).
	toolPauseSamples = 8
)

// Model is one configured model.
type Model struct {
	Name string
	// Bytes is the GPU memory the model holds while resident.
	Bytes uint64
	// Wake and Cold are how long bringing it back takes from sleep and
	// from disk (catalog.SwapTimesOf); CanSleep says its engine sleeps.
	Wake, Cold time.Duration
	CanSleep   bool
	// Pinned models are never evicted; Preload ones load at start.
	Pinned, Preload bool
	// KeepAlive is how long it stays resident idle; 0: DefaultKeepAlive.
	KeepAlive time.Duration
}

// Mover moves engines: the Manager's caller implements it.
type Mover interface {
	// Load starts the model's engine, or wakes it when it sleeps.
	Load(ctx context.Context, name string, asleep bool) error
	// Sleep puts the engine to sleep; Stop stops it.
	Sleep(ctx context.Context, name string) error
	Stop(ctx context.Context, name string) error
}

// ErrTooBig is Acquire's error for a model larger than the capacity.
var ErrTooBig = errors.New("models: the model does not fit the GPUs even alone")

// ErrBusy is Acquire's error when every resident model that would have to
// go is protected (pinned, busy or in a tool pause) past the wait.
var ErrBusy = errors.New("models: no resident model can make room now")

type entry struct {
	Model
	state    State
	inFlight int
	lastUsed time.Time
	// toolPauses are its sessions in a tool pause: when each entered it,
	// by session id ("" for requests that name no session).
	toolPauses map[string]time.Time
	// pauses are the latest tool pauses seen on it, oldest first, at most
	// 2*toolPauseSamples: what its grace is learned from.
	pauses  []time.Duration
	loaded  chan struct{}
	loadErr error
	// loadingSince and loadingExpected time the swap that is bringing it
	// in, while it is Loading: what /v1/models reports as progress.
	loadingSince    time.Time
	loadingExpected time.Duration
}

// Options configure a Manager.
type Options struct {
	// Capacity is the GPU memory the models share.
	Capacity uint64
	Models   []Model
	Mover    Mover
	Clock    clock.Clock
	// Log receives what goes wrong off a request's path (a preload that
	// failed); nil discards it.
	Log *slog.Logger
	// PriorityWait is what one level of Request.Priority is worth in
	// waiting time when models compete for the GPUs, as the router's
	// queue weighs it (router.Config.PriorityWait); 0 or less: a higher
	// priority always goes first.
	PriorityWait time.Duration
}

// Manager keeps at most what fits resident.
type Manager struct {
	capacity uint64
	mover    Mover
	clock    clock.Clock
	log      *slog.Logger

	// preloaded is closed once Run has loaded (or failed to load) the
	// pinned and preloaded models.
	preloaded chan struct{}

	priorityWait time.Duration

	mu      sync.Mutex
	models  map[string]*entry
	changed chan struct{} // closed and replaced on every release
	// transitions are the latest loads, wakes, sleeps and stops, oldest
	// first, at most MaxTransitions (transitions.go).
	transitions []Transition
	// waiting are the requests enqueued and not yet admitted (queue.go).
	waiting []*waiter
	seq     uint64
	// waitingForRoom, when set (tests), is called each time an Acquire
	// starts waiting, for protected models to let go or for its turn.
	waitingForRoom func()
}

// New checks opts.
func New(opts Options) (*Manager, error) {
	if opts.Mover == nil {
		return nil, errors.New("models: no mover")
	}
	m := &Manager{capacity: opts.Capacity, mover: opts.Mover, clock: clock.Or(opts.Clock), log: opts.Log,
		priorityWait: opts.PriorityWait,
		models:       map[string]*entry{}, changed: make(chan struct{}), preloaded: make(chan struct{})}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	for _, mod := range opts.Models {
		if _, dup := m.models[mod.Name]; dup {
			return nil, fmt.Errorf("models: %q configured twice", mod.Name)
		}
		if mod.KeepAlive <= 0 {
			mod.KeepAlive = DefaultKeepAlive
		}
		m.models[mod.Name] = &entry{Model: mod, state: OnDisk}
	}
	return m, nil
}

// Status is one model's state, for /v1/models and the console.
type Status struct {
	Name     string
	State    State
	InFlight int
	Pinned   bool
	// While Loading: how long its swap has run, and how long it is
	// expected to take (Manager.expectedSwapLocked).
	LoadElapsed, LoadExpected time.Duration
}

// Statuses lists every configured model, by name.
func (m *Manager) Statuses() []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Status
	for _, e := range m.models {
		st := Status{Name: e.Name, State: e.state, InFlight: e.inFlight, Pinned: e.Pinned}
		if e.state == Loading {
			st.LoadElapsed, st.LoadExpected = m.clock.Now().Sub(e.loadingSince), e.loadingExpected
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Status) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// Acquire makes model name resident and counts one request on it, as
// AcquireRequest does for a request of no session at the turns' priority.
func (m *Manager) Acquire(ctx context.Context, name string) (release func(), err error) {
	return m.AcquireRequest(ctx, Request{Model: name})
}

// AcquireRequest makes req's model resident and counts req on it; the
// caller calls the returned release when the request ends. It waits,
// until ctx ends, while the models that would have to go are busy and
// while requests that came first (queue.go) are served.
func (m *Manager) AcquireRequest(ctx context.Context, req Request) (release func(), err error) {
	t, err := m.Enqueue(req)
	if err != nil {
		return nil, err
	}
	defer t.Cancel()
	return t.Acquire(ctx)
}

// Acquire waits for the ticket's turn and its model, as
// Manager.AcquireRequest does; when ctx ends first the ticket keeps its
// place, for a later Acquire or Cancel.
func (t *Ticket) Acquire(ctx context.Context) (release func(), err error) {
	m, w := t.m, t.w
	for {
		m.mu.Lock()
		if w.admitted {
			m.mu.Unlock()
			return nil, errors.New("models: a ticket used after its Acquire or Cancel")
		}
		e := w.e
		switch e.state {
		case Resident:
			if m.mayAdmitLocked(w, m.clock.Now()) {
				e.inFlight++
				e.lastUsed = m.clock.Now()
				m.admitLocked(w)
				m.mu.Unlock()
				return m.releaser(e), nil
			}
			if err := m.waitLocked(ctx); err != nil {
				return nil, err
			}
			continue
		case Loading:
			loaded := e.loaded
			m.mu.Unlock()
			select {
			case <-loaded:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		case Unloading:
			changed := m.changed
			m.mu.Unlock()
			select {
			case <-changed:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		}
		victims, ok := m.victimsLocked(e.Bytes, w)
		if ok && len(victims) > 0 && !m.firstInLineLocked(w) {
			ok = false // another model's requests came first: theirs comes in before
		}
		if !ok {
			if err := m.waitLocked(ctx); err != nil {
				return nil, err
			}
			continue
		}
		asleep := e.state == Sleeping
		e.state, e.loaded, e.loadErr = Loading, make(chan struct{}), nil
		e.loadingSince, e.loadingExpected = m.clock.Now(), m.expectedSwapLocked(e, asleep, victims)
		for _, v := range victims {
			v.state = Unloading // counts as held until it is gone
		}
		m.mu.Unlock()
		// The swap goes on when the request that started it gives up:
		// an engine left half asleep or half loaded would serve no one,
		// and the next request for the model finds it loaded.
		swapped := make(chan error, 1)
		go func() {
			err := m.swap(context.WithoutCancel(ctx), e, asleep, victims)
			m.mu.Lock()
			close(e.loaded)
			if err != nil {
				e.state, e.loadErr = OnDisk, err
				m.notifyLocked()
			}
			m.mu.Unlock()
			swapped <- err
		}()
		select {
		case err := <-swapped:
			if err != nil {
				return nil, err
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %s is still loading: %w", ErrBusy, e.Name, ctx.Err())
		}
	}
}

// swap evicts the victims (sleep where they can, stop otherwise) and
// loads e.
func (m *Manager) swap(ctx context.Context, e *entry, asleep bool, victims []*entry) error {
	for _, v := range victims {
		next, err := m.putAway(ctx, v)
		m.setState(v, next)
		if err != nil {
			return fmt.Errorf("models: evicting %s: %w", v.Name, err)
		}
	}
	if err := m.bringIn(ctx, e, asleep); err != nil {
		return fmt.Errorf("models: loading %s: %w", e.Name, err)
	}
	m.setState(e, Resident)
	return nil
}

func (m *Manager) setState(e *entry, s State) {
	m.mu.Lock()
	e.state = s
	m.notifyLocked()
	m.mu.Unlock()
}

// notifyLocked wakes the Acquires waiting for room.
func (m *Manager) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *Manager) releaser(e *entry) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			e.inFlight--
			e.lastUsed = m.clock.Now()
			m.notifyLocked()
			m.mu.Unlock()
		})
	}
}

// protectedLocked says whether e may not be evicted now.
func (m *Manager) protectedLocked(e *entry, now time.Time) bool {
	return e.Pinned || e.inFlight > 0 || e.inToolPause(now)
}

// reload is what bringing e back costs: a wake where its engine sleeps,
// else a cold start.
func (e *entry) reload() time.Duration {
	if e.CanSleep {
		return e.Wake
	}
	return e.Cold
}

// toolPauseGrace is how long a tool pause protects e: the p90 of its
// latest pauses within the bounds, never past its keep-alive.
func (e *entry) toolPauseGrace() time.Duration {
	grace := DefaultToolPauseGrace
	if len(e.pauses) >= toolPauseSamples {
		sorted := slices.Clone(e.pauses)
		slices.Sort(sorted)
		grace = min(max(sorted[(len(sorted)*9+9)/10-1], MinToolPauseGrace), MaxToolPauseGrace)
	}
	return min(grace, e.KeepAlive)
}

// victimsLocked picks the resident models to evict so that need bytes
// fit, or false when the unprotected ones are not enough. Cheapest first:
// the model idle longest, its idle time divided by what reloading it
// costs, so that of two idle as long the one quicker to bring back goes.
func (m *Manager) victimsLocked(need uint64, w *waiter) ([]*entry, bool) {
	now := m.clock.Now()
	var held uint64
	var candidates []*entry
	for _, e := range m.models {
		if e.state == Resident || e.state == Loading || e.state == Unloading {
			held += e.Bytes
			if e.state == Resident && !m.protectedFromLocked(e, now, w) {
				candidates = append(candidates, e)
			}
		}
	}
	if held+need <= m.capacity {
		return nil, true
	}
	score := func(e *entry) float64 {
		return now.Sub(e.lastUsed).Seconds() / max(e.reload().Seconds(), 0.001)
	}
	slices.SortFunc(candidates, func(a, b *entry) int {
		sa, sb := score(a), score(b)
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	var victims []*entry
	for _, v := range candidates {
		if held+need <= m.capacity {
			break
		}
		victims = append(victims, v)
		held -= v.Bytes
	}
	if held+need > m.capacity {
		return victims, false
	}
	// A victim taken early may not be needed once a larger one went too:
	// keep, the most worth keeping first, each that still leaves room.
	var kept []*entry
	for i := len(victims) - 1; i >= 0; i-- {
		if v := victims[i]; held+v.Bytes+need <= m.capacity {
			held += v.Bytes
		} else {
			kept = append(kept, v)
		}
	}
	slices.Reverse(kept)
	return kept, true
}

// Run loads the preloaded models (one that fails stays on disk, logged),
// then, every tick, sleeps (or stops)
// resident models idle past their keep-alive that are not pinned, until
// ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	err := m.preload(ctx)
	close(m.preloaded)
	if err != nil {
		return nil // ctx ended
	}
	tick, stop := m.clock.NewTicker(10 * time.Second)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			m.expire(ctx)
		}
	}
}

// Preloaded is closed once Run has brought in the pinned and preloaded
// models, or failed to.
func (m *Manager) Preloaded() <-chan struct{} { return m.preloaded }

// preload loads the pinned and preloaded models; it fails only when ctx
// ends.
func (m *Manager) preload(ctx context.Context) error {
	for _, name := range m.preloads() {
		release, err := m.Acquire(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// The model stays on disk and loads on its next request, which
			// gets the error again if it persists; the others still serve.
			m.log.Warn("preloading a model failed", "model", name, "error", err)
			continue
		}
		release()
	}
	return nil
}

func (m *Manager) preloads() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for _, e := range m.models {
		if e.Preload || e.Pinned {
			names = append(names, e.Name)
		}
	}
	slices.Sort(names)
	return names
}

// expire evicts the models idle past their keep-alive.
func (m *Manager) expire(ctx context.Context) {
	m.mu.Lock()
	now := m.clock.Now()
	var idle []*entry
	for _, e := range m.models {
		if e.state == Resident && !m.protectedLocked(e, now) && now.Sub(e.lastUsed) >= e.KeepAlive {
			e.state = Unloading
			idle = append(idle, e)
		}
	}
	m.mu.Unlock()
	for _, e := range idle {
		next, _ := m.putAway(ctx, e)
		m.setState(e, next)
	}
}

// Load makes model name resident, as a request would, without holding it.
func (m *Manager) Load(ctx context.Context, name string) error {
	release, err := m.Acquire(ctx, name)
	if err != nil {
		return err
	}
	release()
	return nil
}

// Unload puts a resident model away now (to sleep where its engine can),
// keep-alive or tool pause notwithstanding; a model with requests in
// flight, or a pinned one, is refused with ErrBusy. A model that is not
// resident is left as it is.
func (m *Manager) Unload(ctx context.Context, name string) error {
	m.mu.Lock()
	e, ok := m.models[name]
	switch {
	case !ok:
		m.mu.Unlock()
		return fmt.Errorf("models: %q is not configured", name)
	case e.state != Resident:
		m.mu.Unlock()
		return nil
	case e.Pinned || e.inFlight > 0:
		m.mu.Unlock()
		return fmt.Errorf("%w: %s is pinned or serving requests", ErrBusy, name)
	}
	e.state = Unloading
	m.mu.Unlock()
	next, err := m.putAway(ctx, e)
	m.setState(e, next)
	if err != nil {
		return fmt.Errorf("models: unloading %s: %w", name, err)
	}
	return nil
}

// Pin pins model name (never evicted) or unpins it.
func (m *Manager) Pin(name string, pinned bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.models[name]
	if !ok {
		return fmt.Errorf("models: %q is not configured", name)
	}
	e.Pinned = pinned
	m.notifyLocked() // an unpinned model may make room for a waiting one
	return nil
}
