package main

import (
	"context"
	"crypto/subtle"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/console"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// The console reads the daemon only through the interfaces it declares;
// the adapters below turn the simulated cluster, the router and the
// gateway into them. Each returns fresh copies, as the console asks.

// engineSource reports every simulated GPU and its engine's cache.
type engineSource struct {
	cluster *simCluster
	model   string
}

var _ console.EngineSource = engineSource{}

func (s engineSource) Engines(context.Context) ([]console.Engine, error) {
	out := make([]console.Engine, 0, len(s.cluster.workers))
	for _, w := range s.cluster.workers {
		out = append(out, engineOf(w.name, s.model, w.gpu.Node, w.gpu.Name, w.gpu.MemoryTotal, w.gpu.MemoryUsed,
			w.gpu.UtilizationPct, w.gpu.TemperatureC, w.instance.Config(), w.instance.Stats()))
	}
	return out, nil
}

// engineOf fills a console engine from a GPU's facts and its simulated
// engine's counters. A simulated GPU reports no memory use; vLLM claims
// its GPUMemoryUtilization share of the memory when it starts, so that is
// what the card shows.
func engineOf(worker, model, node, gpuName string, memTotal, memUsed uint64, util, temp int, cfg sim.Config, st sim.Stats) console.Engine {
	if memUsed == 0 && memTotal > 0 {
		frac := cfg.GPUMemoryUtilization
		if frac <= 0 {
			frac = sim.DefaultGPUMemoryUtilization
		}
		memUsed = uint64(float64(memTotal) * frac)
	}
	return console.Engine{
		Worker: worker, Node: node, GPU: gpuName, Model: model,
		MemoryUsed: memUsed, MemoryTotal: memTotal, UtilizationPct: util, TemperatureC: temp,
		TotalBlocks: st.NumGPUBlocks, UsedBlocks: st.UsedBlocks, CachedFreeBlocks: st.CachedFreeBlocks,
		Running: st.Running, Waiting: st.Waiting,
		PrefixQueries: st.PrefixQueries, PrefixHits: st.PrefixHits, GenerationTokens: st.GenerationTokens,
	}
}

// routerSource reports the router's decisions and queue.
type routerSource struct{ rt *router.Router }

var _ console.RouterSource = routerSource{}

func (s routerSource) Decisions(_ context.Context, n int) ([]console.Decision, error) {
	ds := s.rt.Decisions(n)
	out := make([]console.Decision, len(ds))
	for i, d := range ds {
		out[i] = decisionOf(d)
	}
	return out, nil
}

func (s routerSource) QueueLen(context.Context) (int, error) { return s.rt.QueueLen(), nil }

func decisionOf(d router.Decision) console.Decision {
	cd := console.Decision{
		RequestID: d.RequestID, At: d.At, Policy: d.Policy, Worker: d.WorkerName, Reason: d.Reason,
		PromptBlocks: d.PromptBlocks, CachedBlocks: d.CachedBlocks, PredictedHitRate: d.PredictedHitRate,
		Queued: d.Queued, Candidates: make([]console.Candidate, len(d.Candidates)),
	}
	for i, c := range d.Candidates {
		cd.Candidates[i] = console.Candidate{
			Worker: c.Name, OverlapBlocks: c.OverlapBlocks, ActiveBlocks: c.ActiveBlocks,
			PendingPrefillTokens: c.PendingPrefillTokens, Cost: c.Cost,
		}
	}
	return cd
}

// trafficSource reports the gateway's requests and sessions. traffic is
// set once the gateway exists, before anything is served.
type trafficSource struct{ traffic *api.Traffic }

var _ console.TrafficSource = (*trafficSource)(nil)

func (s *trafficSource) RequestsSince(_ context.Context, since time.Time) ([]console.Request, error) {
	if s.traffic == nil {
		return nil, nil
	}
	rs := s.traffic.RequestsSince(since)
	out := make([]console.Request, len(rs))
	for i, r := range rs {
		out[i] = console.Request{
			ID: r.ID, At: r.At, Worker: r.Worker, PromptTokens: r.PromptTokens,
			CachedTokens: r.CachedTokens, OutputTokens: r.OutputTokens, TTFT: r.TTFT,
		}
	}
	return out, nil
}

func (s *trafficSource) Sessions(context.Context) ([]console.Session, error) {
	if s.traffic == nil {
		return nil, nil
	}
	ss := s.traffic.Sessions()
	out := make([]console.Session, len(ss))
	for i, r := range ss {
		turns := make([]console.Turn, len(r.Turns))
		for j, t := range r.Turns {
			turns[j] = console.Turn{
				At: t.At, PromptTokens: t.PromptTokens, CachedTokens: t.CachedTokens, OutputTokens: t.OutputTokens,
				Diverged: t.Diverged, DivergedBlock: t.DivergedBlock,
			}
		}
		out[i] = console.Session{ID: r.ID, Client: r.Client, Worker: r.Worker, LastActive: r.LastActive, Turns: turns}
	}
	return out, nil
}

// keyStore holds the keys created in the console (in memory: they last
// until Hearth stops) and also lets the console log in with a key given
// on the command line, which the gateway checks itself.
type keyStore struct {
	*console.MemoryStore
	static []string
}

var (
	_ console.KeyStore = (*keyStore)(nil)
	_ api.KeyChecker   = apiKeys{}
)

// staticKeyID marks a login with a command-line key; no stored key has it.
const staticKeyID = "cli"

// CreateKey copies name first: the console hands over strings that point
// into fasthttp's reused request buffers, and the store keeps it.
func (k *keyStore) CreateKey(ctx context.Context, name string) (console.APIKey, string, error) {
	return k.MemoryStore.CreateKey(ctx, strings.Clone(name))
}

func (k *keyStore) CheckKey(ctx context.Context, secret string) (console.APIKey, error) {
	for _, s := range k.static {
		if subtle.ConstantTimeCompare([]byte(secret), []byte(s)) == 1 {
			return console.APIKey{ID: staticKeyID, Name: "--api-key"}, nil
		}
	}
	return k.MemoryStore.CheckKey(ctx, secret)
}

// apiKeys lets the gateway check the keys created in the console.
type apiKeys struct{ store console.KeyStore }

func (a apiKeys) HasKeys(ctx context.Context) (bool, error) {
	keys, err := a.store.Keys(ctx)
	return len(keys) > 0, err
}

func (a apiKeys) CheckKey(ctx context.Context, secret string) error {
	_, err := a.store.CheckKey(ctx, secret)
	return err
}

// settingsStore keeps the console's settings in memory and applies the
// routing policy to requests that name none. Aliases are fixed at start
// (the gateway resolves them from its configuration), so changing them
// is refused rather than silently ignored.
type settingsStore struct {
	*console.MemoryStore
	aliases []console.Alias // as given at start

	mu     sync.RWMutex
	policy string
}

var _ console.SettingsStore = (*settingsStore)(nil)

func newSettingsStore(policy, model string, aliases map[string]string) *settingsStore {
	var as []console.Alias
	for _, from := range slices.Sorted(maps.Keys(aliases)) {
		as = append(as, console.Alias{From: from, To: aliases[from]})
	}
	return &settingsStore{
		MemoryStore: console.NewMemoryStore(console.Settings{
			Policy: policy, Policies: slices.Clone(router.Policies), Models: []string{model}, Aliases: as,
		}, nil),
		aliases: as,
		policy:  policy,
	}
}

func (s *settingsStore) SaveSettings(ctx context.Context, st console.Settings) error {
	// The strings may point into fasthttp's reused request buffers.
	st.Policy = strings.Clone(st.Policy)
	st.Aliases = slices.Clone(st.Aliases)
	for i := range st.Aliases {
		st.Aliases[i] = console.Alias{From: strings.Clone(st.Aliases[i].From), To: strings.Clone(st.Aliases[i].To)}
	}
	if !sameAliases(st.Aliases, s.aliases) {
		return fmt.Errorf("%w: model aliases are set with --alias when Hearth starts and cannot be changed while it runs", console.ErrInvalidSettings)
	}
	if err := s.MemoryStore.SaveSettings(ctx, st); err != nil {
		return err
	}
	s.mu.Lock()
	s.policy = st.Policy
	s.mu.Unlock()
	return nil
}

// sameAliases reports whether a and b hold the same aliases, in any order.
func sameAliases(a, b []console.Alias) bool {
	cmp := func(x, y console.Alias) int {
		if c := strings.Compare(x.From, y.From); c != 0 {
			return c
		}
		return strings.Compare(x.To, y.To)
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, cmp)
	slices.SortFunc(b, cmp)
	return slices.Equal(a, b)
}

// Policy is the routing policy for requests that do not name one.
func (s *settingsStore) Policy() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.policy
}
