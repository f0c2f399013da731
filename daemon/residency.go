package daemon

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/console"
	"github.com/hearth-llm/hearth/models"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// residency serves more models than the GPUs hold at once (docs/models.md):
// the engines planned on one GPU group (planEngines gives each model of
// an on-demand group its own engine) are held by one models.Manager, which
// decides which are resident; the engines move through engineMover. A
// model alone on its GPUs has no manager: it is always resident.
type residency struct {
	byModel  map[string]*models.Manager
	byEngine map[string]string // the model of each engine of byModel
	managers []*models.Manager
	// gpuOf names each model's GPUs as its engine's name does
	// ("node/gpu0"), and share is its planned fraction of them (0: not
	// planned): the console's view.
	gpuOf map[string]string
	share map[string]float64
	// wait bounds how long a request waits for its model (--model-wait).
	wait time.Duration
}

// onDemandGroup is the engines planned on one GPU group.
type onDemandGroup struct {
	gpu   nodes.GPU
	specs []hruntime.Spec
}

// newResidency builds a manager for every GPU group with more than one
// model, and holds stopped the engines that do not start at once: each
// group starts its first pinned model, else its first preloaded one, else
// its first; the manager's Run loads the other pinned and preloaded ones.
// Pinned and preloaded models that do not fit their GPUs together are
// refused here.
func newResidency(cfg Config, gpus []nodes.GPU, specs []hruntime.Spec, sup engineControl, sampler *nodes.Sampler, log *slog.Logger) (*residency, error) {
	r := &residency{byModel: map[string]*models.Manager{}, byEngine: map[string]string{}, wait: cfg.OnDemand.Wait,
		gpuOf: map[string]string{}, share: map[string]float64{}}
	var groups []*onDemandGroup
	byGPU := map[string]*onDemandGroup{}
	for _, s := range specs {
		key := s.GPU.Node + "/" + s.GPUIDs()
		g := byGPU[key]
		if g == nil {
			g = &onDemandGroup{gpu: gpuOf(gpus, s.GPU)}
			byGPU[key] = g
			groups = append(groups, g)
		}
		g.specs = append(g.specs, s)
	}
	_, hostAvailable, hostErr := hostMemory()
	shares, err := sharePlans(cfg, gpus)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		if len(g.specs) < 2 {
			continue
		}
		total := g.gpu.MemoryTotal
		if total == 0 {
			if known, ok := catalog.LookupGPU(g.specs[0].GPU.Kind); ok {
				total = known.MemoryBytes
			}
		}
		// With the group's plan, the models share its budget and each
		// holds its share (sets that fit together are resident at once);
		// without one, each engine's fraction of the whole GPU.
		capacity := total
		plan, planned := shares[groupOf(cfg, gpus, g.specs[0].GPU)]
		if planned {
			capacity = plan.BudgetBytes(total)
		}
		mover := &engineMover{sup: sup, client: hruntime.NewProbeClient(), specs: map[string]hruntime.Spec{}, bytes: map[string]uint64{},
			level: map[string]int{}, gpuUsed: sampledGPUUse(sampler), log: log.With("component", "models")}
		var ms []models.Model
		var startBytes uint64 // of the pinned and preloaded models
		for _, s := range g.specs {
			level := sleepLevel(s, hostAvailable, hostErr)
			m := modelOf(cfg, s, total, level)
			if shared, ok := plan.Model(s.Model); planned && ok {
				m.Bytes = shared.ShareBytes(total)
				r.share[s.Model] = shared.Share
			}
			r.gpuOf[s.Model] = strings.TrimSuffix(s.Name, "/"+s.Model)
			mover.specs[s.Model], mover.bytes[s.Model], mover.level[s.Model] = s, m.Bytes, level
			if m.Pinned || m.Preload {
				startBytes += m.Bytes
			}
			ms = append(ms, m)
		}
		if startBytes > capacity {
			return nil, fmt.Errorf("%w: --pin, --preload: the pinned and preloaded models of GPU %d need %.1f GiB together and it has %.1f GiB: pin fewer, preload fewer, or serve them on another GPU",
				ErrUsage, g.specs[0].GPU.Index, float64(startBytes)/(1<<30), float64(capacity)/(1<<30))
		}
		first := firstResident(ms)
		if !slices.ContainsFunc(ms, func(m models.Model) bool { return m.Pinned || m.Preload }) {
			ms[first].Preload = true // the group starts serving its first model, as without models on demand
		}
		mgr, err := models.New(models.Options{Capacity: capacity, Models: ms, Mover: mover, Log: mover.log,
			PriorityWait: router.DefaultPriorityWait}) // the router's queue is built with its default
		if err != nil {
			return nil, fmt.Errorf("up: %w", err)
		}
		for i, s := range g.specs {
			r.byModel[s.Model], r.byEngine[s.Name] = mgr, s.Model
			if i != first {
				sup.Hold(s.Name, onDiskReason)
			}
		}
		r.managers = append(r.managers, mgr)
	}
	return r, nil
}

// groupOf is the index of the GPU group g leads, as planEngines counts
// them; -1 when g is not among gpus.
func groupOf(cfg Config, gpus []nodes.GPU, g hruntime.GPU) int {
	i := slices.IndexFunc(gpus, func(x nodes.GPU) bool { return x.Node == g.Node && x.Index == g.Index })
	if i < 0 {
		return -1
	}
	return i / max(cfg.TP, 1)
}

// onDiskReason is a held engine's last error while its model waits for a
// request: it is not a failure.
const onDiskReason = "not loaded: the model loads on its first request"

// firstResident is the model a group starts at once: its first pinned,
// else its first preloaded, else its first.
func firstResident(ms []models.Model) int {
	for _, want := range []func(models.Model) bool{
		func(m models.Model) bool { return m.Pinned },
		func(m models.Model) bool { return m.Preload },
	} {
		if i := slices.IndexFunc(ms, want); i >= 0 {
			return i
		}
	}
	return 0
}

// modelOf is the manager's view of the model an engine serves: the GPU
// memory the engine reserves (its memory fraction of the board), what
// bringing it back costs (catalog.SwapTimesOf: a wake from sleep level,
// or a cold start), whether its kind sleeps, and the command line's policy
// for it.
func modelOf(cfg Config, s hruntime.Spec, capacity uint64, level int) models.Model {
	fraction := s.GPUMemoryUtilization
	if fraction <= 0 {
		fraction = catalog.DefaultMemoryFraction
	}
	m := models.Model{
		Name: s.Model, Bytes: uint64(float64(capacity) * fraction), KeepAlive: cfg.OnDemand.KeepAlive,
		CanSleep: s.Engine.Descriptor().SleepMode != nil,
		Pinned:   slices.Contains(cfg.OnDemand.Pinned, s.Model), Preload: slices.Contains(cfg.OnDemand.Preload, s.Model),
		Cold: time.Minute, // a model the catalog does not know: a cold start's usual length
	}
	gpu, gok := catalog.LookupGPU(s.GPU.Kind)
	model, mok := catalog.LookupModel(s.Model)
	if gok && mok {
		t := catalog.SwapTimesOf(gpu, model, catalog.Layout{TP: len(s.GPUs())})
		m.Wake, m.Cold = t.WakeLevel1, t.ColdFromPageCache
		if level == 2 {
			m.Wake = t.WakeLevel2
		}
	}
	return m
}

// sleepLevel is the level an engine sleeps at: 1 (weights kept in host
// RAM, the quick wake) when the host has the room for its weights beside
// a margin for the system, else 2 (weights dropped, reloaded on wake).
func sleepLevel(s hruntime.Spec, hostAvailable uint64, hostErr error) int {
	const systemMargin = 8 << 30
	model, ok := catalog.LookupModel(s.Model)
	if hostErr != nil || !ok || uint64(model.WeightBytes)+systemMargin > hostAvailable {
		return 2
	}
	return 1
}

func gpuOf(gpus []nodes.GPU, g hruntime.GPU) nodes.GPU {
	for _, x := range gpus {
		if x.Node == g.Node && x.Index == g.Index {
			return x
		}
	}
	return nodes.GPU{}
}

// Run runs every manager until ctx ends.
func (r *residency) Run(ctx context.Context) error {
	errs := make(chan error, len(r.managers))
	for _, m := range r.managers {
		go func() { errs <- m.Run(ctx) }()
	}
	var err error
	for range r.managers {
		err = errors.Join(err, <-errs)
	}
	return err
}

// preloaded is closed once every manager has brought in its pinned and
// preloaded models, or failed to.
func (r *residency) preloaded(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, m := range r.managers {
			select {
			case <-m.Preloaded():
			case <-ctx.Done():
				return
			}
		}
	}()
	return done
}

// Engine states of models served on demand, as the console and hearth
// engines show them: an engine asleep serves no request until it wakes,
// and one held stopped until its model's first request has not failed.
const (
	engineSleeping hruntime.State = "sleeping"
	engineOnDisk   hruntime.State = "on disk"
)

// stayHeld says whether the engine's model is served on demand and not
// resident now: a GPU's return leaves such an engine stopped, and its
// model starts afresh on its next request (a wake of it fails first).
func (r *residency) stayHeld(engine string) bool {
	model, ok := r.byEngine[engine]
	if !ok {
		return false
	}
	state := models.State(r.ModelState(model))
	return state != models.Resident && state != models.Loading
}

// annotate shows the engines of models served on demand as their models
// are: asleep, or on disk, where the supervisor sees a ready engine and a
// held one.
func (r *residency) annotate(statuses []hruntime.Status) []hruntime.Status {
	if len(r.managers) == 0 {
		return statuses
	}
	for i, st := range statuses {
		switch state := models.State(r.ModelState(st.Model)); {
		case state == models.Sleeping && st.State == hruntime.StateReady:
			statuses[i].State = engineSleeping
		case state == models.OnDisk && st.State == hruntime.StateStopped && st.LastError == onDiskReason:
			statuses[i].State, statuses[i].LastError = engineOnDisk, ""
		}
	}
	return statuses
}

// acquire makes req's model resident for it, waiting at most the
// configured bound, in line with the other requests waiting for their
// models (by session and priority); release ends the request. A model
// alone on its GPUs needs nothing.
func (r *residency) acquire(ctx context.Context, req models.Request) (release func(), err error) {
	m := r.byModel[req.Model]
	if m == nil {
		return func() {}, nil
	}
	if r.wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.wait)
		defer cancel()
	}
	return m.AcquireRequest(ctx, req)
}

// ModelState is the model's state for /v1/models (api.Residency): the
// manager's, or resident for a model alone on its GPUs.
func (r *residency) ModelState(model string) string {
	m := r.byModel[model]
	if m == nil {
		return string(models.Resident)
	}
	for _, st := range m.Statuses() {
		if st.Name == model {
			return string(st.State)
		}
	}
	return ""
}

// ModelLoad is a loading model's progress for /v1/models (api.Residency).
func (r *residency) ModelLoad(model string) (elapsed, expected time.Duration) {
	if m := r.byModel[model]; m != nil {
		for _, st := range m.Statuses() {
			if st.Name == model {
				return st.LoadElapsed, st.LoadExpected
			}
		}
	}
	return 0, 0
}

// ToolPause tells the model's manager that an agent session's turn on it
// ended in tool calls (api.Residency).
func (r *residency) ToolPause(model, session string) {
	if m := r.byModel[model]; m != nil {
		m.ToolPause(model, session)
	}
}

// engineMover moves one GPU group's engines for its manager: a cold load
// releases the engine the supervisor holds and waits for it to serve; a
// sleep asks the engine through its kind's endpoints and checks through the
// GPU telemetry that the memory came back; a stop holds the engine
// stopped.
type engineMover struct {
	sup    engineControl
	client *http.Client
	specs  map[string]hruntime.Spec // by model
	bytes  map[string]uint64        // what each model's engine reserves
	level  map[string]int           // the sleep level of each
	// gpuUsed reads the memory used on a GPU now, for real engines.
	gpuUsed func(ctx context.Context, uuid string) (uint64, bool)
	log     *slog.Logger
}

var _ models.Mover = (*engineMover)(nil)

// engineControl is what the mover needs of the supervisor.
type engineControl interface {
	Engines() []hruntime.Status
	Hold(name, reason string) bool
	Release(name string) bool
}

func (mv *engineMover) Load(ctx context.Context, model string, asleep bool) error {
	spec := mv.specs[model]
	start := time.Now()
	if asleep {
		st, err := mv.ready(spec.Name)
		if err == nil {
			err = spec.Engine.Descriptor().Wake(ctx, mv.client, st.BaseURL)
		}
		if err == nil {
			mv.log.Info("model woke", "model", model, "engine", spec.Name, "took", time.Since(start).Round(time.Millisecond))
			return nil
		}
		// An engine that cannot wake is started afresh.
		mv.log.Warn("model did not wake; restarting its engine", "model", model, "engine", spec.Name, "error", err)
		if err := mv.Stop(ctx, model); err != nil {
			return err
		}
	}
	mv.sup.Release(spec.Name)
	err := waitEngine(ctx, mv.sup, spec.Name, func(st hruntime.Status) (bool, error) {
		switch st.State {
		case hruntime.StateReady:
			return true, nil
		case hruntime.StateFailed:
			return false, fmt.Errorf("engine %s failed: %s", spec.Name, st.LastError)
		}
		return false, nil
	})
	if err == nil {
		mv.log.Info("model loaded", "model", model, "engine", spec.Name, "took", time.Since(start).Round(time.Millisecond))
	}
	return err
}

func (mv *engineMover) Sleep(ctx context.Context, model string) error {
	spec := mv.specs[model]
	st, err := mv.ready(spec.Name)
	if err != nil {
		return err
	}
	before, known := mv.memory(ctx, spec, st)
	start := time.Now()
	if err := spec.Engine.Descriptor().Sleep(ctx, mv.client, st.BaseURL, mv.level[model]); err != nil {
		return fmt.Errorf("sleeping %s: %w", spec.Name, err)
	}
	after, _ := mv.memory(ctx, spec, st)
	// The telemetry is the judge of whether the GPU memory came back: an
	// engine that kept it is stopped instead (the manager stops an engine
	// whose sleep failed).
	if known && after+mv.bytes[model]/2 > before {
		return fmt.Errorf("engine %s asleep still holds %.1f GiB of the GPU (%.1f GiB awake)", spec.Name, float64(after)/(1<<30), float64(before)/(1<<30))
	}
	mv.log.Info("model asleep", "model", model, "engine", spec.Name, "level", mv.level[model], "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func (mv *engineMover) Stop(ctx context.Context, model string) error {
	spec := mv.specs[model]
	mv.sup.Hold(spec.Name, onDiskReason)
	err := waitEngine(ctx, mv.sup, spec.Name, func(st hruntime.Status) (bool, error) {
		return st.State == hruntime.StateStopped || st.State == hruntime.StateFailed, nil
	})
	if err == nil {
		mv.log.Info("model stopped", "model", model, "engine", spec.Name)
	}
	return err
}

// ready returns the status of a serving engine.
func (mv *engineMover) ready(name string) (hruntime.Status, error) {
	for _, st := range mv.sup.Engines() {
		if st.Name == name {
			if st.State != hruntime.StateReady {
				return st, fmt.Errorf("engine %s is %s", name, st.State)
			}
			return st, nil
		}
	}
	return hruntime.Status{}, fmt.Errorf("no engine %s", name)
}

// memory is what the GPU telemetry says the engine holds: a simulated
// engine's own gauge of its simulated GPU memory, or, for a real engine,
// the memory used on its GPU (others' use included, which the comparison
// of two readings cancels out).
func (mv *engineMover) memory(ctx context.Context, spec hruntime.Spec, st hruntime.Status) (uint64, bool) {
	if !spec.Simulated {
		return mv.gpuUsed(ctx, spec.GPU.UUID)
	}
	return simGPUMemory(ctx, mv.client, st.BaseURL)
}

// simGPUMemoryMetric is the simulated engine's gauge of the GPU memory it
// holds (runtime/sim).
const simGPUMemoryMetric = "hearth_sim_gpu_memory_used_bytes"

func simGPUMemory(ctx context.Context, client *http.Client, baseURL string) (uint64, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return 0, false
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		value, ok := strings.CutPrefix(sc.Text(), simGPUMemoryMetric+" ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		return uint64(f), err == nil
	}
	return 0, false
}

// sampledGPUUse reads a GPU's used memory through a fresh sample.
func sampledGPUUse(s *nodes.Sampler) func(context.Context, string) (uint64, bool) {
	return func(ctx context.Context, uuid string) (uint64, bool) {
		if s == nil {
			return 0, false
		}
		inv, err := s.Sample(ctx)
		if err != nil {
			return 0, false
		}
		for _, g := range inv.GPUs {
			if g.UUID == uuid && g.MemoryUsageKnown {
				return g.MemoryUsed, true
			}
		}
		return 0, false
	}
}

// waitEngine waits until done says the engine's status is what the caller
// waits for, or fails; the supervisor tells no changes, so its statuses
// are read every few milliseconds.
func waitEngine(ctx context.Context, sup engineControl, name string, done func(hruntime.Status) (bool, error)) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, st := range sup.Engines() {
			if st.Name != name {
				continue
			}
			ok, err := done(st)
			if err != nil || ok {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("engine %s: %w", name, ctx.Err())
		case <-tick.C:
		}
	}
}

// sharedFractions are, by engine name, the memory fractions of the engines
// whose models share their GPU by plan.
func sharedFractions(r *residency, specs []hruntime.Spec) map[string]float64 {
	out := map[string]float64{}
	for _, s := range specs {
		if f := r.share[s.Model]; f > 0 && r.byEngine[s.Name] != "" {
			out[s.Name] = f
		}
	}
	return out
}

// The console's side of the models (console.ModelSource).

var _ console.ModelSource = (*residency)(nil)

// Residency lists the models served on demand, by GPU then name, and every
// manager's latest transitions.
func (r *residency) Residency(context.Context) (console.Residency, error) {
	var out console.Residency
	for _, m := range r.managers {
		for _, st := range m.Statuses() {
			out.Models = append(out.Models, console.ResidentModel{Name: st.Name, GPU: r.gpuOf[st.Name], State: string(st.State),
				InFlight: st.InFlight, Pinned: st.Pinned, Share: r.share[st.Name]})
		}
		for _, t := range m.Transitions() {
			out.Transitions = append(out.Transitions, console.ModelTransition{Model: t.Model, GPU: r.gpuOf[t.Model], Kind: string(t.Kind),
				At: t.At, Took: t.Took, Err: t.Err})
		}
	}
	slices.SortStableFunc(out.Models, func(a, b console.ResidentModel) int {
		return cmp.Or(strings.Compare(a.GPU, b.GPU), strings.Compare(a.Name, b.Name))
	})
	return out, nil
}

// The admin API's side of the models (adminapi.Models): hearth models.

var _ adminapi.Models = (*residency)(nil)

// Models lists the models served on demand, by name.
func (r *residency) Models() []adminapi.Model {
	var out []adminapi.Model
	for _, m := range r.managers {
		last := map[string]*adminapi.ModelTransition{}
		for _, t := range m.Transitions() { // oldest first: the last one stays
			last[t.Model] = &adminapi.ModelTransition{Kind: string(t.Kind), At: t.At, TookMS: t.Took.Milliseconds(), Error: t.Err}
		}
		for _, st := range m.Statuses() {
			out = append(out, adminapi.Model{Name: st.Name, State: string(st.State), InFlight: st.InFlight, Pinned: st.Pinned,
				GPU: r.gpuOf[st.Name], Share: r.share[st.Name], Last: last[st.Name]})
		}
	}
	slices.SortFunc(out, func(a, b adminapi.Model) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (r *residency) Load(ctx context.Context, name string) error {
	m, err := r.manager(name)
	if err != nil {
		return err
	}
	return adminError(m.Load(ctx, name))
}

func (r *residency) Unload(ctx context.Context, name string) error {
	m, err := r.manager(name)
	if err != nil {
		return err
	}
	return adminError(m.Unload(ctx, name))
}

func (r *residency) Pin(name string, pinned bool) error {
	m, err := r.manager(name)
	if err != nil {
		return err
	}
	return adminError(m.Pin(name, pinned))
}

func (r *residency) manager(name string) (*models.Manager, error) {
	m := r.byModel[name]
	if m == nil {
		return nil, fmt.Errorf("%w: %s is not a model served on demand", adminapi.ErrNotFound, name)
	}
	return m, nil
}

// adminError marks a manager's refusal as the admin API's conflict.
func adminError(err error) error {
	if errors.Is(err, models.ErrBusy) {
		return fmt.Errorf("%w: %w", adminapi.ErrConflict, err)
	}
	return err
}

// sharePlans plans, for each GPU group of a layout that serves models on
// demand, which of its models are resident together and each one's
// memory fraction (catalog.PlanShares), by group index. A group whose
// GPUs' size, or one of whose models' shape, Hearth does not know has no
// plan: its engines keep their own defaults. A model that fits its GPUs
// not even alone is refused with the plan's sentence.
func sharePlans(cfg Config, gpus []nodes.GPU) (map[int]catalog.SharePlan, error) {
	tp := max(cfg.TP, 1)
	groups := len(gpus) / tp
	if groups == 0 || len(cfg.Models) <= groups {
		return nil, nil
	}
	kind := hruntime.KindVLLM
	if cfg.Engine != "" {
		kind = hruntime.Kind(cfg.Engine)
	}
	share := catalog.ShareOfTotal
	if k, ok := hruntime.Lookup(kind); ok {
		share = k.MemoryShare
	}
	layout := catalog.Layout{TP: tp, KVCacheDtype: kvCacheDtypeOf(cfg), RopeScaling: cfg.RopeScaling}
	out := map[int]catalog.SharePlan{}
groups:
	for group := range groups {
		uses := nodes.PlannerUses(gpus[group*tp : (group+1)*tp])
		if slices.ContainsFunc(uses, func(u catalog.GPUUse) bool { return u.GPU.MemoryBytes == 0 }) {
			continue
		}
		var ms []catalog.Model
		var names []string
		for i := group; i < len(cfg.Models); i += groups {
			m, err := catalog.ResolveModel(catalog.ModelRepo(cfg.Models[i]), cfg.hubDir())
			if err != nil {
				continue groups // the engines read the model themselves
			}
			if m, err = catalog.ApplyLayout(m, layout); err != nil {
				return nil, fmt.Errorf("up: %w", err)
			}
			ms, names = append(ms, m), append(names, cfg.Models[i])
		}
		p, err := catalog.PlanShares(catalog.ShareRequest{GPUs: uses, Models: ms, Layout: layout, MaxModelLen: cfg.MaxModelLen, Share: share})
		if err != nil {
			var nf *catalog.NotFitError
			var long *catalog.ContextTooLongError
			name := ""
			switch {
			case errors.As(err, &nf):
				name = nf.Model.Name
			case errors.As(err, &long):
				name = long.Model.Name
			}
			if i := slices.IndexFunc(ms, func(m catalog.Model) bool { return m.Name == name }); i >= 0 {
				g := gpus[group*tp]
				return nil, fmt.Errorf("up: engine %s/gpu%d/%s: %w", g.Node, g.Index, names[i], err)
			}
			return nil, fmt.Errorf("up: GPU %d: %w", gpus[group*tp].Index, err)
		}
		// The plan speaks of the models by the names they are served by.
		rename := map[string]string{}
		for i := range p.Models {
			rename[p.Models[i].Name], p.Models[i].Name = names[i], names[i]
		}
		for _, set := range p.Sets {
			for j := range set {
				set[j] = rename[set[j]]
			}
		}
		out[group] = p
	}
	return out, nil
}

// shareNote says, for an engine's plan note, which models share its GPU
// with it; "" when it is resident alone.
func shareNote(p catalog.SharePlan, model string) string {
	var beside []string
	for _, set := range p.Sets {
		if slices.Contains(set, model) {
			for _, other := range set {
				if other != model && !slices.Contains(beside, other) {
					beside = append(beside, other)
				}
			}
		}
	}
	if len(beside) == 0 {
		return ""
	}
	m, _ := p.Model(model)
	return fmt.Sprintf("resident beside %s: %.0f%% of the GPU, a context of %d tokens", strings.Join(beside, ", "), m.Share*100, m.Engine.MaxModelLen)
}

// logSharePlans says, for each GPU group that serves models on demand,
// which of its models are resident together (hearth up prints it).
func logSharePlans(log *slog.Logger, cfg Config, gpus []nodes.GPU) {
	plans, err := sharePlans(cfg, gpus)
	if err != nil {
		return // planEngines has refused it already
	}
	tp := max(cfg.TP, 1)
	for group := range len(gpus) / tp {
		p, ok := plans[group]
		if !ok {
			continue
		}
		log.Info(fmt.Sprintf("models on demand on GPU %d: resident together: %s", gpus[group*tp].Index, p.SetsLine()), "plan", p.String())
	}
}
