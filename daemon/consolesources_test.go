package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/api/store"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/console"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

func TestDecisionOf(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	d := decisionOf(router.Decision{
		RequestID: "req_1", Policy: "hearth", Worker: "sim/gpu1", Reason: router.ReasonLowestCost,
		PromptBlocks: 10, CachedBlocks: 8, PredictedHitRate: 0.8, Queued: time.Second, At: at,
		Candidates: []router.Candidate{
			{Worker: "sim/gpu0", CachedBlocks: 2, ActiveBlocks: 5, PendingPrefillTokens: 100, Cost: 3.5},
			{Worker: "sim/gpu1", CachedBlocks: 8, ActiveBlocks: 1, Cost: 0.5},
		},
	})
	if d.RequestID != "req_1" || d.Worker != "sim/gpu1" || d.Policy != "hearth" || d.PromptBlocks != 10 ||
		d.CachedBlocks != 8 || d.PredictedHitRate != 0.8 || d.Queued != time.Second || !d.At.Equal(at) {
		t.Errorf("decision %+v", d)
	}
	want := []console.Candidate{
		{Worker: "sim/gpu0", CachedBlocks: 2, ActiveBlocks: 5, PendingPrefillTokens: 100, Cost: 3.5},
		{Worker: "sim/gpu1", CachedBlocks: 8, ActiveBlocks: 1, Cost: 0.5},
	}
	if len(d.Candidates) != 2 || d.Candidates[0] != want[0] || d.Candidates[1] != want[1] {
		t.Errorf("candidates %+v, want %+v", d.Candidates, want)
	}
}

func TestEngineOf(t *testing.T) {
	const gib = 1 << 30
	gpu := nodes.NewGPU("n", 0)
	gpu.Name, gpu.MemoryTotal = "NVIDIA GeForce RTX 4090", 24*gib
	ready := hruntime.Status{Name: "n/gpu0", Model: "qwen3-14b-fp8", State: hruntime.StateReady,
		Profile: catalog.Profile{GPUBlocks: 1000, BlockBytes: 2 << 20, PrefillTokensPerSec: 9000}}
	model, ok := catalog.LookupModel(ready.Model)
	if !ok {
		t.Fatalf("the catalog does not know %s", ready.Model)
	}
	// The weights and the 100 blocks (10% of 1,000) running requests hold.
	inUse := uint64(catalog.MemoryOf(model, catalog.Layout{}, catalog.DefaultMaxBatchedTokens).WeightBytes) + 100*(2<<20)
	unknownModel := ready
	unknownModel.Model = "someone/unheard-of-7b"
	const reservation = 24 * gib * 9 / 10
	stats := hruntime.Stats{Running: 2, Waiting: 1, KVUsage: 0.1, PrefixQueries: 5000, PrefixHits: 4000, GenerationTokens: 700}
	for _, tc := range []struct {
		name      string
		status    hruntime.Status
		memUsed   uint64
		scrapeErr error
		wantMem   uint64
		wantErr   string
		// wantReserved: the figure is vLLM's reservation, not a reading;
		// wantInUse is then what of it holds data.
		wantReserved bool
		wantInUse    uint64
	}{
		{"a ready simulated GPU shows vLLM's reservation and what holds data", ready, 0, nil, reservation, "", true, inUse},
		{"a model the catalog does not know leaves the use unknown", unknownModel, 0, nil, reservation, "", true, 0},
		{"a measured use wins", ready, 3 * gib, nil, 3 * gib, "", false, 0},
		{"unreadable metrics are shown", ready, 0, errors.New("metrics: connection refused"), reservation, "metrics: connection refused", true, 0},
		{"a restarting engine claims nothing and says why", hruntime.Status{Name: "n/gpu0", State: hruntime.StateRestarting,
			LastError: "exited: signal: killed", Profile: ready.Profile}, 0, nil, 0, "restarting: exited: signal: killed", false, 0},
		{"a diagnosed failure shows the sentence apart", hruntime.Status{Name: "n/gpu0", State: hruntime.StateFailed,
			LastError: "failed to start 5 times in a row: exited: exit status 1: CUDA ran out of memory: lower --max-model-len or use a smaller model",
			Diagnosis: hruntime.Diagnosis{Cause: hruntime.CauseOutOfMemory, Message: "CUDA ran out of memory: lower --max-model-len or use a smaller model"}},
			0, nil, 0, "failed: failed to start 5 times in a row: exited: exit status 1", false, 0},
		{"a loading engine shows its phase", hruntime.Status{Name: "n/gpu0", State: hruntime.StateLoading,
			Load: hruntime.LoadState{Phase: hruntime.PhaseCapturing, Progress: 40}}, 0, nil, 0, "", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gpu
			g.MemoryUsed, g.MemoryUsageKnown = tc.memUsed, tc.memUsed > 0
			st := stats
			if tc.status.State != hruntime.StateReady {
				st = hruntime.Stats{}
			}
			e := engineOf(tc.status, g, st, tc.scrapeErr, router.WorkerLoad{CachedBlocks: 400})
			if e.MemoryUsed != tc.wantMem || e.MemoryTotal != 24*gib {
				t.Errorf("memory %d of %d, want %d", e.MemoryUsed, e.MemoryTotal, tc.wantMem)
			}
			if e.MemoryReserved != tc.wantReserved || e.MemoryInUse != tc.wantInUse {
				t.Errorf("reserved %v, in use %d; want %v, %d", e.MemoryReserved, e.MemoryInUse, tc.wantReserved, tc.wantInUse)
			}
			if e.Err != tc.wantErr || e.State != string(tc.status.State) {
				t.Errorf("state %q, error %q; want %q, %q", e.State, e.Err, tc.status.State, tc.wantErr)
			}
			if e.Diagnosis != tc.status.Diagnosis.Message {
				t.Errorf("diagnosis %q, want %q", e.Diagnosis, tc.status.Diagnosis.Message)
			}
			if wantPhase := tc.status.Load.Phase.Label(); e.LoadPhase != wantPhase ||
				wantPhase != "" && e.LoadProgress != tc.status.Load.Progress {
				t.Errorf("load %q %d%%, want %q %d%%", e.LoadPhase, e.LoadProgress, wantPhase, tc.status.Load.Progress)
			}
			if tc.status.State != hruntime.StateReady {
				return
			}
			// 10% of 1,000 blocks in use; the router knows of 400 cached.
			if e.TotalBlocks != 1000 || e.UsedBlocks != 100 || e.CachedFreeBlocks != 300 || e.Running != 2 || e.Waiting != 1 ||
				e.PrefixQueries != 5000 || e.PrefixHits != 4000 || e.GenerationTokens != 700 || e.UtilizationPct != -1 ||
				e.Worker != "n/gpu0" || e.PrefillTokensPerSec != 9000 {
				t.Errorf("engine %+v", e)
			}
		})
	}
}

// openTestDB opens a database file in a fresh directory.
func openTestDB(t *testing.T) *store.SQLite {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "hearth.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// fakeResolver records the aliases put in place, as api.Models.SetAliases
// does, refusing a name it was told to refuse.
type fakeResolver struct {
	aliases map[string]string
	refuse  string
}

func (g *fakeResolver) SetAliases(a map[string]string) error {
	if _, ok := a[g.refuse]; ok && g.refuse != "" {
		return fmt.Errorf("api: alias %q: refused", g.refuse)
	}
	g.aliases = a
	return nil
}

func TestSettingsStore(t *testing.T) {
	ctx := context.Background()
	start := map[string]string{"*": "m", "gpt-*": "m"}
	for _, tc := range []struct {
		name        string
		save        console.Settings
		refuse      string // the gateway refuses this alias
		wantErr     error
		wantPolicy  string
		wantAliases map[string]string
	}{
		{"a known policy applies", console.Settings{Policy: router.PolicyKV, Aliases: []console.Alias{{From: "*", To: "m"}, {From: "gpt-*", To: "m"}}},
			"", nil, router.PolicyKV, start},
		{"an unknown policy is refused", console.Settings{Policy: "fastest", Aliases: []console.Alias{{From: "*", To: "m"}}},
			"", console.ErrInvalidSettings, router.PolicyHearth, start},
		{"new aliases apply", console.Settings{Policy: router.PolicyKV, Aliases: []console.Alias{{From: "claude-*", To: "m"}}},
			"", nil, router.PolicyKV, map[string]string{"claude-*": "m"}},
		{"no aliases", console.Settings{Policy: router.PolicyKV},
			"", nil, router.PolicyKV, map[string]string{}},
		{"an alias to a model not served", console.Settings{Policy: router.PolicyKV, Aliases: []console.Alias{{From: "claude-*", To: "gpt-oss"}}},
			"", console.ErrInvalidSettings, router.PolicyHearth, start},
		{"a malformed pattern", console.Settings{Policy: router.PolicyKV, Aliases: []console.Alias{{From: "claude-[", To: "m"}}},
			"", console.ErrInvalidSettings, router.PolicyHearth, start},
		{"a name twice", console.Settings{Policy: router.PolicyKV, Aliases: []console.Alias{{From: "x", To: "m"}, {From: "x", To: "m"}}},
			"", console.ErrInvalidSettings, router.PolicyHearth, start},
		{"the gateway refuses", console.Settings{Policy: router.PolicyKV, Aliases: []console.Alias{{From: "x", To: "m"}}},
			"x", console.ErrInvalidSettings, router.PolicyHearth, start},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTestDB(t)
			gw := &fakeResolver{refuse: tc.refuse}
			s, err := newSettingsStore(ctx, db, slog.New(slog.DiscardHandler), router.PolicyHearth, []string{"m"}, start, gw)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(gw.aliases, start) {
				t.Fatalf("aliases in place at start: %v, want %v", gw.aliases, start)
			}
			err = s.SaveSettings(ctx, tc.save)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("SaveSettings: %v, want %v", err, tc.wantErr)
			}
			if s.Policy() != tc.wantPolicy {
				t.Errorf("policy %q, want %q", s.Policy(), tc.wantPolicy)
			}
			if !maps.Equal(gw.aliases, tc.wantAliases) || !maps.Equal(s.Aliases(), tc.wantAliases) {
				t.Errorf("gateway's aliases %v, settings' %v; want %v", gw.aliases, s.Aliases(), tc.wantAliases)
			}
			// What a restart finds: the save, or the command line when
			// the save was refused.
			again, err := newSettingsStore(ctx, db, slog.New(slog.DiscardHandler), router.PolicyHearth, []string{"m"}, start, &fakeResolver{})
			if err != nil {
				t.Fatal(err)
			}
			if again.Policy() != tc.wantPolicy || !maps.Equal(again.Aliases(), tc.wantAliases) {
				t.Errorf("after a restart: %s %v, want %s %v", again.Policy(), again.Aliases(), tc.wantPolicy, tc.wantAliases)
			}
		})
	}
}

// TestSavedSettingsThatNoLongerFit: a restart with another --model skips
// saved aliases to the old one and keeps the command line's.
func TestSavedSettingsThatNoLongerFit(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	if err := db.SaveSettings(ctx, store.Settings{Policy: router.PolicyKV, Aliases: []store.Alias{{From: "*", To: "old-model"}}}); err != nil {
		t.Fatal(err)
	}
	s, err := newSettingsStore(ctx, db, slog.New(slog.DiscardHandler), router.PolicyHearth, []string{"new-model"}, map[string]string{"*": "new-model"}, &fakeResolver{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Policy() != router.PolicyHearth || !maps.Equal(s.Aliases(), map[string]string{"*": "new-model"}) {
		t.Errorf("settings %s %v, want the command line's", s.Policy(), s.Aliases())
	}
}

func TestKeyStoreAcceptsCommandLineKeys(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	k := &keyStore{db: db, static: []string{"sk-cli"}}
	if has, err := (apiKeys{&keyStore{db: db}}).HasKeys(ctx); has || err != nil {
		t.Errorf("no key at all: HasKeys = %v, %v; want false", has, err)
	}
	checker := apiKeys{k}
	if has, err := checker.HasKeys(ctx); !has || err != nil || !checker.required(ctx) {
		t.Errorf("with a command-line key: HasKeys = %v, %v; want true", has, err)
	}
	created, secret, err := k.CreateKey(ctx, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, secret   string
		console, asAPI bool
	}{
		{"a stored key", secret, true, true},
		{"a command-line key", "sk-cli", true, true},
		{"an unknown key", "sk-other", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := k.CheckKey(ctx, tc.secret)
			if (err == nil) != tc.console || (err != nil && !errors.Is(err, console.ErrNoSuchKey)) {
				t.Errorf("console login: %v, want ok=%v", err, tc.console)
			}
			if err := checker.CheckKey(ctx, tc.secret); (err == nil) != tc.asAPI {
				t.Errorf("API check: %v, want ok=%v", err, tc.asAPI)
			}
		})
	}
	if has, err := checker.HasKeys(ctx); !has || err != nil {
		t.Errorf("HasKeys = %v, %v; want true", has, err)
	}
	// The API check above noted the key's use; the rest is as created.
	keys, err := k.Keys(ctx)
	if err != nil || len(keys) != 1 || keys[0].LastUsed.IsZero() {
		t.Fatalf("Keys = %+v, %v; want one key with a last use", keys, err)
	}
	got := keys[0]
	got.LastUsed = time.Time{}
	if got != created {
		t.Errorf("Keys = %+v; want [%+v]", keys, created)
	}
	if !checker.IsAdminKey(ctx, "sk-cli") || checker.IsAdminKey(ctx, secret) || checker.IsAdminKey(ctx, "sk-other") {
		t.Error("IsAdminKey: want the command-line key only (the stored one is an inference key)")
	}
	if err := k.RevokeKey(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{created.ID, staticKeyID} {
		if err := k.RevokeKey(ctx, id); !errors.Is(err, console.ErrNoSuchKey) {
			t.Errorf("revoke %s: %v, want console.ErrNoSuchKey", id, err)
		}
	}
	if _, err := k.CheckKey(ctx, secret); !errors.Is(err, console.ErrNoSuchKey) {
		t.Errorf("revoked key: %v, want console.ErrNoSuchKey", err)
	}
}

// TestEngineOfTelemetry: a real GPU's reading reaches the card: memory by
// owner (the engine's own process against a foreign one), power, and a
// lost GPU with the driver's words.
func TestEngineOfTelemetry(t *testing.T) {
	const gib = 1 << 30
	g := nodes.NewGPU("n", 0)
	g.Name, g.MemoryTotal, g.MemoryUsed, g.MemoryUsageKnown = "NVIDIA GeForce RTX 4090", 24*gib, 23*gib, true
	g.PowerDrawW, g.PowerLimitW, g.UtilizationPct, g.TemperatureC = 310, 450, 97, 71
	g.Processes = []nodes.Process{{PID: os.Getpid(), UsedBytes: 20 * gib, Name: "python3"}, {PID: 1, UsedBytes: 2 * gib, Name: "game.exe"}}
	g.ProcessesKnown = true
	st := hruntime.Status{Name: "n/gpu0", State: hruntime.StateReady, Identity: hruntime.Identity{PID: os.Getpid()}}
	e := engineOf(st, g, hruntime.Stats{}, nil, router.WorkerLoad{})
	if !e.MemoryByOwnerKnown || e.MemoryHearth != 20*gib || e.MemoryOther != 2*gib || e.MemoryUsed != 23*gib {
		t.Errorf("memory: hearth %d, other %d, used %d (known %v)", e.MemoryHearth, e.MemoryOther, e.MemoryUsed, e.MemoryByOwnerKnown)
	}
	if len(e.OtherProcesses) != 1 || e.OtherProcesses[0] != (console.GPUProcess{Name: "game.exe", PID: 1, UsedBytes: 2 * gib}) {
		t.Errorf("other processes %+v", e.OtherProcesses)
	}
	if e.PowerDrawW != 310 || e.PowerLimitW != 450 || e.UtilizationPct != 97 || e.TemperatureC != 71 || e.GPULost {
		t.Errorf("telemetry %+v", e)
	}

	lost := nodes.NewGPU("n", 0)
	lost.Lost, lost.Err = true, "GPU is lost"
	e = engineOf(hruntime.Status{Name: "n/gpu0", State: hruntime.StateStopped, LastError: "GPU 0 lost: GPU is lost"}, lost, hruntime.Stats{}, nil, router.WorkerLoad{})
	if !e.GPULost || e.GPUErr != "GPU is lost" || e.MemoryByOwnerKnown || e.PowerDrawW >= 0 {
		t.Errorf("lost GPU's card: %+v", e)
	}
}

// The Requests page names each request's client, session and first-token
// time: the adapter carries them from the gateway's record.
func TestTrafficSourceRequests(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	traffic := api.NewTraffic(api.TrafficLimits{})
	traffic.Record(api.RequestRecord{
		ID: "r1", At: at, SessionID: "0f3a9c21-7b44", Client: "claude-code", Kind: api.KindTurn, Worker: "n/gpu0",
		Status: 200, PromptTokens: 2000, CachedTokens: 1600, CacheReported: true, OutputTokens: 90, TTFT: 412 * time.Millisecond,
	}, nil, nil, at.Add(2*time.Second))
	got, err := (&trafficSource{traffic: traffic}).RequestsSince(context.Background(), at.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	want := console.Request{
		ID: "r1", At: at, SessionID: "0f3a9c21-7b44", Client: "claude-code", Worker: "n/gpu0",
		PromptTokens: 2000, CachedTokens: 1600, OutputTokens: 90, TTFT: 412 * time.Millisecond,
	}
	if len(got) != 1 || got[0] != want {
		t.Errorf("requests %+v, want [%+v]", got, want)
	}
}

// TestEngineOfTiers: a card's tiers come from the engine's metrics where
// they tell, the host-RAM tier's occupancy from the router's index where
// they do not, and bytes moved from blocks at the engine's block size.
func TestEngineOfTiers(t *testing.T) {
	st := hruntime.Status{Name: "n/gpu0", State: hruntime.StateReady,
		Profile: catalog.Profile{GPUBlocks: 1000, CPUBlocks: 500, BlockBytes: 2 << 20}}
	routed := router.WorkerLoad{CachedBlocks: 300, RAMBlocks: 120}
	told := hruntime.Stats{RAMHitTokens: 160, StoreHitTokens: 320, RAMBlocks: 90, LoadedBlocks: 3, StoredBlocks: 5}
	e := engineOf(st, nodes.GPU{}, told, nil, routed)
	if e.RAMTotalBlocks != 500 || e.RAMUsedBlocks != 90 || e.RAMHitTokens != 160 || e.DiskHitTokens != 320 ||
		e.LoadedBytes != 3*(2<<20) || e.StoredBytes != 5*(2<<20) {
		t.Errorf("engine told its tiers: %+v", e)
	}
	told.RAMBlocks = -1 // the engine does not say what its RAM tier holds
	if e := engineOf(st, nodes.GPU{}, told, nil, routed); e.RAMUsedBlocks != 120 {
		t.Errorf("RAMUsedBlocks = %d, want the router's 120", e.RAMUsedBlocks)
	}
}
