package console

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// fakeClock is clock.Fake that also reports each NewTicker, for tests
// that wait for Run to start ticking.
type fakeClock struct {
	*clock.Fake
	created chan struct{} // one value per NewTicker
}

func newFakeClock(now time.Time) *fakeClock {
	return &fakeClock{Fake: clock.NewFake(now), created: make(chan struct{}, 64)}
}

func (c *fakeClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	ch, stop := c.Fake.NewTicker(d)
	select {
	case c.created <- struct{}{}:
	default:
	}
	return ch, stop
}

// fakeSources implements EngineSource, RouterSource, TrafficSource and
// KVStoreSource from fields a test sets.
type fakeSources struct {
	mu         sync.Mutex
	engines    []Engine
	decisions  []Decision
	queue      int
	requests   []Request
	sessions   []Session
	stores     []KVStore
	residency  Residency
	modelsErr  error
	enginesErr error
	storesErr  error
	routerErr  error
	trafficErr error
	calls      int // Engines calls, to see the hub sample
}

var (
	_ EngineSource  = (*fakeSources)(nil)
	_ RouterSource  = (*fakeSources)(nil)
	_ TrafficSource = (*fakeSources)(nil)
	_ KVStoreSource = (*fakeSources)(nil)
	_ ModelSource   = (*fakeSources)(nil)
)

func (f *fakeSources) Residency(context.Context) (Residency, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.modelsErr != nil {
		return Residency{}, f.modelsErr
	}
	return Residency{Models: append([]ResidentModel(nil), f.residency.Models...),
		Transitions: append([]ModelTransition(nil), f.residency.Transitions...)}, nil
}

func (f *fakeSources) KVStores(context.Context) ([]KVStore, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.storesErr != nil {
		return nil, f.storesErr
	}
	return append([]KVStore(nil), f.stores...), nil
}

func (f *fakeSources) Engines(context.Context) ([]Engine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.enginesErr != nil {
		return nil, f.enginesErr
	}
	return append([]Engine(nil), f.engines...), nil
}

func (f *fakeSources) Decisions(_ context.Context, n int) ([]Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.routerErr != nil {
		return nil, f.routerErr
	}
	return append([]Decision(nil), f.decisions[:min(n, len(f.decisions))]...), nil
}

func (f *fakeSources) QueueLen(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.routerErr != nil {
		return 0, f.routerErr
	}
	return f.queue, nil
}

func (f *fakeSources) RequestsSince(_ context.Context, since time.Time) ([]Request, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.trafficErr != nil {
		return nil, f.trafficErr
	}
	var out []Request
	for _, r := range f.requests {
		if !r.At.Before(since) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeSources) Sessions(context.Context) ([]Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.trafficErr != nil {
		return nil, f.trafficErr
	}
	return append([]Session(nil), f.sessions...), nil
}

func (f *fakeSources) update(fn func(f *fakeSources)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// t0 is the fixed instant golden pages are rendered at.
var t0 = time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC)

// loadedSources is a deterministic cluster of gpus GPUs with sessions
// agent sessions and perMinute requests a minute over the last five
// minutes, the figures the issue sizes the console for.
func loadedSources(now time.Time, gpus, sessions, perMinute int) *fakeSources {
	rng := rand.New(rand.NewPCG(1, 2))
	f := &fakeSources{queue: 2}
	workers := make([]string, gpus)
	for i := range gpus {
		workers[i] = fmt.Sprintf("rig%d-gpu0", i)
		total := 1900
		used := 300 + 211*i
		f.engines = append(f.engines, Engine{
			Worker: workers[i], Node: fmt.Sprintf("rig%d", i),
			GPU: "NVIDIA GeForce RTX 4090", Model: "Qwen/Qwen3-14B-FP8",
			MemoryUsed: 22 << 30, MemoryTotal: 24 << 30,
			UtilizationPct: 70 + i, TemperatureC: 60 + i,
			TotalBlocks: total, UsedBlocks: used, CachedFreeBlocks: 900 - 100*i,
			Running: 3 + i, Waiting: i,
			PrefixQueries: 1_000_000, PrefixHits: 800_000, GenerationTokens: 50_000,
			PrefillTokensPerSec: 6000,
			PowerDrawW:          float64(280 + 10*i), PowerLimitW: 450,
			MemoryByOwnerKnown: true, MemoryHearth: 21 << 30,
		})
		// Every node has an SSD store of KV blocks; even GPUs also keep
		// evicted blocks in host RAM, odd ones have no RAM tier. The odd
		// nodes' stores have no capacity set and cannot tell free disk.
		f.stores = append(f.stores, KVStore{
			Node: fmt.Sprintf("rig%d", i), Dir: "/var/lib/hearth/kv",
			UsedBytes: int64(300+40*i) << 30, CapacityBytes: 500 << 30, FreeDiskBytes: int64(800-i) << 30,
			Blocks: 90_000 + 1000*i, Hits: 40_000, Misses: 10_000, EvictedBlocks: 2000, ReadBytes: 900 << 30, WrittenBytes: 1200 << 30,
		})
		e := &f.engines[i]
		e.DiskHitTokens, e.LoadedBytes, e.StoredBytes = 40_000, 60<<30, 80<<30
		if i%2 == 0 {
			e.RAMTotalBlocks, e.RAMUsedBlocks, e.RAMHitTokens = 8000, 5000+300*i, 90_000
		} else {
			f.stores[i].CapacityBytes, f.stores[i].FreeDiskBytes = 0, -1
		}
		if i%2 == 1 {
			// Someone's notebook holds 6 GiB of this GPU, so its engine
			// was planned smaller.
			e := &f.engines[i]
			e.MemoryHearth, e.MemoryOther = 15<<30, 6<<30
			e.OtherProcesses = []GPUProcess{{Name: "python3", PID: 4242, UsedBytes: 6 << 30}}
			e.PlanNote = "another program holds 6.0 GiB: context cut to 16,384 tokens"
		}
	}
	clientsKinds := []string{"claude-code", "codex", "opencode"}
	for i := range sessions {
		s := Session{
			ID:     fmt.Sprintf("sess-%04d-%08x", i, rng.Uint32()),
			Client: clientsKinds[i%len(clientsKinds)],
			Worker: workers[i%gpus],
		}
		turns := 3 + rng.IntN(20)
		at := now.Add(-time.Duration(rng.IntN(3600)) * time.Second)
		prompt := 18_000 + rng.IntN(4000)
		prevPrompt := 0
		// Claude Code and OpenCode ask for a title or topic beside the
		// conversation before its first turn.
		if s.Client != "codex" {
			s.Turns = append(s.Turns, Turn{At: at, Kind: TurnKindSide, Worker: s.Worker, PromptTokens: 360, OutputTokens: 12})
		}
		for j := range turns {
			t := Turn{At: at, Kind: TurnKindTurn, Worker: s.Worker, PromptTokens: prompt, OutputTokens: 200 + rng.IntN(800)}
			t.CachedTokens = prevPrompt / 16 * 16
			// Every codex session rewrites its prompt now and then.
			if j > 0 && s.Client == "codex" && j%4 == 0 {
				t.Diverged, t.DivergedBlock, t.Cause = true, 3, "prompt_changed"
				t.ChangedFrom, t.ChangedTo = "Today is 2026-11-30. Tools:", "Today is 2026-12-01. Tools:"
				t.CachedTokens = 48
			}
			s.Turns = append(s.Turns, t)
			prevPrompt = prompt
			prompt += 500 + rng.IntN(3000)
			at = at.Add(time.Duration(5+rng.IntN(40)) * time.Second)
		}
		s.LastActive = s.Turns[len(s.Turns)-1].At
		f.sessions = append(f.sessions, s)
	}
	n := 5 * perMinute
	for i := range n {
		at := now.Add(-time.Duration(i) * 5 * time.Minute / time.Duration(n))
		w := workers[i%gpus]
		f.requests = append(f.requests, Request{
			ID: fmt.Sprintf("req-%06d", i), At: at, Worker: w,
			SessionID: fmt.Sprintf("%08x-4f1c-9a2b-8c3d-5e6f7a8b9c0d", 0x3a7e91c4+i%7*0x1111), Client: []string{"claude-code", "codex", ""}[i%3],
			PromptTokens: 20_000, CachedTokens: 16_000 + rng.IntN(4000), OutputTokens: 300, PredictedOutputTokens: 200 + i%5*50,
			TTFT: time.Duration(150+rng.IntN(900)) * time.Millisecond,
		})
		if i < 1000 {
			d := Decision{
				RequestID: fmt.Sprintf("req-%06d", i), At: at, Policy: "kv", Worker: w,
				Reason: "lowest cost", PromptBlocks: 1250, CachedBlocks: 1000 + rng.IntN(250),
				Queued: time.Duration(rng.IntN(3)) * time.Millisecond,
			}
			d.PredictedHitRate = float64(d.CachedBlocks) / float64(d.PromptBlocks)
			for k, cw := range workers {
				c := Candidate{Worker: cw, CachedBlocks: rng.IntN(1250), ActiveBlocks: rng.IntN(900), PendingPrefillTokens: rng.IntN(8000)}
				c.Cost = float64(1250-c.CachedBlocks) + float64(c.ActiveBlocks+c.PendingPrefillTokens/16) + float64(k)
				if cw == w {
					c.CachedBlocks = d.CachedBlocks
					c.Cost = 100
				}
				d.Candidates = append(d.Candidates, c)
			}
			f.decisions = append(f.decisions, d)
		}
	}
	return f
}

// fakeCluster is a ClusterSource over fields a test sets; it records the
// actions asked of it, and acts on its own state as a cluster would: a
// revoked node is marked revoked, an accepted node joins as up.
type fakeCluster struct {
	mu        sync.Mutex
	cluster   Cluster
	err       error // Cluster fails
	actionErr error // every action fails
	// noJoins makes AcceptJoin and RejectJoin fail as a daemon that takes
	// no join requests does.
	noJoins bool
	clock   interface{ Now() time.Time }

	revoked, accepted, rejected []string
}

var _ ClusterSource = (*fakeCluster)(nil)

func (f *fakeCluster) Cluster(context.Context) (Cluster, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return Cluster{}, f.err
	}
	c := f.cluster
	c.Nodes = append([]ClusterNode(nil), c.Nodes...)
	c.JoinRequests = append([]JoinRequest(nil), c.JoinRequests...)
	return c, nil
}

func (f *fakeCluster) RevokeNode(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.actionErr != nil {
		return f.actionErr
	}
	for i := range f.cluster.Nodes {
		if f.cluster.Nodes[i].ID == id {
			f.cluster.Nodes[i].State = NodeRevoked
			f.revoked = append(f.revoked, id)
			return nil
		}
	}
	return fmt.Errorf("fake cluster: node %q: %w", id, ErrNoSuchNode)
}

func (f *fakeCluster) AcceptJoin(_ context.Context, id string) error {
	return f.answer(id, true)
}

func (f *fakeCluster) RejectJoin(_ context.Context, id string) error {
	return f.answer(id, false)
}

func (f *fakeCluster) answer(id string, accept bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noJoins {
		return fmt.Errorf("this daemon takes no join requests: %w", errors.ErrUnsupported)
	}
	if f.actionErr != nil {
		return f.actionErr
	}
	for i, r := range f.cluster.JoinRequests {
		if r.ID != id {
			continue
		}
		f.cluster.JoinRequests = append(f.cluster.JoinRequests[:i:i], f.cluster.JoinRequests[i+1:]...)
		if !accept {
			f.rejected = append(f.rejected, id)
			return nil
		}
		f.accepted = append(f.accepted, id)
		seen := r.Received
		if f.clock != nil {
			seen = f.clock.Now()
		}
		f.cluster.Nodes = append(f.cluster.Nodes, ClusterNode{ID: "node-" + id, Name: r.Name, Address: r.Address, State: NodeUp, LastSeen: seen})
		return nil
	}
	return fmt.Errorf("fake cluster: request %q: %w", id, ErrNoSuchJoinRequest)
}

// actions lists what was asked, "revoke:ID", "accept:ID", "reject:ID".
func (f *fakeCluster) actions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, id := range f.revoked {
		out = append(out, "revoke:"+id)
	}
	for _, id := range f.accepted {
		out = append(out, "accept:"+id)
	}
	for _, id := range f.rejected {
		out = append(out, "reject:"+id)
	}
	return out
}

// testJoinToken stands for a join token: tests look for it where it must
// not be.
const testJoinToken = "hearth1-TESTTOKENtesttokenTESTTOKEN"

// threeNodes is a cluster of this node (rig0), a peer up with two GPUs
// and one down, and a machine asking to join, as this node sees it at now.
func threeNodes(now time.Time) *fakeCluster {
	return &fakeCluster{cluster: Cluster{
		ID: "3f9a0c1d2e4b", SelfID: "n-self", JoinToken: testJoinToken,
		Nodes: []ClusterNode{
			{ID: "n-down", Name: "rig2", Address: "192.168.1.12:7443", State: NodeDown, LastSeen: now.Add(-42 * time.Second),
				GPUs: []string{"RTX 3090 24 GiB"}, Engines: nil},
			{ID: "n-self", Name: "rig0", Address: "192.168.1.10:7443", State: NodeUp, Self: true, LastSeen: now, Queued: 3,
				GPUs:    []string{"RTX 4090 24 GiB"},
				Engines: []ClusterEngine{{Worker: "rig0/gpu0", Model: "qwen3-14b-fp8", Running: 2, Full: true}}},
			{ID: "n-up", Name: "rig1", Address: "192.168.1.11:7443", State: NodeUp, LastSeen: now.Add(-1500 * time.Millisecond),
				Drained: "drained (GPU taken by another program)",
				GPUs:    []string{"RTX 4090 24 GiB", "RTX 4090 24 GiB"},
				Engines: []ClusterEngine{
					{Worker: "rig1/gpu0", Model: "qwen3-14b-fp8", Running: 1},
					{Worker: "rig1/gpu1", Model: "qwen3-14b-fp8", Running: 0},
				}},
		},
		JoinRequests: []JoinRequest{{ID: "jr-1", Name: "laptop", Address: "192.168.1.30:7443", Code: "482-193", Received: now.Add(-12 * time.Second)}},
	}}
}

func withCluster(src ClusterSource) harnessOption {
	return func(_ *Config, d *Deps) { d.Cluster = src }
}
