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
)

// DefaultDiskGBps is the read bandwidth in GB/s (1e9 bytes/s) of a node's
// SSD KV store when none is measured or given: a consumer PCIe 4.0 NVMe
// drive reads 3–7 GB/s.
const DefaultDiskGBps = 5.0

// Roofline is the timing model of one model on one GPU (see above), its
// constants precomputed. The zero value prices nothing; build one with
// RooflineOf.
type Roofline struct {
	linearFLOPsPerToken float64 // 2*Params
	attnFLOPsPerCtx     float64 // 4*Layers*QueryHeads*HeadDim
	linearRate          float64 // effective FLOP/s of linear layers
	attnRate            float64 // effective FLOP/s of attention
	weightBytes         float64
	kvBytesPerToken     float64
	byteRate            float64 // effective bytes/s
}

// RooflineOf is the timing model of model on gpu.
func RooflineOf(gpu GPU, model Model) Roofline {
	linearPeak := gpu.BF16FLOPS
	if model.FP8 && gpu.FP8FLOPS > 0 {
		linearPeak = gpu.FP8FLOPS
	}
	return Roofline{
		linearFLOPsPerToken: 2 * model.Params,
		attnFLOPsPerCtx:     4 * float64(model.Layers*model.QueryHeads*model.HeadDim),
		linearRate:          linearPeak * computeEfficiency,
		attnRate:            gpu.BF16FLOPS * computeEfficiency,
		weightBytes:         model.WeightBytes,
		kvBytesPerToken:     float64(model.KVBytesPerToken()),
		byteRate:            gpu.MemoryBandwidth * memoryEfficiency,
	}
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
	compute := float64(l.tokens)*r.linearFLOPsPerToken/r.linearRate + l.attnCtx*r.attnFLOPsPerCtx/r.attnRate
	memory := (r.weightBytes + l.kvTokens*r.kvBytesPerToken) / r.byteRate
	return StepOverhead + time.Duration(l.seqs)*perSeqOverhead + time.Duration(max(compute, memory)*float64(time.Second))
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
