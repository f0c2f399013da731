package daemon

import (
	"fmt"
	"path/filepath"

	"github.com/hearth-llm/hearth/catalog"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/tokenizer"
)

// hubDir is the Hugging Face hub cache under --hf-cache (the directory
// engines see as HF_HOME), or "" without one.
func (cfg Config) hubDir() string {
	if cfg.HFCache == "" {
		return ""
	}
	return filepath.Join(cfg.HFCache, "hub")
}

// ModelTokenizer is the tokenizer of model as the engines serving it load
// it: from the Hugging Face cache hfCache (hearth up's --hf-cache, the
// directory engines get as HF_HOME; "" for none), the built-in Qwen3
// tokenizer for a Qwen3 model not cached. See catalog.LoadTokenizer for
// the errors.
func ModelTokenizer(model, hfCache string) (*tokenizer.Model, error) {
	return catalog.LoadTokenizer(model, Config{HFCache: hfCache}.hubDir())
}

// specTokenizers loads the tokenizer of each served model once, keyed by
// the name the engines serve it under. The gateway renders and hashes
// every request with one tokenizer, so served models must share theirs:
// a second model with different tokenizer files is refused rather than
// routed by the first one's hashes.
func specTokenizers(cfg Config, specs []hruntime.Spec) (first *tokenizer.Model, byModel map[string]*tokenizer.Model, err error) {
	byModel = make(map[string]*tokenizer.Model)
	var firstModel string
	for _, spec := range specs {
		if _, ok := byModel[spec.Model]; ok {
			continue
		}
		path := spec.ModelPath
		if path == "" {
			path = spec.Model
		}
		tok, err := ModelTokenizer(path, cfg.HFCache)
		if err != nil {
			return nil, nil, fmt.Errorf("up: %w", err)
		}
		if first == nil {
			first, firstModel = tok, spec.Model
		} else if tok.Fingerprint() != first.Fingerprint() {
			return nil, nil, fmt.Errorf("up: %s and %s tokenize differently; Hearth routes the models it serves together with one tokenizer, so serve them from separate hearth up instances",
				firstModel, spec.Model)
		}
		byModel[spec.Model] = tok
	}
	if first == nil {
		return nil, nil, fmt.Errorf("up: no engine to serve a model")
	}
	return first, byModel, nil
}
