package console

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/console/components"
)

const mib = 1 << 20

func TestSamplerTierRates(t *testing.T) {
	cfg := testConfig()
	src := &fakeSources{engines: []Engine{{
		Worker: "w0", TotalBlocks: 100, RAMTotalBlocks: 400,
		PrefixQueries: 10_000, PrefixHits: 5000, RAMHitTokens: 2000, DiskHitTokens: 1000,
		LoadedBytes: 100 * mib, StoredBytes: 100 * mib,
	}}}
	s := newSampler(cfg, Deps{Engines: src})
	ctx := context.Background()
	now := t0

	tv := s.collect(ctx, now, true).workers["w0"].tiers
	for name, v := range map[string]float64{"GPU share": tv.gpuShare, "RAM share": tv.ramShare, "SSD share": tv.diskShare,
		"loaded/s": tv.loadedPerSec, "stored/s": tv.storedPerSec} {
		if !math.IsNaN(v) {
			t.Errorf("%s after one sample = %v; a counter's total since engine start is no rate", name, v)
		}
	}

	// 2 s later: 1000 tokens looked up, 500 hit on the GPU, 200 loaded
	// from RAM, 100 from SSD; 2 MiB loaded, 4 MiB stored.
	e := &src.engines[0]
	e.PrefixQueries, e.PrefixHits, e.RAMHitTokens, e.DiskHitTokens = 11_000, 5500, 2200, 1100
	e.LoadedBytes, e.StoredBytes = 102*mib, 104*mib
	now = now.Add(2 * time.Second)
	tv = s.collect(ctx, now, true).workers["w0"].tiers
	if tv.gpuShare != 0.5 || tv.ramShare != 0.2 || tv.diskShare != 0.1 {
		t.Errorf("shares GPU %v, RAM %v, SSD %v; want 0.5, 0.2, 0.1", tv.gpuShare, tv.ramShare, tv.diskShare)
	}
	if tv.loadedPerSec != 1*mib || tv.storedPerSec != 2*mib {
		t.Errorf("loaded %v B/s, stored %v B/s; want 1 MiB/s and 2 MiB/s", tv.loadedPerSec, tv.storedPerSec)
	}

	// The engine restarts: every counter falls, and counts from zero
	// rather than as a huge negative delta.
	e.PrefixQueries, e.PrefixHits, e.RAMHitTokens, e.DiskHitTokens = 1000, 100, 300, 0
	e.LoadedBytes, e.StoredBytes = 1*mib, 0
	now = now.Add(2 * time.Second)
	tv = s.collect(ctx, now, true).workers["w0"].tiers
	if tv.gpuShare != 600.0/2000 || tv.ramShare != 500.0/2000 || tv.diskShare != 100.0/2000 {
		t.Errorf("shares across a restart GPU %v, RAM %v, SSD %v; want 0.3, 0.25, 0.05", tv.gpuShare, tv.ramShare, tv.diskShare)
	}
	if tv.loadedPerSec != 0.5*mib || tv.storedPerSec != 0 {
		t.Errorf("rates across a restart: loaded %v, stored %v; want 0.5 MiB/s and 0", tv.loadedPerSec, tv.storedPerSec)
	}

	// A worker not read for longer than two ticks and a bucket has no
	// current traffic; its shares over the window stay.
	now = now.Add(2*cfg.Interval + s.bucketLen() + time.Second)
	tv = s.collect(ctx, now, false).workers["w0"].tiers
	if !math.IsNaN(tv.loadedPerSec) || !math.IsNaN(tv.storedPerSec) {
		t.Errorf("stale rates loaded %v, stored %v; want none", tv.loadedPerSec, tv.storedPerSec)
	}
	if tv.gpuShare != 0.3 {
		t.Errorf("GPU share in the window = %v, want 0.3", tv.gpuShare)
	}
}

func TestTierShares(t *testing.T) {
	tests := []struct {
		name                   string
		queries, gpu, ram, ssd int64
		want                   [3]float64
	}{
		{"split", 1000, 600, 200, 100, [3]float64{0.6, 0.2, 0.1}},
		{"nothing found", 1000, 0, 0, 0, [3]float64{0, 0, 0}},
		// Counters read a moment apart claim more than was looked up.
		{"over-claimed", 100, 80, 30, 30, [3]float64{0.8, 0.2, 0}},
		{"GPU alone over", 100, 150, 10, 0, [3]float64{1, 0, 0}},
		{"negative", 100, -5, 10, 0, [3]float64{0, 0.1, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, r, d := tierShares(tc.queries, tc.gpu, tc.ram, tc.ssd)
			got := [3]float64{g, r, d}
			for i := range got {
				if math.Abs(got[i]-tc.want[i]) > 1e-9 {
					t.Errorf("tierShares = %v, want %v", got, tc.want)
					break
				}
			}
			if g+r+d > 1+1e-9 {
				t.Errorf("shares sum to %v", g+r+d)
			}
		})
	}
}

func TestTiersVM(t *testing.T) {
	cfg := testConfig()
	v := tierView{gpuShare: 0.5, ramShare: 0.25, diskShare: 0.125, loadedPerSec: 3 * mib, storedPerSec: 0}
	store := &KVStore{Node: "rig0", UsedBytes: 100 << 30, CapacityBytes: 400 << 30}
	bars := func(tv components.Tiers) string {
		var names []string
		for _, b := range tv.Bars {
			names = append(names, b.Name)
		}
		return strings.Join(names, " ")
	}
	tests := []struct {
		name      string
		e         Engine
		store     *KVStore
		shown     bool
		bars      string
		ram, ssd  bool // the legend names the tier
		recompute string
	}{
		{name: "no tier below the GPU", e: Engine{TotalBlocks: 100}},
		{name: "RAM only", e: Engine{TotalBlocks: 100, UsedBlocks: 10, RAMTotalBlocks: 50, RAMUsedBlocks: 20},
			shown: true, bars: "GPU RAM", ram: true, recompute: "13%"},
		{name: "node store, no RAM tier", e: Engine{TotalBlocks: 100}, store: store,
			shown: true, bars: "GPU SSD", ssd: true, recompute: "13%"},
		{name: "both", e: Engine{TotalBlocks: 100, RAMTotalBlocks: 50}, store: store,
			shown: true, bars: "GPU RAM SSD", ram: true, ssd: true, recompute: "13%"},
		// The daemon has no store source, yet the engine loaded from SSD.
		{name: "SSD loads without a store", e: Engine{TotalBlocks: 100, DiskHitTokens: 5},
			shown: true, bars: "GPU", ssd: true, recompute: "13%"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tv := tiersVM(cfg, tc.e, v, tc.store)
			if tv.Shown != tc.shown {
				t.Fatalf("shown = %v, want %v", tv.Shown, tc.shown)
			}
			if !tc.shown {
				return
			}
			if got := bars(tv); got != tc.bars {
				t.Errorf("bars %q, want %q", got, tc.bars)
			}
			if tv.Shares.HasRAM != tc.ram || tv.Shares.HasSSD != tc.ssd {
				t.Errorf("legend names RAM %v, SSD %v; want %v, %v", tv.Shares.HasRAM, tv.Shares.HasSSD, tc.ram, tc.ssd)
			}
			if tv.Shares.GPU != "50%" || tv.Shares.Recomputed != tc.recompute {
				t.Errorf("shares GPU %s, recomputed %s", tv.Shares.GPU, tv.Shares.Recomputed)
			}
			if tv.Shares.GPUW != "150" || tv.Shares.RAMX != "150" || tv.Shares.RAMW != "75" || tv.Shares.SSDX != "225" || tv.Shares.SSDW != "37.5" {
				t.Errorf("share geometry %+v", tv.Shares)
			}
			if tv.Loaded != "3.0 MiB/s" || tv.Stored != "0 B/s" {
				t.Errorf("traffic loaded %s, stored %s", tv.Loaded, tv.Stored)
			}
		})
	}

	// Bars: blocks held (running and reusable) on the GPU, clamped; the
	// SSD store's by bytes, marked as the node's.
	tv := tiersVM(cfg, Engine{TotalBlocks: 100, UsedBlocks: 70, CachedFreeBlocks: 50, RAMTotalBlocks: 40, RAMUsedBlocks: 10}, v, store)
	gpu, ram, ssd := tv.Bars[0], tv.Bars[1], tv.Bars[2]
	if gpu.Pct != "100%" || gpu.UsedW != "300" || gpu.Text != "100 / 100 blocks" {
		t.Errorf("GPU bar %+v", gpu)
	}
	if ram.Pct != "25%" || ram.UsedW != "75" || ram.Text != "10 / 40 blocks" || ram.Shared {
		t.Errorf("RAM bar %+v", ram)
	}
	if ssd.Pct != "25%" || ssd.UsedW != "75" || ssd.Text != "100.0 GiB / 400.0 GiB" || !ssd.Shared {
		t.Errorf("SSD bar %+v", ssd)
	}

	// Without lookups in the window there are no shares, not zero ones.
	tv = tiersVM(cfg, Engine{RAMTotalBlocks: 10}, unknownTiers, nil)
	if tv.Shares.Known || tv.Shares.GPU != noValue || tv.Loaded != noValue {
		t.Errorf("unknown shares %+v, loaded %s", tv.Shares, tv.Loaded)
	}
	if tv.Bars[0].Known {
		t.Error("a GPU bar for an engine that reports no block count")
	}
}

// A card for an engine without a RAM tier draws no RAM bar, and the store
// of its node appears on it and in the node's panel.
func TestOverviewTiersRender(t *testing.T) {
	cfg := testConfig()
	src := &fakeSources{
		engines: []Engine{
			{Worker: "a", Node: "rig0", TotalBlocks: 100, RAMTotalBlocks: 50},
			{Worker: "b", Node: "rig1", TotalBlocks: 100},
			{Worker: "c", Node: "rig2", TotalBlocks: 100},
		},
		stores: []KVStore{{Node: "rig1", Dir: "/ssd/kv", UsedBytes: 1 << 30, CapacityBytes: 4 << 30, FreeDiskBytes: -1}},
	}
	s := newSampler(cfg, Deps{Engines: src, KVStores: src})
	vm := overviewVM(cfg, s.collect(context.Background(), t0, false))
	var buf bytes.Buffer
	if err := components.OverviewBody(vm).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	card := func(worker string) string {
		start := strings.Index(page, `id="`+domID("gpu-", worker)+`"`)
		if start < 0 {
			t.Fatalf("no card for %s", worker)
		}
		end := strings.Index(page[start:], "</article>")
		return page[start : start+end]
	}
	if a := card("a"); !strings.Contains(a, `data-tier="RAM"`) || strings.Contains(a, `data-tier="SSD"`) {
		t.Error("card a: want a RAM bar and no SSD bar (its node has no store)")
	}
	if b := card("b"); strings.Contains(b, `data-tier="RAM"`) || !strings.Contains(b, `data-tier="SSD"`) {
		t.Error("card b: want no RAM bar, and its node's SSD bar")
	}
	if c := card("c"); strings.Contains(c, "KV tiers") {
		t.Error("card c has no tier below the GPU, yet shows tiers")
	}
	// Before the sampler has recorded anything the figures are unknown,
	// not zero.
	if b := card("b"); !strings.Contains(b, "GPU hits –") || !strings.Contains(b, "<dt>Loaded/s</dt><dd>–</dd>") {
		t.Error("card b before any sample: want unknown shares and traffic, not zero")
	}
	if !strings.Contains(page, `id="kv-stores"`) || !strings.Contains(page, "/ssd/kv") || strings.Count(page, `class="card store"`) != 1 {
		t.Error("want one store panel, for rig1")
	}

	// No store source: no panel.
	vm = overviewVM(cfg, newSampler(cfg, Deps{Engines: src}).collect(context.Background(), t0, false))
	if len(vm.Stores) != 0 || vm.StoresErr != "" {
		t.Errorf("without a store source: %d panels, error %q", len(vm.Stores), vm.StoresErr)
	}
	if vm.GPUs[1].Tiers.Shown {
		t.Error("without a store source, card b has no tier below the GPU")
	}
}

func TestSamplerStoreRates(t *testing.T) {
	cfg := testConfig()
	src := &fakeSources{stores: []KVStore{{
		Node: "rig0", Hits: 1000, Misses: 1000, EvictedBlocks: 50, CorruptDropped: 1, ReadBytes: 100 * mib, WrittenBytes: 100 * mib,
	}}}
	s := newSampler(cfg, Deps{KVStores: src})
	ctx := context.Background()
	now := t0

	v := s.collect(ctx, now, true).storeViews["rig0"]
	if !math.IsNaN(v.hitRate) || !math.IsNaN(v.readPerSec) || !math.IsNaN(v.writePerSec) || v.evicted != 0 || v.corrupt != 0 {
		t.Errorf("after one sample %+v; want no rates and nothing counted", v)
	}

	st := &src.stores[0]
	step := func(hits, misses, evicted, corrupt, read, written int64) storeView {
		st.Hits, st.Misses, st.EvictedBlocks, st.CorruptDropped, st.ReadBytes, st.WrittenBytes = hits, misses, evicted, corrupt, read, written
		now = now.Add(2 * time.Second)
		return s.collect(ctx, now, true).storeViews["rig0"]
	}
	v = step(1030, 1010, 53, 2, 120*mib, 110*mib)
	if v.hitRate != 0.75 || v.evicted != 3 || v.corrupt != 1 || v.readPerSec != 10*mib || v.writePerSec != 5*mib {
		t.Errorf("after 2 s %+v; want hit rate 0.75, 3 evicted, 1 corrupt, 10 MiB/s read, 5 MiB/s written", v)
	}

	// The daemon restarts: counters fall and count from zero.
	v = step(5, 5, 1, 0, 2*mib, 0)
	if v.hitRate != 35.0/50 || v.evicted != 4 || v.corrupt != 1 || v.readPerSec != 1*mib || v.writePerSec != 0 {
		t.Errorf("across a restart %+v; want hit rate 0.7, 4 evicted, 1 corrupt, 1 MiB/s read, 0 written", v)
	}

	// A reading that failed counts nothing; the next good one counts from
	// the last good one.
	st.Err = "stat /ssd/kv: input/output error"
	v = step(1000, 1000, 1000, 1000, 1000*mib, 1000*mib)
	if v.evicted != 4 || v.corrupt != 1 {
		t.Errorf("a failed reading was counted: %+v", v)
	}
	st.Err = ""
	v = step(25, 5, 1, 0, 2*mib, 0)
	if v.hitRate != 55.0/70 {
		t.Errorf("after a failed reading hit rate = %v, want %v", v.hitRate, 55.0/70)
	}

	// A store gone for longer than the chart window is forgotten.
	src.stores = nil
	now = now.Add(cfg.ChartWindow + time.Second)
	if snap := s.collect(ctx, now, true); len(s.stores) != 0 || len(snap.storeViews) != 0 {
		t.Errorf("a gone store is still kept: %d histories", len(s.stores))
	}
}

func TestStoreCardVM(t *testing.T) {
	cfg := testConfig()
	c := storeCardVM(cfg, &KVStore{Node: "rig0", UsedBytes: 600 << 30, CapacityBytes: 500 << 30, FreeDiskBytes: 0, Blocks: 12},
		storeView{hitRate: 0.5, readPerSec: 1536, writePerSec: math.NaN(), evicted: 7, corrupt: 0})
	if c.Bar.Pct != "100%" || c.Bar.UsedW != "300" || c.Bar.Shared {
		t.Errorf("over-full store bar %+v; want clamped to full, not marked shared on its own panel", c.Bar)
	}
	if c.FreeDisk != "0 B" || c.HitRate != "50%" || c.Read != "1.5 KiB/s" || c.Write != noValue || c.Evicted != "7" || c.CorruptSeen {
		t.Errorf("store card %+v", c)
	}
	c = storeCardVM(cfg, &KVStore{Node: "rig1", UsedBytes: 1 << 30, FreeDiskBytes: -1}, unknownStore)
	if c.Bar.Known || c.Bar.Text != "1.0 GiB, no capacity set" || c.FreeDisk != noValue || c.HitRate != noValue {
		t.Errorf("store without capacity or disk reading %+v", c)
	}
	if c := storeCardVM(cfg, &KVStore{}, storeView{corrupt: 3}); !c.CorruptSeen || c.Corrupt != "3" {
		t.Errorf("corrupt blocks not marked: %+v", c)
	}
}

func TestStoreSourceError(t *testing.T) {
	cfg := testConfig()
	src := &fakeSources{storesErr: errors.New("index locked")}
	vm := overviewVM(cfg, newSampler(cfg, Deps{KVStores: src}).collect(context.Background(), t0, true))
	if vm.StoresErr != "Cannot read the SSD stores: KV stores: index locked" {
		t.Errorf("error %q", vm.StoresErr)
	}
}

func TestFmtBytes(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536 * mib, "1.5 GiB"}, {5 << 40, "5.0 TiB"},
	}
	for _, tc := range tests {
		if got := fmtBytes(tc.in); got != tc.want {
			t.Errorf("fmtBytes(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := fmtByteRate(math.NaN()); got != noValue {
		t.Errorf("unknown rate = %q", got)
	}
}
