package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/console"
	"github.com/hearth-llm/hearth/installer/doctor"
	"github.com/hearth-llm/hearth/nodes"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// healthCacheTTL is how long the console's Health page shows one run of the
// checks: they take seconds, and a page reloaded in a loop must not run
// them in a loop.
const healthCacheTTL = 30 * time.Second

// healthSource is the console's Health page over the installer's checks,
// the same as hearth doctor's, cached for healthCacheTTL.
type healthSource struct {
	doctor *doctor.Doctor
	clock  clock.Clock // nil: real time

	// mu is held while the checks run, so that callers arriving meanwhile
	// wait for that run instead of starting their own.
	mu     sync.Mutex
	ranAt  time.Time
	checks []console.HealthCheck
}

var _ console.HealthSource = (*healthSource)(nil)

// Checks returns the last run's checks while younger than healthCacheTTL,
// else runs them again.
func (h *healthSource) Checks(ctx context.Context) ([]console.HealthCheck, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := clock.Or(h.clock).Now()
	if h.checks == nil || now.Sub(h.ranAt) >= healthCacheTTL {
		checks := h.doctor.Check(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err // a run cut short is not worth keeping
		}
		h.checks = make([]console.HealthCheck, len(checks))
		for i, c := range checks {
			h.checks[i] = console.HealthCheck{Name: c.Name, Status: string(c.Status), Evidence: c.Evidence, Fix: c.Fix}
		}
		h.ranAt = now
	}
	return append([]console.HealthCheck(nil), h.checks...), nil
}

// newHealthSource builds the daemon's health checks: hearth doctor's
// (NewDoctor), for the daemon's own configuration. The GPUs are the
// daemon's latest reading, the API port is the daemon's own (addr), and
// the memory its engines hold counts as available, so the page does not
// flag the daemon's own engines. The returned func closes the Docker
// client.
func newHealthSource(cfg Config, gpus nodes.Discoverer, engines func(context.Context) []hruntime.Identity, statuses func() []hruntime.Status, addr string) (*healthSource, func()) {
	// The engine whose image the CUDA check weighs; the simulated engine
	// in-process has none, and is weighed as vLLM, the default.
	var kind hruntime.Kind
	if k, err := hruntime.KindOf(cfg.Engine); err == nil {
		kind = k.Name
	}
	doc, closeDocker := NewDoctor(DoctorConfig{
		GPUs: gpus, Engines: engines, Model: cfg.Model, HFCache: cfg.HFCache, Engine: kind, Image: cfg.Image,
		DataDir: cfg.Data(), KVStoreDir: cfg.KVStoreDir, Addr: addr, Serving: true, SelfChecks: statusSelfChecks(statuses),
	})
	return &healthSource{doctor: doc}, closeDocker
}

// latestGPUs reads the sampler's latest reading: the daemon's pages never
// call into the driver themselves.
type latestGPUs struct{ sampler *nodes.Sampler }

func (l latestGPUs) Discover(context.Context) (nodes.Inventory, error) {
	inv, _, err := l.sampler.Latest()
	return inv, err
}

// engineIdentities names the processes of the supervisor's engines.
func engineIdentities(sup *hruntime.Supervisor) func(context.Context) []hruntime.Identity {
	return func(context.Context) []hruntime.Identity {
		var ids []hruntime.Identity
		for _, st := range sup.Engines() {
			if st.Identity.PID > 0 || st.Identity.Container != "" {
				ids = append(ids, st.Identity)
			}
		}
		return ids
	}
}

// statusSelfChecks are the engines' start-up self-checks of their
// tokenization and their KV events as the Health page's doctor weighs
// them.
type statusSelfChecks func() []hruntime.Status

func (f statusSelfChecks) EngineKVEvents(context.Context) ([]doctor.EngineKVEvents, error) {
	var out []doctor.EngineKVEvents
	for _, st := range f() {
		if st.KVEvents.State != hruntime.KVEventsNotChecked {
			out = append(out, doctor.EngineKVEvents{Engine: st.Name, State: string(st.KVEvents.State), Summary: st.KVEvents.String()})
		}
	}
	return out, nil
}

func (f statusSelfChecks) EngineTokenizers(context.Context) ([]doctor.EngineTokenizer, error) {
	var out []doctor.EngineTokenizer
	for _, st := range f() {
		if st.Tokenizer.State != hruntime.TokenizerNotChecked {
			out = append(out, doctor.EngineTokenizer{Engine: st.Name, State: string(st.Tokenizer.State), Summary: st.Tokenizer.String()})
		}
	}
	return out, nil
}
