package catalog

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/hearth-llm/hearth/tokenizer"
)

// GPUUse is one GPU as the planner sees it: the board and what other
// programs hold on it now.
type GPUUse struct {
	// GPU is the board (LookupGPU, or GPUByName for what the driver
	// reports; GPU{MemoryBytes: n} for a bare size); its MemoryBytes is
	// the memory planned with.
	GPU GPU
	// UsedBytes is the memory other programs hold on the GPU (a game, the
	// desktop, another engine), as discovery reports it.
	UsedBytes uint64
}

// PlanRequest is what to plan: a model served from GPUs.
type PlanRequest struct {
	GPUs  []GPUUse
	Model Model
	// TP is the tensor parallel size: each engine runs on TP consecutive
	// GPUs of the list, which splits the weights and the KV heads over
	// them. 0 means 1: one engine per GPU.
	TP int
	// MaxModelLen is the context each engine should take (--max-model-len);
	// 0 asks for the longest that fits every engine, up to the model's
	// maximum.
	MaxModelLen int
	// MaxBatchedTokens is the token budget of one engine step that sizes
	// the activation peak; 0 means DefaultMaxBatchedTokens.
	MaxBatchedTokens int
	// KVCacheDtype is the engines' KV cache dtype (--kv-cache-dtype):
	// KVCacheAuto ("" too) or KVCacheFP8, which halves the bytes per token.
	KVCacheDtype string
}

// Plan is what fits: the engines that serve the model and what to tell
// each of them.
type Plan struct {
	Model Model
	TP    int
	// KVCacheDtype is the request's, "" for auto.
	KVCacheDtype string
	// MaxModelLen is every engine's context: the same for all, so that a
	// conversation can move between them.
	MaxModelLen int
	// MaxBatchedTokens is every engine's step token budget, the one the
	// activation peak is sized for: what vLLM is told
	// (--max-num-batched-tokens).
	MaxBatchedTokens int
	Engines          []EnginePlan
}

// EnginePlan is one engine: its GPUs and its memory settings.
type EnginePlan struct {
	// GPUs are the engine's GPUs, TP of them.
	GPUs []GPUPlan
	// GPUMemoryUtilization is the share of each GPU's total memory the
	// engine may take: vLLM's --gpu-memory-utilization (and the simulated
	// engine's). It leaves what other programs use plus a margin.
	GPUMemoryUtilization float64
	// MemFractionStatic is SGLang's --mem-fraction-static for the same
	// KV cache. SGLang takes its fraction of the memory free when it
	// starts, not of the total, and holds weights and KV cache in it, so
	// the figure differs from GPUMemoryUtilization. (SGLang also refuses a
	// TP group whose GPUs' free memory differs by more than 10%.)
	MemFractionStatic float64
	// KVTokens is the KV cache's capacity in tokens, whole blocks of
	// tokenizer.DefaultBlockSize (the smallest of the GPUs' under TP).
	KVTokens int
	// MaxModelLen is the context to pass (--max-model-len,
	// --context-length); the Plan's.
	MaxModelLen int
	// AgentTurns is how many agent turns of AgentTurnTokens the KV cache
	// holds at once.
	AgentTurns int
}

// GPUPlan is one GPU of an engine.
type GPUPlan struct {
	// Index is the GPU's position in PlanRequest.GPUs.
	Index int
	GPU   GPU
	// TotalBytes is the GPU's memory, UsedBytes what other programs hold
	// and FreeBytes the rest.
	TotalBytes, UsedBytes, FreeBytes uint64
	// Memory is what the engine's rank on this GPU holds besides its KV
	// cache.
	Memory
	// KVCacheBytes is the rank's KV cache at the engine's
	// GPUMemoryUtilization, KVTokens the tokens it holds.
	KVCacheBytes float64
	KVTokens     int
}

// ErrDoesNotFit is what a NotFitError is.
var ErrDoesNotFit = errors.New("model does not fit")

// ErrContextTooLong is what a ContextTooLongError is.
var ErrContextTooLong = errors.New("context too long")

// PlanEngines plans req: one engine per TP GPUs, each given the memory
// fraction that leaves what other programs use, and the context that fits
// every engine. A model that does not fit returns a *NotFitError, a
// MaxModelLen longer than what fits a *ContextTooLongError; both say the
// fix in one sentence.
func PlanEngines(req PlanRequest) (Plan, error) {
	tp := max(req.TP, 1)
	m := req.Model
	if err := checkRequest(req, tp); err != nil {
		return Plan{}, err
	}
	layout := Layout{TP: tp, KVCacheDtype: req.KVCacheDtype}
	if err := layout.Validate(); err != nil {
		return Plan{}, err
	}
	batched := req.MaxBatchedTokens
	if batched == 0 {
		batched = DefaultMaxBatchedTokens
	}
	minCtx := minContext(m, req.MaxModelLen)

	plan := Plan{Model: m, TP: tp, KVCacheDtype: req.KVCacheDtype, MaxBatchedTokens: batched}
	for start := 0; start < len(req.GPUs); start += tp {
		e := planEngine(m, req.GPUs[start:start+tp], start, layout, batched)
		if e.KVTokens < minCtx {
			return Plan{}, notFit(m, e, layout, batched, req.MaxModelLen)
		}
		plan.Engines = append(plan.Engines, e)
	}

	largest := m.MaxModelLen
	limit := plan.Engines[0]
	for _, e := range plan.Engines {
		if e.KVTokens < largest {
			largest, limit = e.KVTokens, e
		}
	}
	ctx := largest
	if req.MaxModelLen > 0 {
		if req.MaxModelLen > largest {
			g := limit.GPUs[slices.IndexFunc(limit.GPUs, func(g GPUPlan) bool { return g.KVTokens == limit.KVTokens })]
			return Plan{}, &ContextTooLongError{Model: m, TP: tp, Requested: req.MaxModelLen, Largest: largest,
				GPU: g.GPU, UsedBytes: g.UsedBytes}
		}
		ctx = req.MaxModelLen
	}
	plan.MaxModelLen = ctx
	for i := range plan.Engines {
		plan.Engines[i].MaxModelLen = ctx
	}
	return plan, nil
}

// checkRequest rejects what no plan can satisfy.
func checkRequest(req PlanRequest, tp int) error {
	m := req.Model
	switch {
	case len(req.GPUs) == 0:
		return errors.New("plan: no GPUs")
	case m.Layers < 1 || m.QueryHeads < 1 || m.KVHeads < 1 || m.HeadDim < 1 || m.Hidden < 1 ||
		m.Intermediate < 0 || !(m.WeightBytes > 0) || m.MaxModelLen < 1:
		return fmt.Errorf("plan: model %q has no usable shape or size", m.Name)
	case tp > 64:
		return fmt.Errorf("plan: --tp %d: at most 64 GPUs per engine", tp)
	case m.QueryHeads%tp != 0 || (m.KVHeads%tp != 0 && tp%m.KVHeads != 0):
		return fmt.Errorf("%s has %d attention heads and %d KV heads: --tp %d must divide them", m.DisplayName(), m.QueryHeads, m.KVHeads, tp)
	case len(req.GPUs)%tp != 0:
		return fmt.Errorf("--tp %d runs each engine on %d GPUs, and %d GPUs do not divide into such groups", tp, tp, len(req.GPUs))
	case req.MaxModelLen < 0 || req.MaxBatchedTokens < 0:
		return errors.New("plan: negative context or batch size")
	case req.MaxModelLen > m.MaxModelLen:
		return &ContextTooLongError{Model: m, TP: tp, Requested: req.MaxModelLen, Largest: m.MaxModelLen, ModelLimit: true}
	}
	return nil
}

// minContext is the shortest context a model must hold to fit: one agent
// turn, or the requested context when that is shorter, within the model's
// maximum.
func minContext(m Model, requested int) int {
	n := min(AgentTurnTokens, m.MaxModelLen)
	if requested > 0 {
		n = min(n, requested)
	}
	return n
}

// planEngine sizes one engine on gpus (the request's GPUs from first on):
// the fraction every rank can take, each rank's KV cache at it, and the
// smallest cache, which is the engine's (vLLM takes the minimum over
// ranks).
func planEngine(m Model, gpus []GPUUse, first int, l Layout, batched int) EnginePlan {
	util := DefaultMemoryFraction
	for _, g := range gpus {
		util = min(util, MemoryFraction(g.GPU.MemoryBytes, g.UsedBytes))
	}
	return planEngineAt(m, gpus, first, l, batched, util)
}

// planEngineAt sizes one engine on gpus at memory fraction util (of each
// GPU's total): each rank's KV cache at it, and the smallest, which is the
// engine's.
func planEngineAt(m Model, gpus []GPUUse, first int, l Layout, batched int, util float64) EnginePlan {
	mem := MemoryOf(m, l, batched)
	e := EnginePlan{GPUMemoryUtilization: max(util, 0), KVTokens: math.MaxInt}
	sglangFree := math.Inf(1)
	for i, g := range gpus {
		total := g.GPU.MemoryBytes
		free := total - min(g.UsedBytes, total)
		p := GPUPlan{Index: first + i, GPU: g.GPU, TotalBytes: total, UsedBytes: g.UsedBytes, FreeBytes: free, Memory: mem}
		if util > 0 {
			p.KVCacheBytes = mem.KVCacheBytes(total, util)
			p.KVTokens = mem.KVBlocks(p.KVCacheBytes, tokenizer.DefaultBlockSize) * tokenizer.DefaultBlockSize
		}
		e.KVTokens = min(e.KVTokens, p.KVTokens)
		sglangFree = min(sglangFree, float64(free)-cudaContextBytes)
		e.GPUs = append(e.GPUs, p)
	}
	e.AgentTurns = e.KVTokens / AgentTurnTokens
	// SGLang's pool is its fraction of the memory free at its start (after
	// its CUDA context) less the weights: the fraction that holds the same
	// KV cache, rounded up so that it holds no less.
	if e.KVTokens > 0 && sglangFree > 0 {
		kv := float64(e.KVTokens) * float64(mem.KVBytesPerToken)
		e.MemFractionStatic = min(ceilTo((mem.WeightBytes+kv)/sglangFree, 1000), 1)
	}
	return e
}

// fitsOn reports whether m serves in layout l from l.TP GPUs like g at a
// context of at least minCtx.
func fitsOn(m Model, g GPUUse, l Layout, batched, minCtx int) bool {
	tp := l.TPSize()
	if m.QueryHeads%tp != 0 || (m.KVHeads%tp != 0 && tp%m.KVHeads != 0) {
		return false
	}
	gpus := make([]GPUUse, tp)
	for i := range gpus {
		gpus[i] = g
	}
	return planEngine(m, gpus, 0, l, batched).KVTokens >= minCtx
}

// NotFitError says that a model does not fit a GPU, and what would.
type NotFitError struct {
	Model Model
	TP    int
	// GPU is the GPU it does not fit; UsedBytes what other programs hold
	// on it.
	GPU       GPU
	UsedBytes uint64
	// NeedBytes is the memory the model needs on each GPU: its weights
	// alone when WeightsOnly (they exceed the free memory), otherwise
	// weights, working memory and a cache of ContextTokens.
	NeedBytes     float64
	WeightsOnly   bool
	ContextTokens int
	// CloseOthers says it fits once the other programs let go of the GPU.
	CloseOthers bool
	// TryFP8KV says it fits with an FP8 KV cache (--kv-cache-dtype fp8),
	// which halves the cache's bytes per token: offered only when the
	// weights fit and the cache is what is short.
	TryFP8KV bool
	// TryModel is the largest catalog model that fits the GPU, "" for
	// none; TryTP a tensor parallel size that fits on as many such GPUs,
	// 0 for none.
	TryModel string
	TryTP    int
}

func (e *NotFitError) Unwrap() error { return ErrDoesNotFit }

// Error is one sentence with the fix: "Qwen3-32B-FP8 needs 32 GB for
// weights; an RTX 4090 has 24 GB: try qwen3-14b-fp8, or --tp 2 on two
// GPUs".
func (e *NotFitError) Error() string {
	var b strings.Builder
	b.WriteString(e.Model.DisplayName())
	fmt.Fprintf(&b, " needs %d GB", ceilGiB(e.NeedBytes))
	if e.TP > 1 {
		b.WriteString(" per GPU")
	}
	if e.WeightsOnly {
		b.WriteString(" for weights")
	} else {
		fmt.Fprintf(&b, " for weights and a %s-token context", humanize.Comma(int64(e.ContextTokens)))
	}
	if e.TP > 1 {
		fmt.Fprintf(&b, " at --tp %d", e.TP)
	}
	name := gpuShortName(e.GPU)
	fmt.Fprintf(&b, "; %s %s has %d GB", article(name), name, roundGiB(float64(e.GPU.MemoryBytes)))
	if used := roundGiB(float64(e.UsedBytes)); used > 0 {
		fmt.Fprintf(&b, ", %d GB of it used by other programs", used)
	}
	var fixes []string
	if e.CloseOthers {
		fixes = append(fixes, "close them")
	}
	if e.TryFP8KV {
		fixes = append(fixes, "--kv-cache-dtype "+KVCacheFP8)
	}
	if e.TryModel != "" {
		fixes = append(fixes, "try "+e.TryModel)
	}
	if e.TryTP > 0 {
		fixes = append(fixes, fmt.Sprintf("--tp %d on %s GPUs", e.TryTP, countWord(e.TryTP)))
	}
	if len(fixes) == 0 {
		b.WriteString(": no model Hearth knows fits it")
		return b.String()
	}
	b.WriteString(": ")
	for i, f := range fixes {
		switch {
		case i == 0:
		case i == len(fixes)-1:
			b.WriteString(", or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(f)
	}
	return b.String()
}

// notFit explains why m does not fit engine e, and what would.
func notFit(m Model, e EnginePlan, l Layout, batched, requested int) *NotFitError {
	tp := l.TPSize()
	g := e.GPUs[0]
	for _, p := range e.GPUs {
		if p.KVTokens < g.KVTokens || (p.KVTokens == g.KVTokens && p.FreeBytes < g.FreeBytes) {
			g = p
		}
	}
	minCtx := minContext(m, requested)
	err := &NotFitError{Model: m, TP: tp, GPU: g.GPU, UsedBytes: g.UsedBytes}
	if g.WeightBytes > float64(g.FreeBytes) {
		err.NeedBytes, err.WeightsOnly = g.WeightBytes, true
	} else {
		sum := g.ReservedBytes() + float64(minCtx)*float64(g.KVBytesPerToken)
		err.NeedBytes, err.ContextTokens = max(sum/DefaultMemoryFraction, sum+marginBytes), minCtx
	}
	use := GPUUse{GPU: g.GPU, UsedBytes: g.UsedBytes}
	if roundGiB(float64(g.UsedBytes)) > 0 { // the sentence names them
		err.CloseOthers = fitsOn(m, GPUUse{GPU: g.GPU}, l, batched, minCtx)
	}
	if !err.WeightsOnly && !l.FP8KV() {
		err.TryFP8KV = fitsOn(m, use, Layout{TP: l.TP, KVCacheDtype: KVCacheFP8, RopeScaling: l.RopeScaling}, batched, minCtx)
	}
	if alt, ok := largestFitting(use, l, batched, requested, func(o Model) bool {
		return o.Name != m.Name && o.WeightBytes < m.WeightBytes
	}); ok {
		err.TryModel = alt.Name
	}
	for _, t := range []int{2, 4, 8} {
		if t > tp && fitsOn(m, use, Layout{TP: t, KVCacheDtype: l.KVCacheDtype}, batched, minCtx) {
			err.TryTP = t
			break
		}
	}
	return err
}

// largestFitting is the catalog model with the most parameters (the fewest
// weight bytes among equals) that keep passes and fits layout l on GPUs
// like g.
func largestFitting(g GPUUse, l Layout, batched, requested int, keep func(Model) bool) (Model, bool) {
	candidates := slices.Clone(models)
	slices.SortStableFunc(candidates, func(a, b Model) int {
		if a.Params != b.Params {
			return -cmpFloat(a.Params, b.Params)
		}
		return cmpFloat(a.WeightBytes, b.WeightBytes)
	})
	for _, m := range candidates {
		if keep(m) && fitsOn(m, g, l, batched, minContext(m, requested)) {
			return m, true
		}
	}
	return Model{}, false
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// DefaultModel is the model to serve when none is named: the largest
// catalog model (by parameters) that fits the GPU with the least free
// memory, one engine per GPU, with room for one agent turn. Qwen3-14B-FP8
// on a 24 GB board.
func DefaultModel(gpus []GPUUse) (Model, error) {
	if len(gpus) == 0 {
		return Model{}, errors.New("plan: no GPUs")
	}
	smallest := gpus[0]
	for _, g := range gpus[1:] {
		if freeOf(g) < freeOf(smallest) {
			smallest = g
		}
	}
	if m, ok := largestFitting(smallest, Layout{}, DefaultMaxBatchedTokens, 0, func(Model) bool { return true }); ok {
		return m, nil
	}
	name := gpuShortName(smallest.GPU)
	return Model{}, sentenceError{ErrDoesNotFit, fmt.Sprintf("no model Hearth knows fits %s %s with %.1f GB free",
		article(name), name, float64(freeOf(smallest))/gib)}
}

// sentenceError is an error whose text is a sentence for the user, of a
// kind errors.Is can tell.
type sentenceError struct {
	kind     error
	sentence string
}

func (e sentenceError) Error() string { return e.sentence }
func (e sentenceError) Unwrap() error { return e.kind }

func freeOf(g GPUUse) uint64 { return g.GPU.MemoryBytes - min(g.UsedBytes, g.GPU.MemoryBytes) }

// ContextTooLongError says that a requested context does not fit, and the
// longest that does.
type ContextTooLongError struct {
	Model     Model
	TP        int
	Requested int
	// Largest is the longest context that fits every engine (the model's
	// maximum when ModelLimit).
	Largest    int
	ModelLimit bool
	// GPU is the GPU whose KV cache limits the context, UsedBytes what
	// other programs hold on it.
	GPU       GPU
	UsedBytes uint64
}

func (e *ContextTooLongError) Unwrap() error { return ErrContextTooLong }

// Error is one sentence with the largest context that fits.
func (e *ContextTooLongError) Error() string {
	if e.ModelLimit {
		return fmt.Sprintf("%s takes at most %s tokens of context, not %s: use --max-model-len %d or less",
			e.Model.DisplayName(), humanize.Comma(int64(e.Largest)), humanize.Comma(int64(e.Requested)), e.Largest)
	}
	name := gpuShortName(e.GPU)
	where := fmt.Sprintf("%s %s", article(name), name)
	if used := roundGiB(float64(e.UsedBytes)); used > 0 {
		where += fmt.Sprintf(" with %d GB used by other programs", used)
	}
	if e.TP > 1 {
		where += fmt.Sprintf(" at --tp %d", e.TP)
	}
	return fmt.Sprintf("%s on %s has room for a context of %s tokens, not %s: use --max-model-len %d or less",
		e.Model.DisplayName(), where, humanize.Comma(int64(e.Largest)), humanize.Comma(int64(e.Requested)), e.Largest)
}

// ceilGiB is bytes in whole GiB, rounded up: what a model needs is never
// understated.
func ceilGiB(bytes float64) int { return int(math.Ceil(bytes/gib - 1e-9)) }

// roundGiB is bytes in whole GiB, rounded: a board's capacity as it is
// sold ("24 GB").
func roundGiB(bytes float64) int { return int(math.Round(bytes / gib)) }

// gpuShortName is a board's name without the vendor and product line
// ("RTX 4090"), or "GPU" when it has none.
func gpuShortName(g GPU) string {
	name := strings.TrimSpace(g.Name)
	for _, prefix := range []string{"NVIDIA ", "GeForce "} {
		if len(name) >= len(prefix) && strings.EqualFold(name[:len(prefix)], prefix) {
			name = strings.TrimSpace(name[len(prefix):])
		}
	}
	if name == "" {
		return "GPU"
	}
	return name
}

// article is "a" or "an" for a name: an acronym ("RTX", "H100") by how its
// first letter is spoken, a word by its first letter.
func article(name string) string {
	word, _, _ := strings.Cut(name, " ")
	if word == "" {
		return "a"
	}
	first := word[0]
	if word == strings.ToUpper(word) && first >= 'A' && first <= 'Z' {
		if strings.IndexByte("AEFHILMNORSX", first) >= 0 {
			return "an"
		}
		return "a"
	}
	if strings.IndexByte("aeiouAEIOU", first) >= 0 {
		return "an"
	}
	return "a"
}

// countWord spells small counts of GPUs.
func countWord(n int) string {
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight"}
	if n >= 0 && n < len(words) {
		return words[n]
	}
	return strconv.Itoa(n)
}
