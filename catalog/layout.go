package catalog

import (
	"fmt"
	"slices"
	"strings"
)

// KV cache dtypes Hearth plans with: the model's own (BF16 for every catalog
// model, FP8 checkpoints included) and FP8, which halves the bytes of a
// token's K and V. These are vLLM's names for them ("fp8" is fp8_e4m3
// there); an engine that spells them otherwise says so in its descriptor
// (runtime.EngineKind.KVCacheDtypeNames).
const (
	KVCacheAuto = "auto"
	KVCacheFP8  = "fp8"
)

// KVCacheDtypes lists the KV cache dtypes a plan takes.
func KVCacheDtypes() []string { return []string{KVCacheAuto, KVCacheFP8} }

// kvElementBytes is the bytes of one K or V element in a cache of dtype
// ("" is auto), and whether the dtype is one the memory model knows: the
// 16-bit and FP8 dtypes the engines' --kv-cache-dtype accepts.
func kvElementBytes(dtype string) (int, bool) {
	switch strings.ToLower(dtype) {
	case "", KVCacheAuto, "float16", "bfloat16", "bf16":
		return 2, true
	case KVCacheFP8, "fp8_e4m3", "fp8_e5m2":
		return 1, true
	}
	return 0, false
}

// Layout is how engines spread one model over a node's GPUs and store its
// KV: the choices beside the model that change what an engine holds and how
// fast it runs. The zero value is today's default: one engine per GPU, a
// BF16 KV cache, the model's native context.
type Layout struct {
	// TP is the tensor parallel size: GPUs per engine (0 or 1: one engine
	// per GPU).
	TP int
	// KVCacheDtype is KVCacheAuto ("" too) or KVCacheFP8.
	KVCacheDtype string
	// RopeScaling stretches the model's context with YaRN where the model
	// supports it (Model.RopeScaledMaxModelLen), as its card describes.
	RopeScaling bool
	// MaxBatchedTokens is the engines' step token budget (vLLM's
	// --max-num-batched-tokens), which sizes the activation peak; 0 means
	// DefaultMaxBatchedTokens. The agent layouts take
	// AgentMaxBatchedTokens.
	MaxBatchedTokens int
}

// StepBudget is l's step token budget: MaxBatchedTokens, else
// DefaultMaxBatchedTokens.
func (l Layout) StepBudget() int {
	if l.MaxBatchedTokens > 0 {
		return l.MaxBatchedTokens
	}
	return DefaultMaxBatchedTokens
}

// SameEngines reports whether l and o place and store alike (tensor
// parallel size, KV dtype, rope scaling), whatever their step budgets.
func (l Layout) SameEngines(o Layout) bool {
	return l.TPSize() == o.TPSize() && l.KVCacheDtypeOrAuto() == o.KVCacheDtypeOrAuto() && l.RopeScaling == o.RopeScaling
}

// TPSize is l's tensor parallel size, at least 1.
func (l Layout) TPSize() int { return max(l.TP, 1) }

// FP8KV reports whether l stores KV in FP8.
func (l Layout) FP8KV() bool {
	b, _ := kvElementBytes(l.KVCacheDtype)
	return b == 1
}

// String is the layout as `hearth plan` names it: "tp2, fp8 KV, yarn".
func (l Layout) String() string {
	parts := []string{"per-GPU"}
	if l.TPSize() > 1 {
		parts[0] = fmt.Sprintf("tp%d", l.TPSize())
	}
	if l.FP8KV() {
		parts = append(parts, "fp8 KV")
	}
	if l.RopeScaling {
		parts = append(parts, "yarn")
	}
	return strings.Join(parts, ", ")
}

// KVCacheDtypeOrAuto is l's KV cache dtype, "auto" for "".
func (l Layout) KVCacheDtypeOrAuto() string {
	if l.KVCacheDtype == "" {
		return KVCacheAuto
	}
	return l.KVCacheDtype
}

// Flags is l as Hearth's command-line flags ("--tp 2 --kv-cache-dtype fp8
// --rope-scaling"), "" for the default layout.
func (l Layout) Flags() string {
	var f []string
	if l.TPSize() > 1 {
		f = append(f, fmt.Sprintf("--tp %d", l.TPSize()))
	}
	if l.KVCacheDtypeOrAuto() != KVCacheAuto {
		f = append(f, "--kv-cache-dtype "+l.KVCacheDtype)
	}
	if l.RopeScaling {
		f = append(f, "--rope-scaling")
	}
	return strings.Join(f, " ")
}

// Validate rejects a dtype the memory model does not know.
func (l Layout) Validate() error {
	if _, ok := kvElementBytes(l.KVCacheDtype); !ok {
		return fmt.Errorf("--kv-cache-dtype %q: want one of %s", l.KVCacheDtype, strings.Join(KVCacheDtypes(), ", "))
	}
	if l.TP < 0 {
		return fmt.Errorf("--tp %d: want 1 or more", l.TP)
	}
	return nil
}

// WithRopeScaling is m serving the longer context YaRN gives it
// (RopeScaledMaxModelLen), and false when m has no such context.
func (m Model) WithRopeScaling() (Model, bool) {
	if m.RopeScaledMaxModelLen <= m.MaxModelLen || m.RopeOriginalMaxLen <= 0 {
		return m, false
	}
	m.MaxModelLen = m.RopeScaledMaxModelLen
	return m, true
}

// RopeScalingFactor is YaRN's factor for m's scaled context: the scaled
// context over the positions the model was trained on (4 for Qwen3:
// 131,072 / 32,768); 0 without one.
func (m Model) RopeScalingFactor() float64 {
	if m.RopeScaledMaxModelLen <= 0 || m.RopeOriginalMaxLen <= 0 {
		return 0
	}
	return float64(m.RopeScaledMaxModelLen) / float64(m.RopeOriginalMaxLen)
}

// RopeScalingJSON is the override of m's config.json that gives it its
// YaRN context, as the engines take it (vLLM's --hf-overrides, SGLang's
// --json-model-override-args): the rope_scaling object of the model's card,
// and max_position_embeddings raised to the scaled context, since SGLang
// takes its context from that field (vLLM derives it from rope_scaling:
// original_max_position_embeddings x factor). "" when m has no scaled
// context.
func (m Model) RopeScalingJSON() string {
	f := m.RopeScalingFactor()
	if f == 0 {
		return ""
	}
	return fmt.Sprintf(`{"max_position_embeddings":%d,"rope_scaling":{"rope_type":"yarn","factor":%g,"original_max_position_embeddings":%d}}`,
		m.RopeScaledMaxModelLen, f, m.RopeOriginalMaxLen)
}

// ApplyLayout is m as l serves it: its context stretched when l asks for
// rope scaling and m supports it (an error when it does not).
func ApplyLayout(m Model, l Layout) (Model, error) {
	if err := l.Validate(); err != nil {
		return Model{}, err
	}
	if !l.RopeScaling {
		return m, nil
	}
	scaled, ok := m.WithRopeScaling()
	if !ok {
		return Model{}, fmt.Errorf("%s has no longer context with rope scaling", m.DisplayName())
	}
	return scaled, nil
}

// Candidate is one layout that fits a node's GPUs, and what it plans.
type Candidate struct {
	Model  Model
	Layout Layout
	Plan   Plan
}

// Candidates lists the layouts of the catalog's models that fit gpus (one
// node): one engine per GPU and every tensor parallel size of 2, 4 and 8
// that divides the GPUs and the model's heads, each with a BF16 and an FP8
// KV cache, each at the native context and, where the model has one, the
// YaRN context, all with the agents' step budget (AgentMaxBatchedTokens).
// Each is planned with the longest context that fits. What
// does not fit is left out. models limits the models (nil: all the
// catalog's); the order is the models', then TP, dtype and rope scaling
// ascending.
func Candidates(gpus []GPUUse, models []Model) []Candidate {
	if models == nil {
		models = slices.Clone(catalogModels())
	}
	var out []Candidate
	for _, m := range models {
		for _, tp := range []int{1, 2, 4, 8} {
			if tp > len(gpus) || len(gpus)%tp != 0 {
				continue
			}
			for _, dtype := range KVCacheDtypes() {
				for _, rope := range []bool{false, true} {
					l := Layout{TP: tp, KVCacheDtype: dtype, RopeScaling: rope, MaxBatchedTokens: AgentMaxBatchedTokens}
					lm, err := ApplyLayout(m, l)
					if err != nil {
						continue
					}
					p, err := PlanEngines(PlanRequest{GPUs: gpus, Model: lm, TP: tp, KVCacheDtype: dtype, MaxBatchedTokens: l.MaxBatchedTokens})
					if err != nil {
						continue
					}
					out = append(out, Candidate{Model: lm, Layout: l, Plan: p})
				}
			}
		}
	}
	return out
}

func catalogModels() []Model { return models }
