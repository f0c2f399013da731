package catalog

import "strings"

// Model families: the key of the tables that pick an engine's tool-call and
// reasoning parsers (Qwen3 writes JSON tool calls inside <tool_call> tags,
// Qwen3-Coder writes XML ones).
const (
	FamilyQwen3      = "qwen3"
	FamilyQwen3Coder = "qwen3-coder"
)

// Model is the shape of a model as far as memory and cost go, and what an
// engine needs to serve it.
type Model struct {
	// Name is Hearth's name for the model ("qwen3-14b-fp8"): the key of the
	// catalog, the name engines serve it under (vLLM's
	// --served-model-name) and the model clients ask for.
	Name string
	// Repo is the Hugging Face repository the weights come from
	// ("Qwen/Qwen3-14B-FP8").
	Repo string
	// Family picks the tool-call and reasoning parsers (FamilyQwen3, ...).
	Family string

	Layers     int
	QueryHeads int
	KVHeads    int
	HeadDim    int
	Hidden     int
	// Intermediate is the MLP width; it sizes the activation peak.
	Intermediate int
	// Params is the total parameter count; a forward pass costs 2*Params
	// FLOPs per token in its linear layers.
	Params float64
	// WeightBytes is the resident size of the weights on the GPU.
	WeightBytes float64
	// FP8 is set for FP8 checkpoints: linear layers run at the FP8 peak
	// where the GPU has one.
	FP8 bool
	// MaxModelLen is the longest context the model takes, prompt plus
	// output (its config.json max_position_embeddings, vLLM's default
	// --max-model-len).
	MaxModelLen int
}

// KVBytesPerToken is the size of one token's K and V over all layers, in
// BF16 (vLLM's default kv-cache dtype follows the activations, BF16, even
// for FP8 weights).
func (m Model) KVBytesPerToken() int {
	const bf16 = 2
	return 2 * m.Layers * m.KVHeads * m.HeadDim * bf16
}

// models are the models the catalog knows. Shapes are from the models'
// config.json on Hugging Face and parameter counts from their model cards;
// the FP8 weight size of Qwen3-14B-FP8 is what vLLM reports after loading
// it, BF16 sizes are 2 bytes per parameter.
var models = []Model{
	{
		Name: "qwen3-14b-fp8", Repo: "Qwen/Qwen3-14B-FP8", Family: FamilyQwen3,
		Layers: 40, QueryHeads: 40, KVHeads: 8, HeadDim: 128,
		Hidden: 5120, Intermediate: 17408,
		Params: 14.8e9, WeightBytes: 15.7 * gib, FP8: true, MaxModelLen: 40960,
	},
	{
		Name: "qwen3-8b", Repo: "Qwen/Qwen3-8B", Family: FamilyQwen3,
		Layers: 36, QueryHeads: 32, KVHeads: 8, HeadDim: 128,
		Hidden: 4096, Intermediate: 12288,
		Params: 8.19e9, WeightBytes: 8.19e9 * 2, MaxModelLen: 40960,
	},
	{
		Name: "qwen3-8b-fp8", Repo: "Qwen/Qwen3-8B-FP8", Family: FamilyQwen3,
		Layers: 36, QueryHeads: 32, KVHeads: 8, HeadDim: 128,
		Hidden: 4096, Intermediate: 12288,
		// FP8 linear weights plus BF16 embedding and LM head (2 x 0.62e9).
		Params: 8.19e9, WeightBytes: 8.19e9 + 2*0.622e9, FP8: true, MaxModelLen: 40960,
	},
}

// ModelNames lists the models the catalog knows.
func ModelNames() []string {
	out := make([]string, len(models))
	for i, m := range models {
		out[i] = m.Name
	}
	return out
}

// LookupModel returns a model by its name or its Hugging Face repository,
// ignoring case ("qwen3-14b-fp8", "Qwen/Qwen3-14B-FP8").
func LookupModel(name string) (Model, bool) {
	name = strings.TrimSpace(name)
	for _, m := range models {
		if strings.EqualFold(name, m.Name) || strings.EqualFold(name, m.Repo) {
			return m, true
		}
	}
	return Model{}, false
}
