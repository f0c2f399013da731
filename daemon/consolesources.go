package daemon

import (
	"context"
	"net/http"
	"strings"

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
	// fractions are, by engine name, the memory fractions planned for
	// engines that share their GPU (models on demand): a simulated GPU's
	// card shows that share reserved rather than the default.
	fractions map[string]float64
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
		if f := s.fractions[st.Name]; f > 0 && out[i].MemoryReserved {
			out[i].MemoryUsed = uint64(float64(out[i].MemoryTotal) * f)
		}
		if st.Tokenizer.State == hruntime.TokenizerDiffers || st.Tokenizer.State == hruntime.TokenizerUnchecked {
			out[i].TokenizerNote = st.Tokenizer.String()
		}
		if st.KVEvents.State == hruntime.KVEventsDiffer || st.KVEvents.State == hruntime.KVEventsUnchecked {
			out[i].KVEventsNote = st.KVEvents.String()
		}
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
		Worker: st.Name, Node: gpu.Node, GPU: gpu.Name, GPUCount: 1 + len(st.TensorParallel), Model: st.Model, Image: st.Image, State: string(st.State),
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
	weights := catalog.MemoryOf(m, catalog.Layout{}, catalog.DefaultMaxBatchedTokens).WeightBytes
	return uint64(weights) + uint64(usedBlocks)*uint64(st.Profile.BlockBytes)
}
