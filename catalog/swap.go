package catalog

import "time"

// The fixed costs of bringing an engine's model in, beside the bytes it
// moves. They are what vLLM's and SGLang's start-up logs show on a
// consumer board with a warm compile cache: the interpreter, the CUDA
// context and the engine's processes before any weight moves; the memory
// profiling run; the capture of CUDA graphs for the decode batch sizes;
// and the re-allocation of the KV pool on a wake.
const (
	processStartSeconds = 14.0
	profileRunSeconds   = 4.0
	graphCaptureSeconds = 10.0
	kvReallocSeconds    = 0.2
	// pageCacheGBps is the rate at which an engine's loader reads
	// safetensors that sit in the host's page cache (a few GB/s: the loader
	// copies and converts tensors on one thread), before the host-to-GPU
	// copy.
	pageCacheGBps = 6.0
)

// SwapTimes is how long it takes to take an engine's model off its GPUs
// and to bring it back, by path. Level 1 is vLLM's sleep level 1 (and
// SGLang's memory saver with a host copy of the weights): weights copied
// to host RAM, the KV cache dropped, the process and its CUDA graphs kept.
// Level 2 drops the weights too; a wake reloads them from the checkpoint,
// which is usually in the page cache. A cold start is a new process.
type SwapTimes struct {
	// SleepLevel1 copies the weights to host RAM; SleepLevel2 only frees.
	SleepLevel1, SleepLevel2 time.Duration
	// WakeLevel1 copies the weights back over the host link and
	// re-allocates the KV pool.
	WakeLevel1 time.Duration
	// WakeLevel2 reads the weights again, from the page cache.
	WakeLevel2 time.Duration
	// ColdFromPageCache and ColdFromDisk start a new engine: process,
	// weights (from the page cache or from the disk at DefaultDiskGBps),
	// memory profiling and graph capture.
	ColdFromPageCache, ColdFromDisk time.Duration
	// HostBytes is the host RAM a level-1 sleep holds: the weights of
	// every rank.
	HostBytes float64
	// ResidualBytes is the GPU memory a sleeping engine keeps on each GPU:
	// its CUDA context (and the CUDA graphs' pools, small beside it).
	ResidualBytes float64
}

// SwapTimesOf prices the sleeps, wakes and starts of model in layout l on
// l.TP GPUs like gpu. Every rank moves its share over its own host link at
// once, so the copies take one rank's share of the time.
func SwapTimesOf(gpu GPU, model Model, l Layout) SwapTimes {
	perRank := model.WeightBytes / float64(l.TPSize())
	hostCopy := gpu.HostLoadSeconds(perRank)
	pageCache := perRank / (pageCacheGBps * 1e9)
	disk := perRank / (DefaultDiskGBps * 1e9)
	fixedCold := processStartSeconds + profileRunSeconds + graphCaptureSeconds
	return SwapTimes{
		SleepLevel1:       seconds(hostCopy),
		SleepLevel2:       seconds(kvReallocSeconds),
		WakeLevel1:        seconds(hostCopy + kvReallocSeconds),
		WakeLevel2:        seconds(pageCache + hostCopy + kvReallocSeconds),
		ColdFromPageCache: seconds(fixedCold + pageCache + hostCopy),
		ColdFromDisk:      seconds(fixedCold + max(disk, pageCache) + hostCopy),
		HostBytes:         model.WeightBytes,
		ResidualBytes:     cudaContextBytes,
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
