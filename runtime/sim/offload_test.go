package sim

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/kvevents"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// TestOffloadConfig: the host-RAM tier's size follows from the GiB asked for
// and the bytes of one block, and bad sizes are refused.
func TestOffloadConfig(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		wantBlocks int
		wantErr    bool
	}{
		{"off by default", Config{}, 0, false},
		// Qwen3-14B: 160 KiB per token, 2.5 MiB per 16-token block.
		{"32 GiB of qwen3-14b", Config{CPUOffloadGiB: 32}, 13107, false}, // 32 GiB / 2.5 MiB
		{"explicit blocks win", Config{CPUOffloadGiB: 32, NumCPUBlocks: 10}, 10, false},
		{"negative size", Config{CPUOffloadGiB: -1}, 0, true},
		{"negative blocks", Config{NumCPUBlocks: -1}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.GPU, tt.cfg.Model = "rtx4090", "qwen3-14b-fp8"
			err := tt.cfg.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got := tt.cfg.withDefaults().NumCPUBlocks; got != tt.wantBlocks {
				t.Errorf("NumCPUBlocks = %d, want %d", got, tt.wantBlocks)
			}
		})
	}
}

// runOne adds one request and steps until it finishes.
func runOne(t *testing.T, d *driver, id string, prompt []uint32, outLen int) []TokenOutput {
	t.Helper()
	mustAdd(t, d.core, d.now, &Request{ID: id, Prompt: prompt, Output: tokens(7, outLen)})
	d.run(t)
	return d.outputs[id]
}

// TestOffloadWriteThrough: blocks enter host RAM when they are computed, not
// when the GPU evicts them, each announced by a CPU BlockStored without
// tokens; blocks already there are not stored again.
func TestOffloadWriteThrough(t *testing.T) {
	tests := []struct {
		name      string
		prompts   [][]uint32
		wantCPU   int // blocks in host RAM at the end
		wantStore int // blocks announced by CPU BlockStored events
	}{
		{"one prompt", [][]uint32{tokens(0, 160)}, 10, 10},
		{"shared prefix stored once", [][]uint32{tokens(0, 160), concat(tokens(0, 160), tokens(5000, 64))}, 14, 14},
		{"partial block not stored", [][]uint32{tokens(0, 100)}, 6, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := newFakeSink(t)
			c := newCore(t, Config{NumGPUBlocks: 64, NumCPUBlocks: 64, MaxModelLen: 1024}, sink)
			d := newDriver(c)
			for i, p := range tt.prompts {
				runOne(t, d, fmt.Sprint("r", i), p, 1)
			}
			if got := len(c.CachedCPUBlockHashes()); got != tt.wantCPU {
				t.Errorf("host RAM holds %d blocks, want %d", got, tt.wantCPU)
			}
			if got := sink.countBlocks(kvevents.BlockStored, kvevents.MediumCPU); got != tt.wantStore {
				t.Errorf("CPU BlockStored events announce %d blocks, want %d", got, tt.wantStore)
			}
			if n := sink.countMedium(kvevents.BlockRemoved, kvevents.MediumGPU); n != 0 {
				t.Errorf("%d GPU evictions in a roomy cache: the tier must not wait for them", n)
			}
			// Write-through: every GPU-cached block is in host RAM too.
			cpu := c.CachedCPUBlockHashes()
			for _, h := range c.CachedBlockHashes() {
				if _, ok := slices.BinarySearch(cpu, h); !ok {
					t.Errorf("GPU block %x not offloaded", h)
				}
			}
		})
	}
}

// TestOffloadReload: a prefix evicted from the GPU but held in host RAM is
// loaded, not recomputed: the prefill computes only the rest, the step
// pays the PCIe time of the loaded blocks, the GPU counters do not count
// them and the external ones do.
func TestOffloadReload(t *testing.T) {
	const bs = 16
	prefix := tokens(0, 40*bs) // 40 blocks
	next := concat(prefix, tokens(90_000, 3*bs+5))
	tests := []struct {
		name       string
		cpuBlocks  int
		wantLoaded int // blocks loaded from host RAM for the second turn
	}{
		{"no tier recomputes", 0, 0},
		{"tier reloads the evicted prefix", 200, 40},
		{"tier too small for the prefix", 30, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := newFakeSink(t)
			c := newCore(t, Config{NumGPUBlocks: 48, NumCPUBlocks: tt.cpuBlocks, MaxModelLen: 768}, sink)
			d := newDriver(c)
			runOne(t, d, "turn1", prefix, 1)
			runOne(t, d, "other", tokens(50_000, 48*bs-1), 1) // evicts turn1's blocks from the GPU
			if got := c.CachedPrefixBlocks(prefix); got != 0 {
				t.Fatalf("GPU still holds %d blocks of the prefix", got)
			}
			before := c.Stats()

			mustAdd(t, c, d.now, &Request{ID: "turn2", Prompt: next, Output: tokens(7, 1)})
			// Price the step the engine should run: the new tokens after
			// the loaded prefix, plus the PCIe time of the loaded blocks.
			computed := tt.wantLoaded * bs
			var load catalog.StepLoad
			load.Add(computed, len(next)-computed)
			want := c.timing.StepDuration(&load)
			if tt.wantLoaded > 0 {
				bytes := float64(tt.wantLoaded * bs * c.model.KVBytesPerToken())
				want += time.Duration(bytes / (c.gpu.PCIeGBps * 1e9) * float64(time.Second))
			}
			res := d.step(t)
			if res.NumTokens != len(next)-computed {
				t.Errorf("step computed %d tokens, want %d", res.NumTokens, len(next)-computed)
			}
			if res.Duration != want {
				t.Errorf("step took %v, want %v", res.Duration, want)
			}
			d.run(t)
			out := d.outputs["turn2"]
			if len(out) == 0 || out[0].CachedTokens != computed {
				t.Fatalf("outputs %+v, want CachedTokens %d", out, computed)
			}
			s := c.Stats()
			if got := s.PrefixHits - before.PrefixHits; got != 0 {
				t.Errorf("GPU prefix hits grew by %d, want 0 (loads are external hits)", got)
			}
			if got := s.ExternalPrefixHits - before.ExternalPrefixHits; got != int64(computed) {
				t.Errorf("external hits grew by %d, want %d", got, computed)
			}
			// No GPU hit here, so the connector is asked about every token.
			if tt.cpuBlocks > 0 && s.ExternalPrefixQueries-before.ExternalPrefixQueries != int64(len(next)) {
				t.Errorf("external queries grew by %d, want %d", s.ExternalPrefixQueries-before.ExternalPrefixQueries, len(next))
			}
			if tt.cpuBlocks == 0 && s.ExternalPrefixQueries != 0 {
				t.Errorf("external queries %d without a tier", s.ExternalPrefixQueries)
			}
			// The loaded blocks are cached on the GPU again.
			if got := c.CachedPrefixBlocks(prefix); tt.wantLoaded > 0 && got != 40 {
				t.Errorf("GPU holds %d prefix blocks after the load, want 40", got)
			}
		})
	}
	// Loading 40 blocks of Qwen3-14B over 25 GB/s PCIe takes 4.2 ms,
	// recomputing them far longer: the reload must be the faster turn.
	ttft := func(cpuBlocks int) time.Duration {
		c := newCore(t, Config{NumGPUBlocks: 48, NumCPUBlocks: cpuBlocks, MaxModelLen: 768}, nil)
		d := newDriver(c)
		runOne(t, d, "turn1", prefix, 1)
		runOne(t, d, "other", tokens(50_000, 48*bs-1), 1)
		start := d.now
		runOne(t, d, "turn2", next, 1)
		return d.first["turn2"] - start
	}
	if reload, recompute := ttft(200), ttft(0); reload >= recompute {
		t.Errorf("TTFT with reload %v, without %v: the reload must be faster", reload, recompute)
	}
}

// TestOffloadLRUEviction: a full tier evicts its least recently used blocks,
// deepest block of a chain first, in one CPU BlockRemoved; a store larger
// than the whole tier is dropped.
func TestOffloadLRUEviction(t *testing.T) {
	const bs = 16
	a := tokens(0, 5*bs)
	b := tokens(10_000, 5*bs)
	b3 := tokens(20_000, 3*bs)
	c3 := tokens(30_000, 3*bs)
	tests := []struct {
		name        string
		cpuBlocks   int
		prompts     [][]uint32
		wantRemoved [][]int // per CPU BlockRemoved: (prompt, block) of each hash
		wantHeld    int
	}{
		{"fits", 10, [][]uint32{a, b}, nil, 10},
		{"second prompt evicts first's deepest blocks", 8, [][]uint32{a, b}, [][]int{{0, 4}, {0, 3}}, 8},
		// Looking a up again touches its blocks, so b3's go first.
		{"lookup touch protects a prefix", 9, [][]uint32{a, b3, a, c3}, [][]int{{1, 2}, {1, 1}}, 9},
		{"untouched prefix goes first", 9, [][]uint32{a, b3, c3}, [][]int{{0, 4}, {0, 3}}, 9},
		{"store larger than the tier dropped", 4, [][]uint32{a}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := newFakeSink(t)
			c := newCore(t, Config{NumGPUBlocks: 64, NumCPUBlocks: tt.cpuBlocks, MaxModelLen: 1024}, sink)
			d := newDriver(c)
			var chains [][]uint64
			for i, p := range tt.prompts {
				runOne(t, d, fmt.Sprint("r", i), p, 1)
				var hs []uint64
				parent := c.root
				for j := 0; (j+1)*bs <= len(p); j++ {
					parent = chainHash(parent, p[j*bs:(j+1)*bs])
					hs = append(hs, parent)
				}
				chains = append(chains, hs)
			}
			var removed [][]uint64
			for _, e := range sink.events {
				if e.Kind == kvevents.BlockRemoved && e.Medium == kvevents.MediumCPU {
					removed = append(removed, e.BlockHashes)
				}
			}
			var want [][]uint64
			if len(tt.wantRemoved) > 0 {
				var batch []uint64
				for _, pb := range tt.wantRemoved {
					batch = append(batch, chains[pb[0]][pb[1]])
				}
				want = append(want, batch)
			}
			if !slices.EqualFunc(removed, want, slices.Equal) {
				t.Errorf("CPU BlockRemoved %x, want %x", removed, want)
			}
			if got := len(c.CachedCPUBlockHashes()); got != tt.wantHeld {
				t.Errorf("tier holds %d blocks, want %d", got, tt.wantHeld)
			}
		})
	}
}

// TestStepDoesNotAllocateWithOffload: the host-RAM tier keeps Step
// allocation-free, storing, evicting and loading included.
func TestStepDoesNotAllocateWithOffload(t *testing.T) {
	c := newCore(t, Config{NumGPUBlocks: 400, NumCPUBlocks: 300, MaxModelLen: 4096}, discardSink{})
	for i := range 16 {
		mustAdd(t, c, 0, &Request{ID: fmt.Sprint(i), Prompt: tokens(i*1000, 300), Output: tokens(1, 2000)})
	}
	c.Step(0)
	c.Step(0)
	if n := testing.AllocsPerRun(200, func() { c.Step(0) }); n != 0 {
		t.Errorf("Step allocates %v times per run, want 0", n)
	}
}

// TestOffloadEventsHashForm: the vLLM flavour names its host-RAM blocks as
// vLLM v0.20's offloading connector does, by their hashes as bytes (the
// GPU's int being their low 64 bits), one BlockStored per store with every
// block it stored; the SGLang flavour's host tier sends ints as SGLang does.
func TestOffloadEventsHashForm(t *testing.T) {
	for _, kind := range []hruntime.Kind{hruntime.KindVLLM, hruntime.KindSGLang} {
		t.Run(string(kind), func(t *testing.T) {
			sink := newFakeSink(t)
			c := newCore(t, Config{NumGPUBlocks: 64, NumCPUBlocks: 64, MaxModelLen: 1024, Kind: kind}, sink)
			runOne(t, newDriver(c), "r0", tokens(0, 160), 1)
			stores := 0
			for _, e := range sink.events {
				if e.Medium != kvevents.MediumCPU {
					continue
				}
				if want := kind == hruntime.KindVLLM; e.BytesHashes != want {
					t.Errorf("CPU %v with BytesHashes %v, want %v", e.Kind, e.BytesHashes, want)
				}
				if e.Kind == kvevents.BlockStored {
					stores++
				}
			}
			if kind == hruntime.KindVLLM && stores != 1 {
				t.Errorf("%d CPU BlockStored events for one prompt stored in one step, want 1", stores)
			}
		})
	}
}
