package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hearth-llm/hearth/catalog"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// SleepOptions turns on the simulated engine's sleep endpoints, as vLLM's
// --enable-sleep-mode with VLLM_SERVER_DEV_MODE=1 does (POST /sleep,
// POST /wake_up, GET /is_sleeping, in vllm/entrypoints/serve/sleep/
// api_router.py) and SGLang's --enable-memory-saver (POST
// /release_memory_occupation and /resume_memory_occupation). Without them
// the paths are not served (404), as on an engine started without the
// flags.
type SleepOptions struct {
	// Times are the modelled durations of each transition
	// (catalog.SwapTimesOf); they pass in wall time divided by the
	// server's Speedup.
	Times catalog.SwapTimes
	// AwakeBytes is the GPU memory the engine holds while it serves (its
	// reservation: weights, KV pool, activations); ResidualBytes what it
	// keeps asleep.
	AwakeBytes, ResidualBytes uint64
	// WeightsBackup is SGLang's --enable-weights-cpu-backup: a release
	// keeps the weights in host RAM (a level-1 sleep); without it a
	// release drops them (level 2).
	WeightsBackup bool
	// Reset drops the engine's prefix cache, with vLLM's and SGLang's
	// AllBlocksCleared event; a sleep discards the KV cache. Optional.
	Reset func()
}

// sleeper is a server's sleep state: the level it sleeps at (0 awake) and
// the requests in flight, which a sleep in vLLM's "abort" mode ends.
type sleeper struct {
	opts SleepOptions

	mu       sync.Mutex
	level    int  // 0 awake, 1 or 2 asleep
	changing bool // a sleep or wake in progress
	inflight map[*inflightRequest]struct{}
}

type inflightRequest struct{ cancel context.CancelFunc }

// protectedPaths are the endpoints that need the weights: a sleeping
// engine refuses them with 503 and serves the rest (tokenize, models,
// health, metrics).
var protectedPaths = map[string]bool{"/v1/chat/completions": true, "/v1/completions": true, "/generate": true}

func newSleeper(opts SleepOptions) *sleeper {
	return &sleeper{opts: opts, inflight: map[*inflightRequest]struct{}{}}
}

// memoryBytes is the GPU memory the engine holds now.
func (sl *sleeper) memoryBytes() uint64 {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.level > 0 {
		return sl.opts.ResidualBytes
	}
	return sl.opts.AwakeBytes
}

// admit registers a request that needs the weights, or refuses it while
// the engine sleeps or changes state.
func (sl *sleeper) admit(ctx context.Context) (context.Context, func(), error) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.level > 0 || sl.changing {
		return nil, nil, &apiError{status: http.StatusServiceUnavailable, message: "the engine is sleeping; wake it up first"}
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &inflightRequest{cancel: cancel}
	sl.inflight[r] = struct{}{}
	return ctx, func() {
		cancel()
		sl.mu.Lock()
		delete(sl.inflight, r)
		sl.mu.Unlock()
	}, nil
}

// registerSleep adds the sleep endpoints of s's kind to mux and the
// engine's GPU memory gauge to its metrics.
func (s *Server) registerSleep(mux *http.ServeMux) {
	sl := s.sleep
	s.metrics.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hearth_sim_gpu_memory_used_bytes",
		Help: "GPU memory the simulated engine holds, as the driver would report it for its process.",
	}, func() float64 { return float64(sl.memoryBytes()) }))
	if s.opts.Kind == hruntime.KindSGLang {
		mux.HandleFunc("POST /release_memory_occupation", s.handleReleaseMemory)
		mux.HandleFunc("POST /resume_memory_occupation", s.handleResumeMemory)
		return
	}
	mux.HandleFunc("POST /sleep", s.handleSleep)
	mux.HandleFunc("POST /wake_up", s.handleWakeUp)
	mux.HandleFunc("GET /is_sleeping", s.handleIsSleeping)
}

// handleSleep is vLLM's POST /sleep?level=1|2&mode=abort|wait|keep: abort
// (vLLM's default) ends the requests in flight, wait lets them finish
// first; keep (pausing them across the sleep) is not modelled and refused.
func (s *Server) handleSleep(w http.ResponseWriter, r *http.Request) {
	level, err := strconv.Atoi(r.URL.Query().Get("level"))
	if r.URL.Query().Get("level") == "" {
		level, err = 1, nil
	}
	if err != nil || level < 1 || level > 2 {
		s.writeError(w, badRequest("level must be 1 or 2"))
		return
	}
	mode := r.URL.Query().Get("mode")
	switch mode {
	case "":
		mode = "abort"
	case "abort", "wait":
	default:
		s.writeError(w, badRequest("mode %q: the simulated engine sleeps in mode abort or wait", mode))
		return
	}
	start := s.opts.Clock.Now()
	if err := s.goToSleep(r.Context(), level, mode == "abort"); err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "sleeping", "level": level, "elapsed_ms": msSince(s, start)})
}

func (s *Server) handleWakeUp(w http.ResponseWriter, r *http.Request) {
	start := s.opts.Clock.Now()
	if err := s.wakeUp(r.Context()); err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "awake", "tags_woken": nil, "elapsed_ms": msSince(s, start)})
}

func (s *Server) handleIsSleeping(w http.ResponseWriter, _ *http.Request) {
	s.sleep.mu.Lock()
	asleep := s.sleep.level > 0
	s.sleep.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"is_sleeping": asleep})
}

// memoryTags is the body of SGLang's release and resume requests.
type memoryTags struct {
	Tags []string `json:"tags"`
}

// handleReleaseMemory is SGLang's POST /release_memory_occupation, which
// asserts that the server is idle (its scheduler's is_fully_idle): a busy
// engine refuses.
func (s *Server) handleReleaseMemory(w http.ResponseWriter, r *http.Request) {
	if _, err := readTags(r); err != nil {
		s.writeError(w, err)
		return
	}
	if st := s.opts.Engine.Stats(); st.Running > 0 || st.Waiting > 0 {
		s.writeError(w, &apiError{status: http.StatusBadRequest, message: "release_memory_occupation should be called only when server is idle."})
		return
	}
	level := 2
	if s.sleep.opts.WeightsBackup {
		level = 1
	}
	if err := s.goToSleep(r.Context(), level, false); err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": ""})
}

func (s *Server) handleResumeMemory(w http.ResponseWriter, r *http.Request) {
	if _, err := readTags(r); err != nil {
		s.writeError(w, err)
		return
	}
	if err := s.wakeUp(r.Context()); err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": ""})
}

func readTags(r *http.Request) (memoryTags, error) {
	var t memoryTags
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		return t, badRequest("reading the body: %v", err)
	}
	if len(body) == 0 {
		return t, nil
	}
	if err := json.Unmarshal(body, &t); err != nil {
		return t, badRequest("body: %v", err)
	}
	for _, tag := range t.Tags {
		switch tag {
		case "weights", "kv_cache", "cuda_graph":
		default:
			return t, badRequest("unknown memory tag %q", tag)
		}
	}
	return t, nil
}

// goToSleep ends (abort) or waits out the requests in flight, drops the
// KV cache and frees the GPU memory after the level's modelled time.
func (s *Server) goToSleep(ctx context.Context, level int, abort bool) error {
	sl := s.sleep
	sl.mu.Lock()
	switch {
	case sl.changing:
		sl.mu.Unlock()
		return &apiError{status: http.StatusConflict, message: "a sleep or wake is in progress"}
	case sl.level > 0:
		sl.mu.Unlock()
		return nil // vLLM: sleeping again is a no-op
	}
	sl.changing = true
	if abort {
		for r := range sl.inflight {
			r.cancel()
		}
	}
	sl.mu.Unlock()
	ok := false
	defer func() {
		sl.mu.Lock()
		sl.changing = false
		if ok {
			sl.level = level
		}
		sl.mu.Unlock()
	}()
	if err := s.waitIdle(ctx); err != nil {
		return err
	}
	d := sl.opts.Times.SleepLevel2
	if level == 1 {
		d = sl.opts.Times.SleepLevel1
	}
	if err := s.pass(ctx, d); err != nil {
		return err
	}
	if sl.opts.Reset != nil {
		sl.opts.Reset()
	}
	ok = true
	s.log.Info("sleeping", "level", level)
	return nil
}

// wakeUp brings the weights back (level 1 from host RAM, level 2 from
// the checkpoint) and re-allocates the KV pool, empty.
func (s *Server) wakeUp(ctx context.Context) error {
	sl := s.sleep
	sl.mu.Lock()
	level := sl.level
	switch {
	case sl.changing:
		sl.mu.Unlock()
		return &apiError{status: http.StatusConflict, message: "a sleep or wake is in progress"}
	case level == 0:
		sl.mu.Unlock()
		return nil
	}
	sl.changing = true
	sl.mu.Unlock()
	d := sl.opts.Times.WakeLevel2
	if level == 1 {
		d = sl.opts.Times.WakeLevel1
	}
	err := s.pass(ctx, d)
	sl.mu.Lock()
	sl.changing = false
	if err == nil {
		sl.level = 0
	}
	sl.mu.Unlock()
	if err == nil {
		s.log.Info("awake", "from_level", level)
	}
	return err
}

// waitIdle waits until the engine runs and queues nothing.
func (s *Server) waitIdle(ctx context.Context) error {
	for {
		if st := s.opts.Engine.Stats(); st.Running == 0 && st.Waiting == 0 && s.sleep.idle() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.opts.Clock.After(5 * time.Millisecond):
		}
	}
}

func (sl *sleeper) idle() bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return len(sl.inflight) == 0
}

// pass waits the modelled duration d in wall time (d divided by the
// speedup).
func (s *Server) pass(ctx context.Context, d time.Duration) error {
	wall := time.Duration(float64(d) / s.opts.Speedup)
	if wall <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("interrupted: %w", ctx.Err())
	case <-s.opts.Clock.After(wall):
		return nil
	}
}

func msSince(s *Server, start time.Time) float64 {
	return float64(s.opts.Clock.Now().Sub(start).Microseconds()) / 1000 * s.opts.Speedup
}
