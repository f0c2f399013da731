package catalog

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/tokenizer"
)

// TinyTokenizerJSON is a byte-level BPE tokenizer.json with the 256 bytes
// and one special token, marker, whose id (256) tells which file a model
// was loaded from.
func tinyTokenizerJSON(t testing.TB, marker string) []byte {
	t.Helper()
	vocab := map[string]int{}
	shifted := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE) {
			r = rune(256 + shifted) // GPT-2's printable stand-in for the byte
			shifted++
		}
		vocab[string(r)] = b
	}
	data, err := json.Marshal(map[string]any{
		"added_tokens":  []any{map[string]any{"id": 256, "content": marker, "special": true}},
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestLoadTokenizer(t *testing.T) {
	cache := t.TempDir()
	fakeRepo(t, cache, "meta-llama/Llama-3.1-8B-Instruct", "c0ffee", map[string][]byte{
		"tokenizer.json":        tinyTokenizerJSON(t, "<|llama|>"),
		"tokenizer_config.json": []byte(`{"chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}", "bos_token": "<|llama|>"}`),
	})
	fakeRepo(t, cache, "Qwen/Qwen3-8B", "", map[string][]byte{"tokenizer.json": tinyTokenizerJSON(t, "<|cached-qwen|>")})
	fakeRepo(t, cache, "meta-llama/Llama-2-7b-hf", "", map[string][]byte{
		"tokenizer.json": []byte(`{"normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}, "pre_tokenizer": null, "model": {"type": "BPE", "byte_fallback": true, "vocab": {"<unk>": 0}, "merges": []}}`),
	})
	fakeRepo(t, cache, "mistralai/Mistral-Nemo-Instruct-2407", "", map[string][]byte{"config.json": []byte(`{}`)})
	local := t.TempDir()
	must(t, os.WriteFile(filepath.Join(local, "tokenizer.json"), tinyTokenizerJSON(t, "<|local|>"), 0o644))
	qwen3, err := tokenizer.Qwen3()
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, model, hub string
		marker           string // the special token only the expected file has
		builtin          bool   // the Qwen3 tokenizer built into the binary
		wantErr          error
		errText          string
	}{
		{name: "repository in the cache", model: "meta-llama/Llama-3.1-8B-Instruct", hub: cache, marker: "<|llama|>"},
		{name: "catalog name of a cached repository", model: "llama-3.1-8b-instruct", hub: cache, marker: "<|llama|>"},
		{name: "cached Qwen3 wins over the built-in one", model: "qwen3-8b", hub: cache, marker: "<|cached-qwen|>"},
		{name: "Qwen3 not cached falls back to the built-in", model: "Qwen/Qwen3-14B-FP8", hub: cache, builtin: true},
		{name: "Qwen3 without a cache", model: "qwen3-8b", hub: "", builtin: true},
		{name: "local model directory", model: local, hub: cache, marker: "<|local|>"},
		{name: "other model not cached", model: "deepseek-ai/DeepSeek-V3", hub: cache, wantErr: ErrNoTokenizer,
			errText: "does not hold deepseek-ai/DeepSeek-V3"},
		{name: "other model cached without tokenizer.json", model: "mistralai/Mistral-Nemo-Instruct-2407", hub: cache,
			wantErr: ErrNoTokenizer, errText: "without tokenizer.json"},
		{name: "Llama without a cache", model: "llama-3.1-8b-instruct", hub: "", wantErr: ErrNoTokenizer,
			errText: "no Hugging Face cache was given"},
		{name: "SentencePiece model", model: "meta-llama/Llama-2-7b-hf", hub: cache, wantErr: tokenizer.ErrUnsupported,
			errText: "not SentencePiece ones"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := LoadTokenizer(tt.model, tt.hub)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.errText) {
					t.Fatalf("LoadTokenizer(%q) = %v, want %v saying %q", tt.model, err, tt.wantErr, tt.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.builtin {
				if m != qwen3 {
					t.Fatalf("LoadTokenizer(%q) is not the built-in Qwen3 tokenizer", tt.model)
				}
				return
			}
			if got := m.Encode(tt.marker); !slices.Equal(got, []uint32{256}) {
				t.Fatalf("LoadTokenizer(%q) encodes %q as %v: not the expected file", tt.model, tt.marker, got)
			}
		})
	}
}
