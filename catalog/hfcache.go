package catalog

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotCached is returned for a repository the Hugging Face cache does not
// hold, or holds without its config.json or weights index yet.
var ErrNotCached = errors.New("not in the Hugging Face cache")

// Limits on what a cache's files may say: beyond them a file is nonsense,
// not a model.
const (
	maxLayers      = 1 << 10
	maxHeads       = 1 << 12
	maxHeadDim     = 1 << 12
	maxWidth       = 1 << 22 // hidden and MLP widths
	maxExperts     = 1 << 12
	maxVocab       = 1 << 24
	maxContext     = 1 << 30
	maxWeightBytes = 1 << 50
	// maxSafetensorsHeader is the safetensors format's own cap on its JSON
	// header.
	maxSafetensorsHeader = 100 << 20
	// maxJSONFile caps config.json and the weights index read into memory.
	maxJSONFile = 64 << 20
)

// HFCacheDir is the Hugging Face hub cache engines download into, as
// huggingface_hub finds it: $HF_HUB_CACHE, else HFHome's hub/. It is ""
// when none of the variables is set.
func HFCacheDir(getenv func(string) string) string {
	if d := getenv("HF_HUB_CACHE"); d != "" {
		return d
	}
	return HFHubDir(HFHome(getenv))
}

// HFHome is Hugging Face's home directory (HF_HOME) as huggingface_hub
// finds it: $HF_HOME, else $XDG_CACHE_HOME/huggingface, else
// ~/.cache/huggingface; "" when none of these variables is set. The
// models are in its hub/ (HFHubDir); hearth's --hf-cache names it.
func HFHome(getenv func(string) string) string {
	switch {
	case getenv("HF_HOME") != "":
		return getenv("HF_HOME")
	case getenv("XDG_CACHE_HOME") != "":
		return filepath.Join(getenv("XDG_CACHE_HOME"), "huggingface")
	case getenv("HOME") != "":
		return filepath.Join(getenv("HOME"), ".cache", "huggingface")
	}
	return ""
}

// HFHubDir is the hub cache of the Hugging Face home home, "" without one.
func HFHubDir(home string) string {
	if home == "" {
		return ""
	}
	return filepath.Join(home, "hub")
}

// ReadHFHome reads dir, given as a Hugging Face home (--hf-cache), where
// the user may have named the hub cache instead: a directory called hub
// without a hub/ of its own is taken for the home above it, and note says
// so. A directory that holds repositories (models--Org--Name) under
// another name is a hub cache that no home holds as its hub/, an error.
func ReadHFHome(dir string) (home, note string, err error) {
	if dir == "" {
		return "", "", nil
	}
	if st, err := os.Stat(filepath.Join(dir, "hub")); err == nil && st.IsDir() {
		return dir, "", nil
	}
	if filepath.Base(filepath.Clean(dir)) == "hub" {
		home = filepath.Dir(filepath.Clean(dir))
		return home, fmt.Sprintf("--hf-cache %s is a Hugging Face hub directory; taking %s, the home that holds it, for HF_HOME", dir, home), nil
	}
	if repos, _ := filepath.Glob(filepath.Join(dir, "models--*")); len(repos) > 0 {
		return "", "", fmt.Errorf("--hf-cache %s holds the models themselves (a hub cache): name the Hugging Face home (HF_HOME) whose hub/ holds them", dir)
	}
	return dir, "", nil
}

// ResolveModel finds the model name means, a catalog name or a Hugging Face
// repository id ("qwen3-14b-fp8", "Qwen/Qwen3-14B-FP8"), with the figures
// of the Hugging Face cache at cacheDir where it holds the repository: its
// config.json and weights override the catalog's shape, context, weight
// size and FP8 flag (they are what an engine will load), while the
// catalog's name, family and parameter counts stay. A repository the
// catalog does not list must be in the cache; cacheDir "" skips the cache.
func ResolveModel(name, cacheDir string) (Model, error) {
	m, known := LookupModel(name)
	repo := strings.TrimSpace(name)
	if known {
		repo = m.Repo
	}
	catalogNames := strings.Join(ModelNames(), ", ")
	switch {
	case !known && !strings.Contains(repo, "/"):
		return Model{}, fmt.Errorf("unknown model %q: it is not in Hearth's catalog (%s) nor a Hugging Face repository id (Org/Name) to look for in the cache",
			name, catalogNames)
	case cacheDir == "" && known:
		return m, nil
	case cacheDir == "":
		return Model{}, fmt.Errorf("unknown model %q: it is not in Hearth's catalog (%s), and no Hugging Face cache was given to look in",
			name, catalogNames)
	}
	cached, err := ModelFromHFCache(cacheDir, repo)
	switch {
	case err == nil && known:
		m.Layers, m.QueryHeads, m.KVHeads, m.HeadDim = cached.Layers, cached.QueryHeads, cached.KVHeads, cached.HeadDim
		m.Hidden, m.Intermediate, m.MaxModelLen = cached.Hidden, cached.Intermediate, cached.MaxModelLen
		m.WeightBytes, m.FP8 = cached.WeightBytes, cached.FP8
		return m, nil
	case err == nil:
		return cached, nil
	case errors.Is(err, ErrNotCached) && known:
		return m, nil
	case errors.Is(err, ErrNotCached):
		return Model{}, fmt.Errorf("unknown model %q: it is neither in Hearth's catalog (%s) nor in the Hugging Face cache at %s",
			name, catalogNames, cacheDir)
	}
	return Model{}, err
}

// ModelFromHFCache reads repository repo ("Org/Name") from the Hugging Face
// hub cache at dir: the snapshot refs/main names (or the only, else the
// newest, snapshot), its config.json for the shape, and its weights' size
// from model.safetensors.index.json (metadata.total_size) or a single
// model.safetensors (its tensors' extents). Parameter counts are computed
// from the shape. A repository the cache lacks, or holds without
// config.json or weights, is ErrNotCached.
func ModelFromHFCache(dir, repo string) (Model, error) {
	org, base, ok := strings.Cut(repo, "/")
	if !ok || !validRepoPart(org) || !validRepoPart(base) {
		return Model{}, fmt.Errorf("%q is not a Hugging Face repository id (Org/Name)", repo)
	}
	repoDir := filepath.Join(dir, "models--"+org+"--"+base)
	snap, err := snapshotDir(repoDir)
	if err != nil {
		return Model{}, err
	}
	data, err := readSmallFile(filepath.Join(snap, "config.json"))
	if err != nil {
		return Model{}, err
	}
	cfg, err := parseHFConfig(data)
	if err != nil {
		return Model{}, fmt.Errorf("%s: config.json: %w", repo, err)
	}
	weights, err := weightBytesIn(snap)
	if err != nil {
		return Model{}, fmt.Errorf("%s: %w", repo, err)
	}
	return cfg.model(repo, weights), nil
}

// validRepoPart accepts one part of a repository id: letters, digits and
// "-_.", not "." or "..".
func validRepoPart(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 96 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.", c)) {
			return false
		}
	}
	return true
}

// snapshotDir finds the snapshot of a cached repository: the one refs/main
// names, or else the only or newest under snapshots/.
func snapshotDir(repoDir string) (string, error) {
	snaps := filepath.Join(repoDir, "snapshots")
	if ref, err := os.ReadFile(filepath.Join(repoDir, "refs", "main")); err == nil {
		commit := strings.TrimSpace(string(ref))
		if validRepoPart(commit) {
			if st, err := os.Stat(filepath.Join(snaps, commit)); err == nil && st.IsDir() {
				return filepath.Join(snaps, commit), nil
			}
		}
	}
	entries, err := os.ReadDir(snaps)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w: no %s", ErrNotCached, snaps)
	}
	if err != nil {
		return "", err
	}
	newest, newestTime := "", int64(math.MinInt64)
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !e.IsDir() {
			continue
		}
		if t := info.ModTime().UnixNano(); newest == "" || t > newestTime {
			newest, newestTime = e.Name(), t
		}
	}
	if newest == "" {
		return "", fmt.Errorf("%w: no snapshot in %s", ErrNotCached, snaps)
	}
	return filepath.Join(snaps, newest), nil
}

// readSmallFile reads a JSON file of a snapshot; a missing one is
// ErrNotCached (a download in progress), a huge one an error.
func readSmallFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no %s", ErrNotCached, path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxJSONFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxJSONFile {
		return nil, fmt.Errorf("%s: larger than %d MiB", path, maxJSONFile>>20)
	}
	return data, nil
}

// weightBytesIn is the size of a snapshot's weights: the index's total, or
// a single file's tensors.
func weightBytesIn(snap string) (uint64, error) {
	data, err := readSmallFile(filepath.Join(snap, "model.safetensors.index.json"))
	if err == nil {
		n, err := parseSafetensorsIndex(data)
		if err != nil {
			return 0, fmt.Errorf("model.safetensors.index.json: %w", err)
		}
		return n, nil
	}
	if !errors.Is(err, ErrNotCached) {
		return 0, err
	}
	f, err := os.Open(filepath.Join(snap, "model.safetensors"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%w: no model.safetensors.index.json or model.safetensors in %s", ErrNotCached, snap)
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	n, err := parseSafetensors(f, st.Size())
	if err != nil {
		return 0, fmt.Errorf("model.safetensors: %w", err)
	}
	return n, nil
}

// parseSafetensorsIndex reads metadata.total_size, the bytes of all
// shards' tensors, from a model.safetensors.index.json.
func parseSafetensorsIndex(data []byte) (uint64, error) {
	var idx struct {
		Metadata struct {
			TotalSize json.Number `json:"total_size"`
		} `json:"metadata"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&idx); err != nil {
		return 0, err
	}
	if idx.Metadata.TotalSize == "" {
		return 0, errors.New("no metadata.total_size")
	}
	f, err := idx.Metadata.TotalSize.Float64()
	if err != nil || !(f >= 1 && f <= maxWeightBytes) || f != math.Trunc(f) {
		return 0, fmt.Errorf("metadata.total_size %s is not a size in bytes", idx.Metadata.TotalSize)
	}
	return uint64(f), nil
}

// parseSafetensors reads a safetensors file's header, an 8-byte
// little-endian length and that much JSON describing each tensor's dtype,
// shape and byte range in the data after the header, and returns the bytes
// of all tensors. Every range must lie in the file.
func parseSafetensors(r io.ReaderAt, size int64) (uint64, error) {
	var lenBuf [8]byte
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return 0, fmt.Errorf("header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n < 2 || n > maxSafetensorsHeader || int64(n) > size-8 {
		return 0, fmt.Errorf("header length %d does not fit the file of %d bytes", n, size)
	}
	header := make([]byte, n)
	if _, err := r.ReadAt(header, 8); err != nil {
		return 0, fmt.Errorf("header: %w", err)
	}
	var tensors map[string]json.RawMessage
	if err := json.Unmarshal(header, &tensors); err != nil {
		return 0, fmt.Errorf("header: %w", err)
	}
	dataSize := uint64(size) - 8 - n
	var total uint64
	for name, raw := range tensors {
		if name == "__metadata__" {
			continue
		}
		var t struct {
			DType       string   `json:"dtype"`
			Shape       []uint64 `json:"shape"`
			DataOffsets []uint64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return 0, fmt.Errorf("tensor %q: %w", name, err)
		}
		if len(t.DataOffsets) != 2 || t.DataOffsets[0] > t.DataOffsets[1] || t.DataOffsets[1] > dataSize {
			return 0, fmt.Errorf("tensor %q: data offsets %v outside the %d bytes of data", name, t.DataOffsets, dataSize)
		}
		total += t.DataOffsets[1] - t.DataOffsets[0]
	}
	switch {
	case total == 0:
		return 0, errors.New("no tensor data")
	case total > dataSize:
		return 0, fmt.Errorf("tensors overlap: %d bytes in %d bytes of data", total, dataSize)
	}
	return total, nil
}

// hfConfig is what a config.json says of a model as far as memory goes.
type hfConfig struct {
	Layers       int    `json:"num_hidden_layers"`
	Heads        int    `json:"num_attention_heads"`
	KVHeads      *int   `json:"num_key_value_heads"`
	HeadDim      *int   `json:"head_dim"`
	Hidden       int    `json:"hidden_size"`
	Intermediate int    `json:"intermediate_size"`
	MaxPosition  int    `json:"max_position_embeddings"`
	Vocab        int    `json:"vocab_size"`
	TiedEmbed    bool   `json:"tie_word_embeddings"`
	TorchDType   string `json:"torch_dtype"`
	DType        string `json:"dtype"` // transformers 5 renames torch_dtype
	// Mixture of experts.
	Experts            int `json:"num_experts"`
	ExpertsPerToken    int `json:"num_experts_per_tok"`
	ExpertIntermediate int `json:"moe_intermediate_size"`

	Quantization *struct {
		Method       string `json:"quant_method"`
		ConfigGroups map[string]struct {
			Weights *struct {
				NumBits int    `json:"num_bits"`
				Type    string `json:"type"`
			} `json:"weights"`
		} `json:"config_groups"`
	} `json:"quantization_config"`

	// TextConfig holds the language model of a multimodal config.
	TextConfig *hfConfig `json:"text_config"`
}

// parseHFConfig reads a config.json and checks that it describes a
// decoder a plan can size: positive layers, heads and widths within
// reason, KV heads dividing the query heads, a head width (head_dim, or
// hidden_size over the heads).
func parseHFConfig(data []byte) (hfConfig, error) {
	var c hfConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return hfConfig{}, err
	}
	if c.Layers == 0 && c.TextConfig != nil {
		text := *c.TextConfig
		if text.Quantization == nil {
			text.Quantization = c.Quantization
		}
		if text.TorchDType == "" && text.DType == "" {
			text.TorchDType, text.DType = c.TorchDType, c.DType
		}
		c = text
	}
	c.TextConfig = nil
	if c.KVHeads == nil {
		kv := c.Heads // multi-head attention: one KV head per query head
		c.KVHeads = &kv
	}
	if c.HeadDim == nil {
		if c.Heads < 1 || c.Hidden%c.Heads != 0 {
			return hfConfig{}, fmt.Errorf("no head_dim, and hidden_size %d does not divide into %d heads", c.Hidden, c.Heads)
		}
		hd := c.Hidden / c.Heads
		c.HeadDim = &hd
	}
	kv, hd := *c.KVHeads, *c.HeadDim
	switch {
	case c.Layers < 1 || c.Layers > maxLayers:
		return hfConfig{}, fmt.Errorf("num_hidden_layers %d not in 1..%d", c.Layers, maxLayers)
	case c.Heads < 1 || c.Heads > maxHeads:
		return hfConfig{}, fmt.Errorf("num_attention_heads %d not in 1..%d", c.Heads, maxHeads)
	case kv < 1 || kv > c.Heads || c.Heads%kv != 0:
		return hfConfig{}, fmt.Errorf("num_key_value_heads %d does not divide %d attention heads", kv, c.Heads)
	case hd < 1 || hd > maxHeadDim:
		return hfConfig{}, fmt.Errorf("head_dim %d not in 1..%d", hd, maxHeadDim)
	case c.Hidden < 1 || c.Hidden > maxWidth:
		return hfConfig{}, fmt.Errorf("hidden_size %d not in 1..%d", c.Hidden, maxWidth)
	case c.Intermediate < 0 || c.Intermediate > maxWidth || c.ExpertIntermediate < 0 || c.ExpertIntermediate > maxWidth:
		return hfConfig{}, fmt.Errorf("intermediate_size %d or moe_intermediate_size %d not in 0..%d", c.Intermediate, c.ExpertIntermediate, maxWidth)
	case c.Experts < 0 || c.Experts > maxExperts || c.ExpertsPerToken < 0 || c.ExpertsPerToken > max(c.Experts, 0):
		return hfConfig{}, fmt.Errorf("num_experts %d, num_experts_per_tok %d", c.Experts, c.ExpertsPerToken)
	case c.MaxPosition < 1 || c.MaxPosition > maxContext:
		return hfConfig{}, fmt.Errorf("max_position_embeddings %d not in 1..%d", c.MaxPosition, maxContext)
	case c.Vocab < 0 || c.Vocab > maxVocab:
		return hfConfig{}, fmt.Errorf("vocab_size %d not in 0..%d", c.Vocab, maxVocab)
	}
	return c, nil
}

// moe reports whether the config is a mixture of experts.
func (c hfConfig) moe() bool {
	return c.Experts > 0 && c.ExpertsPerToken > 0 && c.ExpertIntermediate > 0
}

// fp8 reports whether the checkpoint holds FP8 weights: quant_method fp8
// (or fbgemm_fp8), or compressed-tensors with 8-bit float weights.
func (c hfConfig) fp8() bool {
	q := c.Quantization
	if q == nil {
		return false
	}
	switch strings.ToLower(q.Method) {
	case "fp8", "fbgemm_fp8":
		return true
	case "compressed-tensors":
		for _, g := range q.ConfigGroups {
			if g.Weights != nil && g.Weights.NumBits == 8 && strings.EqualFold(g.Weights.Type, "float") {
				return true
			}
		}
	}
	return false
}

// params counts parameters from the shape: attention and MLP (every expert,
// or those one token runs through) per layer, embedding and LM head; norms
// are left out.
func (c hfConfig) params() (total, active float64) {
	h, hd := float64(c.Hidden), float64(*c.HeadDim)
	attn := h*float64(c.Heads)*hd*2 + h*float64(*c.KVHeads)*hd*2 // Q and O, K and V
	mlp := 3 * h * float64(c.Intermediate)                       // gate, up, down
	activeMLP := mlp
	if c.moe() {
		expert := 3 * h * float64(c.ExpertIntermediate)
		mlp = expert*float64(c.Experts) + h*float64(c.Experts) // and the router
		activeMLP = expert*float64(c.ExpertsPerToken) + h*float64(c.Experts)
	}
	embed := h * float64(c.Vocab)
	if !c.TiedEmbed {
		embed *= 2
	}
	layers := float64(c.Layers)
	return layers*(attn+mlp) + embed, layers*(attn+activeMLP) + embed
}

// model is the Model the config and weights describe, named after the
// repository. Unquantized FP32 checkpoints are loaded in 16 bits (vLLM's
// and SGLang's dtype "auto"), so they hold half their file size.
func (c hfConfig) model(repo string, weightBytes uint64) Model {
	_, base, _ := strings.Cut(repo, "/")
	m := Model{
		Name: strings.ToLower(base), Repo: repo,
		Layers: c.Layers, QueryHeads: c.Heads, KVHeads: *c.KVHeads, HeadDim: *c.HeadDim,
		Hidden: c.Hidden, Intermediate: c.Intermediate,
		WeightBytes: float64(weightBytes), FP8: c.fp8(), MaxModelLen: c.MaxPosition,
	}
	dtype := c.DType
	if dtype == "" {
		dtype = c.TorchDType
	}
	if c.Quantization == nil && strings.EqualFold(dtype, "float32") {
		m.WeightBytes /= 2
	}
	if c.moe() {
		// The activation peak follows the MLP width one token runs through.
		m.Intermediate = c.ExpertsPerToken * c.ExpertIntermediate
	}
	total, active := c.params()
	m.Params = total
	if c.moe() {
		m.ActiveParams = active
	}
	switch lower := strings.ToLower(repo); {
	case strings.Contains(lower, "qwen3-coder"):
		m.Family = FamilyQwen3Coder
	case strings.Contains(lower, "qwen3"):
		m.Family = FamilyQwen3
	}
	return m
}
