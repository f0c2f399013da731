package catalog

import "strings"

// Model families: the key of the tables that pick an engine's tool-call and
// reasoning parsers (Qwen3 writes JSON tool calls inside <tool_call> tags,
// Qwen3-Coder writes XML ones).
const (
	FamilyQwen3      = "qwen3"
	FamilyQwen3Coder = "qwen3-coder"
	FamilyLlama3     = "llama3"
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
	// Params is the total parameter count; the roofline (RooflineOf)
	// prices a forward pass at 2*Params FLOPs per token in its linear
	// layers, a mixture of experts included.
	Params float64
	// ActiveParams is the parameter count one token runs through when it
	// is less than Params: a mixture-of-experts model routes each token to
	// a few experts, while the weights of all of them stay resident
	// (WeightBytes). 0 for a dense model. The roofline does not use it yet.
	ActiveParams float64
	// WeightBytes is the resident size of the weights on the GPU.
	WeightBytes float64
	// FP8 is set for FP8 checkpoints: linear layers run at the FP8 peak
	// where the GPU has one.
	FP8 bool
	// MaxModelLen is the longest context the model takes, prompt plus
	// output (its config.json max_position_embeddings, vLLM's default
	// --max-model-len).
	MaxModelLen int
	// RopeScaledMaxModelLen is the longer context the model's card serves
	// with YaRN rope scaling, RopeOriginalMaxLen the positions it was
	// trained on (YaRN's original_max_position_embeddings); 0 when the card
	// gives none. Qwen3's cards: 131,072 from 32,768 (factor 4).
	RopeScaledMaxModelLen int
	RopeOriginalMaxLen    int
}

// KVBytesPerToken is the size of one token's K and V over all layers, in
// BF16 (vLLM's default kv-cache dtype follows the activations, BF16, even
// for FP8 weights).
func (m Model) KVBytesPerToken() int {
	return kvBytesPerToken(m, Layout{})
}

// DisplayName is the model's name as its publisher writes it, the last part
// of its repository ("Qwen3-14B-FP8"), or Name when it has none.
func (m Model) DisplayName() string {
	if _, name, ok := strings.Cut(m.Repo, "/"); ok && name != "" {
		return name
	}
	return m.Name
}

// models are the models the catalog knows. Shapes are from the models'
// config.json on Hugging Face and parameter counts from their model cards;
// the FP8 weight size of Qwen3-14B-FP8 is what vLLM reports after loading
// it, BF16 sizes are 2 bytes per parameter, and the other FP8 checkpoints
// hold their linear layers in FP8 (1 byte per parameter) and embedding and
// LM head in BF16 (one more byte per parameter of each; Qwen3-4B ties the
// two, so it holds one). A mixture of experts keeps every expert resident.
// The activation width (Intermediate) of a mixture of experts is the MLP
// width one token runs through: experts per token x expert width.
var models = []Model{
	{
		Name: "qwen3-14b-fp8", Repo: "Qwen/Qwen3-14B-FP8", Family: FamilyQwen3,
		Layers: 40, QueryHeads: 40, KVHeads: 8, HeadDim: 128,
		Hidden: 5120, Intermediate: 17408,
		Params: 14.8e9, WeightBytes: 15.7 * gib, FP8: true, MaxModelLen: 40960, RopeScaledMaxModelLen: 131072, RopeOriginalMaxLen: 32768,
	},
	{
		Name: "qwen3-8b", Repo: "Qwen/Qwen3-8B", Family: FamilyQwen3,
		Layers: 36, QueryHeads: 32, KVHeads: 8, HeadDim: 128,
		Hidden: 4096, Intermediate: 12288,
		Params: 8.19e9, WeightBytes: 8.19e9 * 2, MaxModelLen: 40960, RopeScaledMaxModelLen: 131072, RopeOriginalMaxLen: 32768,
	},
	{
		Name: "qwen3-8b-fp8", Repo: "Qwen/Qwen3-8B-FP8", Family: FamilyQwen3,
		Layers: 36, QueryHeads: 32, KVHeads: 8, HeadDim: 128,
		Hidden: 4096, Intermediate: 12288,
		// FP8 linear weights plus BF16 embedding and LM head (2 x 0.62e9).
		Params: 8.19e9, WeightBytes: 8.19e9 + 2*0.622e9, FP8: true, MaxModelLen: 40960, RopeScaledMaxModelLen: 131072, RopeOriginalMaxLen: 32768,
	},
	{
		// Qwen3-32B: 64 layers, 64 query and 8 KV heads of 128, hidden
		// 5120, MLP 25600; 32.8B parameters, 151,936 x 5120 embedding and
		// LM head (0.778B each).
		Name: "qwen3-32b-fp8", Repo: "Qwen/Qwen3-32B-FP8", Family: FamilyQwen3,
		Layers: 64, QueryHeads: 64, KVHeads: 8, HeadDim: 128,
		Hidden: 5120, Intermediate: 25600,
		Params: 32.8e9, WeightBytes: 32.8e9 + 2*0.778e9, FP8: true, MaxModelLen: 40960, RopeScaledMaxModelLen: 131072, RopeOriginalMaxLen: 32768,
	},
	{
		// Qwen3-Coder-30B-A3B: 48 layers, 32 query and 4 KV heads of 128,
		// hidden 2048, 128 experts of width 768 with 8 per token; 30.5B
		// parameters, 3.3B active; 151,936 x 2048 embedding and LM head
		// (0.311B each); a 256k context.
		Name: "qwen3-coder-30b-a3b-fp8", Repo: "Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8", Family: FamilyQwen3Coder,
		Layers: 48, QueryHeads: 32, KVHeads: 4, HeadDim: 128,
		Hidden: 2048, Intermediate: 8 * 768,
		Params: 30.5e9, ActiveParams: 3.3e9, WeightBytes: 30.5e9 + 2*0.311e9, FP8: true, MaxModelLen: 262144,
	},
	{
		// Qwen3-4B: 36 layers, 32 query and 8 KV heads of 128, hidden
		// 2560, MLP 9728; 4.02B parameters with a tied 151,936 x 2560
		// embedding (0.389B).
		Name: "qwen3-4b-fp8", Repo: "Qwen/Qwen3-4B-FP8", Family: FamilyQwen3,
		Layers: 36, QueryHeads: 32, KVHeads: 8, HeadDim: 128,
		Hidden: 2560, Intermediate: 9728,
		Params: 4.02e9, WeightBytes: 4.02e9 + 0.389e9, FP8: true, MaxModelLen: 40960, RopeScaledMaxModelLen: 131072, RopeOriginalMaxLen: 32768,
	},
	{
		Name: "qwen3-4b", Repo: "Qwen/Qwen3-4B", Family: FamilyQwen3,
		Layers: 36, QueryHeads: 32, KVHeads: 8, HeadDim: 128,
		Hidden: 2560, Intermediate: 9728,
		Params: 4.02e9, WeightBytes: 4.02e9 * 2, MaxModelLen: 40960, RopeScaledMaxModelLen: 131072, RopeOriginalMaxLen: 32768,
	},
	{
		// Llama-3.1-8B-Instruct: 32 layers, 32 query and 8 KV heads of 128,
		// hidden 4096, MLP 14336, a 131,072-token context, BF16; 8.03B
		// parameters with an untied 128,256 x 4096 embedding and LM head.
		Name: "llama-3.1-8b-instruct", Repo: "meta-llama/Llama-3.1-8B-Instruct", Family: FamilyLlama3,
		Layers: 32, QueryHeads: 32, KVHeads: 8, HeadDim: 128,
		Hidden: 4096, Intermediate: 14336,
		Params: 8.03e9, WeightBytes: 8.03e9 * 2, MaxModelLen: 131072,
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
