package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hearth-llm/hearth/tokenizer"
)

// ErrNoTokenizer is returned for a model whose tokenizer Hearth cannot
// find: not in the Hugging Face cache, and not a Qwen3 model (the only
// tokenizer built into the binary).
var ErrNoTokenizer = errors.New("no tokenizer for the model")

// LoadTokenizer returns the tokenizer an engine serving model name uses:
// the tokenizer.json and tokenizer_config.json (chat template, special
// tokens) of the repository in the Hugging Face hub cache at hubDir (the
// snapshot ModelFromHFCache reads), or of name itself when it is a local
// model directory, as engines accept. Without cached files a Qwen3 model
// gets the Qwen3 tokenizer built into the binary (all Qwen3 sizes share
// it); any other model is ErrNoTokenizer, since hashing its prompts with
// another model's vocabulary would make every predicted cache hit wrong.
// A tokenizer the tokenizer package cannot reproduce exactly (SentencePiece,
// WordPiece, ...) is tokenizer.ErrUnsupported. hubDir "" looks in no cache.
func LoadTokenizer(name, hubDir string) (*tokenizer.Model, error) {
	repo := strings.TrimSpace(name)
	m, known := LookupModel(repo)
	if known {
		repo = m.Repo
	}
	if dir, ok := localModelDir(repo); ok {
		return loadTokenizerFrom(name, dir)
	}
	where := "no Hugging Face cache was given"
	if hubDir != "" {
		org, base, ok := strings.Cut(repo, "/")
		if ok && validRepoPart(org) && validRepoPart(base) {
			snap, err := snapshotDir(filepath.Join(hubDir, "models--"+org+"--"+base))
			switch {
			case err == nil:
				if _, err := os.Stat(filepath.Join(snap, "tokenizer.json")); err == nil {
					return loadTokenizerFrom(name, snap)
				} else if !errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("tokenizer of %s: %w", name, err)
				}
				where = "the Hugging Face cache at " + hubDir + " holds " + repo + " without tokenizer.json"
			case errors.Is(err, ErrNotCached):
				where = "the Hugging Face cache at " + hubDir + " does not hold " + repo
			default:
				return nil, fmt.Errorf("tokenizer of %s: %w", name, err)
			}
		}
	}
	if known && (m.Family == FamilyQwen3 || m.Family == FamilyQwen3Coder) || !known && strings.Contains(strings.ToLower(repo), "qwen3") {
		return tokenizer.Qwen3()
	}
	return nil, fmt.Errorf("%w: %s: %s, and only Qwen3's is built into Hearth; download the model's tokenizer.json and tokenizer_config.json into the cache (hf download %s tokenizer.json tokenizer_config.json)",
		ErrNoTokenizer, name, where, repo)
}

// localModelDir reports whether name is a directory holding a
// tokenizer.json: a path, not a repository id (which has exactly one "/"
// and no leading "." or "/").
func localModelDir(name string) (string, bool) {
	if !filepath.IsAbs(name) && !strings.HasPrefix(name, ".") {
		return "", false
	}
	st, err := os.Stat(filepath.Join(name, "tokenizer.json"))
	return name, err == nil && !st.IsDir()
}

func loadTokenizerFrom(name, dir string) (*tokenizer.Model, error) {
	tok, err := tokenizer.Load(dir)
	if errors.Is(err, tokenizer.ErrUnsupported) {
		return nil, fmt.Errorf("tokenizer of %s in %s: %w; Hearth reproduces byte-level BPE tokenizers only (Qwen, Llama 3, DeepSeek V3, Mistral Tekken, gpt-oss), not SentencePiece ones (Llama 2, Mistral before Tekken, Gemma)",
			name, dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer of %s in %s: %w", name, dir, err)
	}
	return tok, nil
}
