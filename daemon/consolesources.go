package daemon

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/api/store"
	"github.com/hearth-llm/hearth/apikey"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/console"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// The console reads the daemon only through the interfaces it declares;
// the adapters below turn the supervised engines, the router and the
// gateway into them. Each returns fresh copies, as the console asks.

// engineSource reports every engine the supervisor runs: its GPU, its
// state, and its cache and load as its own /metrics tell (the same path for
// a simulated engine and a real one), with the cached blocks the router
// knows of from its KV events.
type engineSource struct {
	engines func() []hruntime.Status
	logs    func(name string) ([]string, bool)
	rt      *router.Router
	gpus    *nodes.Sampler
	// planNotes says, by engine name, why an engine got a smaller plan.
	planNotes map[string]string
	client    *http.Client
}

var _ console.EngineSource = engineSource{}

func (s engineSource) Engines(ctx context.Context) ([]console.Engine, error) {
	cached := map[string]router.WorkerLoad{}
	for _, w := range s.rt.Workers() {
		cached[w.Info.Name] = w
	}
	statuses := s.engines()
	reading, _, _ := s.gpus.Latest() // one copy of the reading for every card
	out := make([]console.Engine, len(statuses))
	for i, st := range statuses {
		var stats hruntime.Stats
		var err error
		if st.State == hruntime.StateReady {
			stats, err = hruntime.ScrapeStats(ctx, s.client, st.BaseURL)
		}
		out[i] = engineOf(st, gpuIn(reading, st.GPU), stats, err, cached[st.Name])
		out[i].PlanNote = s.planNotes[st.Name]
		if st.State != hruntime.StateReady && s.logs != nil {
			lines, _ := s.logs(st.Name)
			out[i].LogTail = hruntime.Tail(lines, 10)
		}
	}
	return out, nil
}

// engineOf fills a console engine from its status, its GPU's facts and
// what its metrics said. A real GPU's memory is the driver's reading. A
// simulated GPU has no driver to ask: the card shows what vLLM reserves
// when it starts, its memory-utilisation share of the GPU (what nvidia-smi
// would show for a real engine), marked as a reservation, and what of it
// holds data. Blocks cached but not in use are the router's count less
// those running requests hold. The host-RAM tier holds what the engine
// says, else what the router indexed from its events.
func engineOf(st hruntime.Status, gpu nodes.GPU, stats hruntime.Stats, scrapeErr error, routed router.WorkerLoad) console.Engine {
	cachedBlocks := routed.CachedBlocks
	memUsed := gpu.MemoryUsed
	var reserved bool
	if !gpu.MemoryUsageKnown && gpu.MemoryTotal > 0 && st.State == hruntime.StateReady {
		memUsed = uint64(float64(gpu.MemoryTotal) * catalog.DefaultMemoryFraction)
		reserved = true
	}
	total := st.Profile.GPUBlocks
	used := min(int(stats.KVUsage*float64(total)+0.5), total)
	e := console.Engine{
		Worker: st.Name, Node: gpu.Node, GPU: gpu.Name, Model: st.Model, Image: st.Image, State: string(st.State),
		MemoryUsed: memUsed, MemoryTotal: gpu.MemoryTotal, UtilizationPct: gpu.UtilizationPct, TemperatureC: gpu.TemperatureC,
		PowerDrawW: gpu.PowerDrawW, PowerLimitW: gpu.PowerLimitW, GPULost: gpu.Lost, GPUErr: gpu.Err,
		TotalBlocks: total, UsedBlocks: used, CachedFreeBlocks: max(min(cachedBlocks, total)-used, 0),
		Running: stats.Running, Waiting: stats.Waiting,
		PrefixQueries: stats.PrefixQueries, PrefixHits: stats.PrefixHits, GenerationTokens: stats.GenerationTokens,
		PrefillTokensPerSec: st.Profile.PrefillTokensPerSec,
		RAMTotalBlocks:      st.Profile.CPUBlocks, RAMUsedBlocks: routed.RAMBlocks,
		RAMHitTokens: stats.RAMHitTokens, DiskHitTokens: stats.StoreHitTokens,
		LoadedBytes: stats.LoadedBlocks * int64(st.Profile.BlockBytes), StoredBytes: stats.StoredBlocks * int64(st.Profile.BlockBytes),
	}
	if stats.RAMBlocks >= 0 && st.Profile.CPUBlocks > 0 {
		e.RAMUsedBlocks = min(stats.RAMBlocks, st.Profile.CPUBlocks)
	}
	if reserved {
		e.MemoryReserved = true
		if scrapeErr == nil {
			e.MemoryInUse = memoryInUse(st, used)
		}
	}
	if gpu.ProcessesKnown {
		var others []nodes.Process
		e.MemoryHearth, e.MemoryOther, others = memoryByOwner(gpu, st.Identity, "/proc")
		e.MemoryByOwnerKnown = true
		for _, p := range others {
			e.OtherProcesses = append(e.OtherProcesses, console.GPUProcess{Name: p.Name, PID: p.PID, UsedBytes: p.UsedBytes})
		}
	}
	if st.Load.Phase != "" {
		e.LoadPhase, e.LoadProgress = st.Load.Phase.Label(), st.Load.Progress
	}
	switch {
	case st.State != hruntime.StateReady && st.LastError != "":
		// The card shows the diagnosis on its own line: the error without
		// it is enough below (LastError ends with the diagnosis's sentence).
		e.Err = string(st.State) + ": " + st.LastError
		if msg := st.Diagnosis.Message; msg != "" {
			e.Diagnosis = msg
			e.Err = strings.TrimSuffix(e.Err, ": "+msg)
		}
	case scrapeErr != nil:
		e.Err = scrapeErr.Error()
	}
	return e
}

// memoryInUse is what of an engine's reservation holds data: the weights
// of its model, as the catalog sizes them, and the KV blocks running
// requests hold. 0 when the catalog does not know the model or the engine
// did not say its block size. The simulated engine runs one GPU per engine.
func memoryInUse(st hruntime.Status, usedBlocks int) uint64 {
	m, ok := catalog.LookupModel(st.Model)
	if !ok || st.Profile.BlockBytes <= 0 {
		return 0
	}
	weights := catalog.MemoryOf(m, 1, catalog.DefaultMaxBatchedTokens).WeightBytes
	return uint64(weights) + uint64(usedBlocks)*uint64(st.Profile.BlockBytes)
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
		RequestID: d.RequestID, At: d.At, Policy: d.Policy, Worker: d.Worker, Reason: d.Reason,
		PromptBlocks: d.PromptBlocks, CachedBlocks: d.CachedBlocks, PredictedHitRate: d.PredictedHitRate,
		Queued: d.Queued, Candidates: make([]console.Candidate, len(d.Candidates)),
	}
	for i, c := range d.Candidates {
		cd.Candidates[i] = console.Candidate{
			Worker: c.Worker, CachedBlocks: c.CachedBlocks, ActiveBlocks: c.ActiveBlocks,
			PendingPrefillTokens: c.PendingPrefillTokens, Cost: c.Cost,
		}
	}
	return cd
}

// trafficSource reports the gateway's requests and sessions.
type trafficSource struct {
	traffic *api.Traffic
	decode  func([]uint32) string // token ids to text, for what a prompt changed
}

var _ console.TrafficSource = (*trafficSource)(nil)

func (s *trafficSource) RequestsSince(_ context.Context, since time.Time) ([]console.Request, error) {
	rs := s.traffic.RequestsSince(since)
	out := make([]console.Request, len(rs))
	for i, r := range rs {
		out[i] = console.Request{
			ID: r.ID, At: r.At, SessionID: r.SessionID, Client: r.Client, Worker: r.Worker, PromptTokens: r.PromptTokens,
			CachedTokens: r.CachedTokens, OutputTokens: r.OutputTokens, TTFT: r.TTFT,
		}
	}
	return out, nil
}

func (s *trafficSource) Sessions(context.Context) ([]console.Session, error) {
	ss := s.traffic.Sessions()
	out := make([]console.Session, len(ss))
	for i, r := range ss {
		turns := make([]console.Turn, len(r.Turns))
		for j, t := range r.Turns {
			turns[j] = console.Turn{
				At: t.At, Kind: string(t.Kind), Worker: t.Worker,
				PromptTokens: t.PromptTokens, CachedTokens: t.CachedTokens, OutputTokens: t.OutputTokens,
				Diverged: t.Diverged, DivergedBlock: t.DivergedBlock, Cause: t.Cause,
			}
			if s.decode != nil && (t.ChangedFrom != nil || t.ChangedTo != nil) {
				turns[j].ChangedFrom, turns[j].ChangedTo = s.decode(t.ChangedFrom), s.decode(t.ChangedTo)
			}
		}
		out[i] = console.Session{ID: r.ID, Client: r.Client, Worker: r.Worker, LastActive: r.LastActive, Turns: turns}
	}
	return out, nil
}

// keyStore is the console's view of the API keys: those kept in the
// database and those given on the command line.
type keyStore struct {
	db     *store.SQLite
	static []string
}

var (
	_ console.KeyStore    = (*keyStore)(nil)
	_ api.KeyChecker      = apiKeys{}
	_ api.AdminKeyChecker = apiKeys{}
)

// staticKeyID marks a login with a command-line key; no stored key has it.
const staticKeyID = "cli"

// CreateKey copies name first: the console hands over strings that point
// into fasthttp's reused request buffers, and keeps the key it gets back.
func (k *keyStore) CreateKey(ctx context.Context, name string) (apikey.Key, string, error) {
	return k.CreateScopedKey(ctx, name, apikey.ScopeInference)
}

func (k *keyStore) CreateScopedKey(ctx context.Context, name, scope string) (apikey.Key, string, error) {
	key, secret, err := k.db.CreateScopedKey(ctx, strings.Clone(name), strings.Clone(scope))
	if err != nil {
		return apikey.Key{}, "", err
	}
	return key, secret, nil
}

func (k *keyStore) Keys(ctx context.Context) ([]apikey.Key, error) { return k.db.Keys(ctx) }

func (k *keyStore) RevokeKey(ctx context.Context, id string) error {
	err := k.db.RevokeKey(ctx, id)
	if errors.Is(err, store.ErrNoSuchKey) {
		return fmt.Errorf("revoke %q: %w", id, console.ErrNoSuchKey)
	}
	return err
}

func (k *keyStore) CheckKey(ctx context.Context, secret string) (apikey.Key, error) {
	for _, s := range k.static {
		if subtle.ConstantTimeCompare([]byte(secret), []byte(s)) == 1 {
			// The operator's own keys: they open everything.
			return apikey.Key{ID: staticKeyID, Name: "--api-key", Scope: apikey.ScopeAdmin}, nil
		}
	}
	key, err := k.db.CheckKey(ctx, secret)
	if errors.Is(err, store.ErrNoSuchKey) {
		return apikey.Key{}, console.ErrNoSuchKey
	}
	if err != nil {
		return apikey.Key{}, err
	}
	return key, nil
}

// apiKeys lets the gateway check the keys: those of the command line and
// those created in the console. It is the one place that says whether the
// API needs a key.
type apiKeys struct{ keys *keyStore }

func (a apiKeys) HasKeys(ctx context.Context) (bool, error) {
	if len(a.keys.static) > 0 {
		return true, nil
	}
	return a.keys.db.HasKeys(ctx)
}

// CheckKey accepts any live key on /v1 and notes its use (written at
// most once a minute per key, for the console's "last used").
func (a apiKeys) CheckKey(ctx context.Context, secret string) error {
	k, err := a.keys.CheckKey(ctx, secret)
	if err != nil {
		return err
	}
	if k.ID != staticKeyID {
		if err := a.keys.db.NoteKeyUsed(ctx, k.ID); err != nil && !errors.Is(err, store.ErrNoSuchKey) {
			return err
		}
	}
	return nil
}

// IsAdminKey tells the gateway which keys open /metrics from the network.
func (a apiKeys) IsAdminKey(ctx context.Context, secret string) bool {
	k, err := a.keys.CheckKey(ctx, secret)
	return err == nil && k.Scope == apikey.ScopeAdmin
}

// required reports whether the API needs a key right now; when the
// database cannot tell, it does.
func (a apiKeys) required(ctx context.Context) bool {
	has, err := a.HasKeys(ctx)
	return err != nil || has
}

// aliasSetter puts model aliases in place while the gateway runs
// (api.Models, which the gateway resolves names with).
type aliasSetter interface {
	SetAliases(map[string]string) error
}

// settingsStore holds the settings the console edits and applies them at
// once: the routing policy to requests that name none (gatewayRouter
// asks Policy on every request), the aliases through the gateway. A save
// also goes to the database, where the next start finds it.
type settingsStore struct {
	db       *store.SQLite
	policies []string // read only
	models   []string // read only
	resolver aliasSetter

	saveMu sync.Mutex // held through a save, so that saves do not interleave

	mu      sync.RWMutex // guards the fields below; written with saveMu held too
	policy  string
	aliases []console.Alias
}

var _ console.SettingsStore = (*settingsStore)(nil)

// newSettingsStore starts from the settings saved in the console when
// there are any, and from the command line's policy and aliases when
// there are none. Saved settings that no longer fit (an alias to a model
// that is not served since --model changed) are left in the database
// but not used, and a warning says so.
func newSettingsStore(ctx context.Context, db *store.SQLite, log *slog.Logger, policy string, models []string, aliases map[string]string, resolver aliasSetter) (*settingsStore, error) {
	s := &settingsStore{
		db: db, policies: router.PolicyNames(), models: slices.Clone(models), resolver: resolver,
		policy: policy, aliases: aliasList(aliases),
	}
	if err := s.load(ctx, log); err != nil {
		return nil, err
	}
	if err := resolver.SetAliases(aliasMap(s.aliases)); err != nil {
		return nil, fmt.Errorf("--alias: %w", err)
	}
	return s, nil
}

// load replaces the command line's settings with those saved in the
// console, when they fit.
func (s *settingsStore) load(ctx context.Context, log *slog.Logger) error {
	db := s.db
	saved, ok, err := db.Settings(ctx)
	if err != nil || !ok {
		return err
	}
	savedAliases := make([]console.Alias, len(saved.Aliases))
	for i, a := range saved.Aliases {
		savedAliases[i] = console.Alias{From: a.From, To: a.To}
	}
	if err := s.check(saved.Policy, savedAliases); err != nil {
		log.Warn("ignoring the settings saved in the console; using the command line's", "error", err)
		return nil
	}
	log.Info("using the settings saved in the console instead of --policy and --alias",
		"policy", saved.Policy, "aliases", len(savedAliases))
	s.policy, s.aliases = saved.Policy, savedAliases
	return nil
}

// aliasList turns --alias flags into the console's list, sorted by name.
func aliasList(aliases map[string]string) []console.Alias {
	out := make([]console.Alias, 0, len(aliases))
	for _, from := range slices.Sorted(maps.Keys(aliases)) {
		out = append(out, console.Alias{From: from, To: aliases[from]})
	}
	return out
}

// aliasMap is the gateway's form of aliases; check has refused duplicates.
func aliasMap(aliases []console.Alias) map[string]string {
	m := make(map[string]string, len(aliases))
	for _, a := range aliases {
		m[a.From] = a.To
	}
	return m
}

// check reports settings that cannot apply, wrapping
// console.ErrInvalidSettings: the message is shown to the user.
func (s *settingsStore) check(policy string, aliases []console.Alias) error {
	if !slices.Contains(s.policies, policy) {
		return fmt.Errorf("%w: unknown routing policy %q (known: %s)", console.ErrInvalidSettings, policy, strings.Join(s.policies, ", "))
	}
	seen := make(map[string]bool, len(aliases))
	for _, a := range aliases {
		if seen[a.From] {
			return fmt.Errorf("%w: alias %q is set twice", console.ErrInvalidSettings, a.From)
		}
		seen[a.From] = true
	}
	// The gateway's own rules: pattern syntax, targets that are served.
	if err := (api.Config{Models: s.models, Aliases: aliasMap(aliases)}).Validate(); err != nil {
		return fmt.Errorf("%w: %v", console.ErrInvalidSettings, err)
	}
	return nil
}

// Aliases are the aliases in force, in the gateway's form.
func (s *settingsStore) Aliases() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return aliasMap(s.aliases)
}

func (s *settingsStore) Settings(context.Context) (console.Settings, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return console.Settings{
		Policy: s.policy, Policies: slices.Clone(s.policies), Models: slices.Clone(s.models),
		Aliases: slices.Clone(s.aliases),
	}, nil
}

// SaveSettings checks st, applies its aliases to the gateway, saves it and
// then switches the policy. Should the database refuse, the gateway's
// aliases go back to what they were: what runs is what the next start
// will find.
func (s *settingsStore) SaveSettings(ctx context.Context, st console.Settings) error {
	// The strings may point into fasthttp's reused request buffers.
	policy := strings.Clone(st.Policy)
	aliases := make([]console.Alias, len(st.Aliases))
	for i, a := range st.Aliases {
		aliases[i] = console.Alias{From: strings.Clone(a.From), To: strings.Clone(a.To)}
	}
	if err := s.check(policy, aliases); err != nil {
		return err
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if err := s.resolver.SetAliases(aliasMap(aliases)); err != nil {
		return fmt.Errorf("%w: %v", console.ErrInvalidSettings, err)
	}
	saved := store.Settings{Policy: policy, Aliases: make([]store.Alias, len(aliases))}
	for i, a := range aliases {
		saved.Aliases[i] = store.Alias{From: a.From, To: a.To}
	}
	if err := s.db.SaveSettings(ctx, saved); err != nil {
		if rerr := s.resolver.SetAliases(aliasMap(s.aliases)); rerr != nil {
			return errors.Join(err, fmt.Errorf("restoring the aliases: %w", rerr))
		}
		return err
	}
	s.mu.Lock()
	s.policy, s.aliases = policy, aliases
	s.mu.Unlock()
	return nil
}

// Policy is the routing policy for requests that do not name one.
func (s *settingsStore) Policy() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.policy
}

// keylessClients tells the console which clients the gateway served
// without a key. gw is set once the gateway is built, after the console it
// mounts; until then there are none.
type keylessClients struct{ gw *api.Gateway }

var _ console.KeylessClients = (*keylessClients)(nil)

func (k *keylessClients) ClientsWithoutKey(_ context.Context, since time.Time) ([]console.KeylessClient, error) {
	if k.gw == nil {
		return nil, nil
	}
	seen := k.gw.ClientsWithoutKey(since)
	out := make([]console.KeylessClient, len(seen))
	for i, c := range seen {
		out[i] = console.KeylessClient{Client: c.Client, LastSeen: c.LastSeen}
	}
	return out, nil
}
