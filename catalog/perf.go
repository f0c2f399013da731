package catalog

import "time"

// The roofline prices one engine step (one forward pass over every
// scheduled token) on a GPU:
//
//	step = overhead + perSeq*seqs + max(compute, memory)
//
//	compute = 2*Params*tokens / (linearPeak*computeEfficiency)
//	        + 4*Layers*QueryHeads*HeadDim*Σctx / (BF16Peak*computeEfficiency)
//	memory  = (WeightBytes + KVBytesPerToken*Σ(context+new)) / (bandwidth*memoryEfficiency)
//
// Linear layers cost 2 FLOPs per parameter per token (multiply and add);
// 2*Params slightly overstates them (the embedding is a lookup and the LM head
// runs only for sampled tokens) and the excess stands in for norms, rotary
// embedding and activation functions. A mixture of experts is priced at all
// its Params too, as if every expert ran: Model.ActiveParams is not used
// yet, which overstates its compute but keeps the figures every benchmark
// was made with. Attention of one query token against a
// context of n tokens costs 2*n*HeadDim FLOPs for QKᵀ and as much for the
// weighted sum of V, per query head and layer, hence 4*Layers*QueryHeads*
// HeadDim*n; Σctx sums n over every scheduled token (causal: the i-th token of
// a chunk that starts after c cached tokens sees c+i+1). Attention runs at the
// BF16 rate because the KV cache is BF16; linear layers run at the FP8 rate
// for FP8 checkpoints on GPUs with FP8 tensor cores.
//
// Memory: every step streams all weights once, and attention reads the KV of
// each scheduled request's whole context and writes the new tokens' KV.
//
// A step is one forward pass: large batches of prefill tokens are bound by
// tensor-core throughput, decode batches by DRAM bandwidth, and a step takes
// about the longer of the two (the roofline), not their sum, because the
// kernels overlap loads and math.
//
// Tensor parallelism over TP GPUs (Layout.TP) splits every linear layer and
// the attention heads: each GPU computes 1/TP of the FLOPs, streams 1/TP of
// the weights and its own KV heads (KVHeads/TP, at least one). The ranks
// then sum their partial outputs twice per layer (after attention and after
// the MLP), an all-reduce of tokens x Hidden x 2 bytes each, which does not
// overlap the kernels in vLLM or SGLang:
//
//	step = overhead + perSeq*seqs + max(compute/TP, memory per rank)
//	     + 2*Layers*AllReduceSeconds(tokens*Hidden*2)
//
// An FP8 KV cache (Layout.KVCacheDtype) halves the KV bytes read and
// written; attention still runs at the BF16 rate, since the engines' Ada
// and Ampere attention kernels upcast FP8 K and V to the query's dtype.
const (
	// computeEfficiency is the fraction of the dense tensor-core peak large
	// GEMMs and FlashAttention reach in vLLM prefill (MFU 40-60% on
	// Ada/Hopper is typical of published prefill throughput).
	computeEfficiency = 0.5
	// memoryEfficiency is the fraction of peak DRAM bandwidth decode GEMVs
	// reach (80-90% in bandwidth-bound kernels).
	memoryEfficiency = 0.85
	// StepOverhead is the fixed cost of one engine step: scheduling, input
	// preparation, CUDA-graph launch, sampling and output processing in vLLM
	// V1 (1.5-3 ms per step on a single GPU).
	StepOverhead = 2 * time.Millisecond
	// perSeqOverhead is the per-request part of that cost (sampling,
	// detokenization, output bookkeeping).
	perSeqOverhead = 20 * time.Microsecond

	// hostAllReduceLatency is the fixed cost of one NCCL all-reduce through
	// host memory (GPUs without NVLink or PCIe peer-to-peer, such as the
	// RTX 4090, where vLLM's custom all-reduce turns itself off): kernel
	// launch, the proxy thread's handshakes over shared memory and two PCIe
	// round trips. 25 µs; see docs/perf.md, "Tensor parallelism".
	hostAllReduceLatency = 25e-6
	// nvlinkAllReduceLatency is that cost over NVLink, where vLLM's custom
	// all-reduce handles small messages in a few microseconds.
	nvlinkAllReduceLatency = 8e-6
	// linkEfficiency is the share of NVLink's bandwidth an all-reduce's
	// bus bandwidth reaches.
	linkEfficiency = 0.8
)

// DefaultDiskGBps is the read bandwidth in GB/s (1e9 bytes/s) of a node's
// SSD KV store when none is measured or given: a consumer PCIe 4.0 NVMe
// drive reads 3–7 GB/s.
const DefaultDiskGBps = 5.0

// Roofline is the timing model of one model on one GPU (see above), its
// constants precomputed. The zero value prices nothing; build one with
// RooflineOf.
type Roofline struct {
	tp                  float64
	linearFLOPsPerToken float64 // 2*Params
	attnFLOPsPerCtx     float64 // 4*Layers*QueryHeads*HeadDim
	linearRate          float64 // effective FLOP/s of linear layers
	attnRate            float64 // effective FLOP/s of attention
	weightBytes         float64
	kvBytesPerToken     float64
	byteRate            float64 // effective bytes/s
	// allReduces is the all-reduces of a step (2 per layer under TP, else
	// 0), allReduceBytesPerToken the bytes each sums per token.
	allReduces             float64
	allReduceBytesPerToken float64
	gpu                    GPU
}

// RooflineOf is the timing model of model on one gpu, with a BF16 KV cache.
func RooflineOf(gpu GPU, model Model) Roofline {
	return RooflineOfLayout(gpu, model, Layout{})
}

// RooflineOfLayout is the timing model of an engine serving model in layout
// l on l.TP GPUs like gpu: per-GPU compute and bandwidth on each rank's
// share, plus the all-reduces between them.
func RooflineOfLayout(gpu GPU, model Model, l Layout) Roofline {
	linearPeak := gpu.BF16FLOPS
	if model.FP8 && gpu.FP8FLOPS > 0 {
		linearPeak = gpu.FP8FLOPS
	}
	tp := l.TPSize()
	r := Roofline{
		tp:                  float64(tp),
		linearFLOPsPerToken: 2 * model.Params,
		attnFLOPsPerCtx:     4 * float64(model.Layers*model.QueryHeads*model.HeadDim),
		linearRate:          linearPeak * computeEfficiency,
		attnRate:            gpu.BF16FLOPS * computeEfficiency,
		weightBytes:         model.WeightBytes / float64(tp),
		kvBytesPerToken:     float64(kvBytesPerToken(model, l)),
		byteRate:            gpu.MemoryBandwidth * memoryEfficiency,
		gpu:                 gpu,
	}
	if tp > 1 {
		r.allReduces = 2 * float64(model.Layers)
		r.allReduceBytesPerToken = float64(model.Hidden) * 2
	}
	return r
}

// AllReduceSeconds is the time of one all-reduce of bytes over tp GPUs like
// g, as a ring: each GPU sends and receives 2(tp-1)/tp of the bytes, at
// NVLink's bandwidth where the board has it and otherwise through host
// memory, where each byte crosses PCIe twice (GPU to host, host to GPU),
// so at half the host link's copy bandwidth; plus a fixed latency. 0 for
// one GPU.
func (g GPU) AllReduceSeconds(bytes float64, tp int) float64 {
	if tp <= 1 {
		return 0
	}
	latency, rate := hostAllReduceLatency, g.PCIeGBps*1e9/2
	if g.NVLinkGBps > 0 {
		latency, rate = nvlinkAllReduceLatency, g.NVLinkGBps*1e9*linkEfficiency
	}
	if rate <= 0 {
		return latency
	}
	n := float64(tp)
	return latency + 2*(n-1)/n*bytes/rate
}

// StepLoad accumulates the work of one step as an engine schedules
// requests into it. The zero value is an empty step.
type StepLoad struct {
	seqs     int
	tokens   int
	attnCtx  float64 // Σ context seen by each scheduled token
	kvTokens float64 // Σ (context + new tokens) over scheduled requests
}

// Add records n new tokens of a request that has computed tokens already
// (a prefill chunk, or one decode token).
func (l *StepLoad) Add(computed, n int) {
	c, k := float64(computed), float64(n)
	l.seqs++
	l.tokens += n
	l.attnCtx += k*c + k*(k+1)/2
	l.kvTokens += c + k
}

// Seqs is the number of requests in the step and Tokens the tokens they
// compute.
func (l *StepLoad) Seqs() int   { return l.seqs }
func (l *StepLoad) Tokens() int { return l.tokens }

// StepDuration prices a step on the modelled GPU; 0 for an empty step.
func (r *Roofline) StepDuration(l *StepLoad) time.Duration {
	if l.seqs == 0 {
		return 0
	}
	compute := (float64(l.tokens)*r.linearFLOPsPerToken/r.linearRate + l.attnCtx*r.attnFLOPsPerCtx/r.attnRate) / max(r.tp, 1)
	memory := (r.weightBytes + l.kvTokens*r.kvBytesPerToken) / r.byteRate
	comm := 0.0
	if r.allReduces > 0 {
		comm = r.allReduces * r.gpu.AllReduceSeconds(float64(l.tokens)*r.allReduceBytesPerToken, int(r.tp))
	}
	return StepOverhead + time.Duration(l.seqs)*perSeqOverhead + time.Duration((max(compute, memory)+comm)*float64(time.Second))
}

// HostLoadBytesPerSec is the bandwidth of copies from pinned host RAM to
// the GPU (PCIeGBps), what a reload from a host-RAM KV tier runs at; 0 when
// the catalog does not know the board's link.
func (g GPU) HostLoadBytesPerSec() float64 { return g.PCIeGBps * 1e9 }

// HostLoadSeconds is the time of copying bytes from host RAM to the GPU; 0
// when the catalog does not know the board's link.
func (g GPU) HostLoadSeconds(bytes float64) float64 {
	if g.PCIeGBps <= 0 {
		return 0
	}
	return bytes / (g.PCIeGBps * 1e9)
}

// DiskLoadSeconds is the time of reading bytes from a disk that reads
// diskGBps GB/s and copying them on to the GPU.
func (g GPU) DiskLoadSeconds(bytes, diskGBps float64) float64 {
	return bytes/(diskGBps*1e9) + g.HostLoadSeconds(bytes)
}
