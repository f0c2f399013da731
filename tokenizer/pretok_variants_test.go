package tokenizer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// tekkenPattern is the Split regex of Mistral's Tekken tokenizers (Mistral
// NeMo and later): o200k's letter classes, one digit per word, no
// contractions.
const tekkenPattern = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

func splitStage(re string) string {
	return `{"type": "Split", "pattern": {"Regex": ` + fmt.Sprintf("%q", re) + `}, "behavior": "Isolated", "invert": false}`
}

const byteLevelNoRegex = `{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}`

// TestPreTokenizerVariants loads each pre-tokenizer layout the byte-level
// families use and checks the words it splits a text into, and that
// encoding and decoding round-trips.
func TestPreTokenizerVariants(t *testing.T) {
	seq := func(stages ...string) string {
		return `{"type": "Sequence", "pretokenizers": [` + strings.Join(stages, ", ") + `]}`
	}
	const text = "HelloWorld's 2024 naïve/ok\n"
	tests := []struct {
		name string
		pre  string
		text string
		want []string
	}{
		{"llama3 split", seq(splitStage(llama3Pattern), byteLevelNoRegex), text,
			[]string{"HelloWorld", "'s", " ", "202", "4", " naïve", "/ok", "\n"}},
		{"qwen2 split", seq(splitStage(qwen2Pattern), byteLevelNoRegex), text,
			[]string{"HelloWorld", "'s", " ", "2", "0", "2", "4", " naïve", "/ok", "\n"}},
		{"gpt-oss o200k split", seq(splitStage(o200kPattern), byteLevelNoRegex), text,
			[]string{"Hello", "World's", " ", "202", "4", " naïve", "/ok", "\n"}},
		{"mistral tekken split", seq(splitStage(tekkenPattern), byteLevelNoRegex), text,
			[]string{"Hello", "World", "'s", " ", "2", "0", "2", "4", " naïve", "/ok", "\n"}},
		{"byte-level with its own regex", `{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}`, text,
			[]string{"HelloWorld", "'s", " 2024", " naïve", "/", "ok", "\n"}},
		{"individual digits then byte-level", seq(`{"type": "Digits", "individual_digits": true}`, `{"type": "ByteLevel", "use_regex": true}`),
			"ab12 cd345", []string{"ab", "1", "2", " cd", "3", "4", "5"}},
		{"digit runs then byte-level", seq(`{"type": "Digits", "individual_digits": false}`, `{"type": "ByteLevel", "use_regex": true}`),
			"ab12 cd345", []string{"ab", "12", " cd", "345"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := LoadFiles(tinyTokenizerJSON(t, true, tinyMerges, map[string]string{"normalizer": "null", "pre_tokenizer": tt.pre}), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := splitWords(m.pre, tt.text); !slices.Equal(got, tt.want) {
				t.Fatalf("split = %q, want %q", got, tt.want)
			}
			if d := m.Decode(m.Encode(tt.text)); d != tt.text {
				t.Fatalf("round trip = %q", d)
			}
		})
	}
}

// TestSentencePieceIsRefused loads the layouts of SentencePiece models
// converted to tokenizer.json: Llama 2 and Mistral v0.1-v0.3 (BPE over
// "▁"-prefixed pieces with byte fallback), Gemma (the same with a Replace
// normalizer), T5-style Unigram with Metaspace. Each is ErrUnsupported:
// their ids cannot be reproduced, so the caller routes the model without
// Hearth's own hashes rather than with wrong ones.
func TestSentencePieceIsRefused(t *testing.T) {
	tests := []struct {
		name   string
		fields map[string]string
	}{
		{"llama 2 / mistral v0.3", map[string]string{
			"normalizer":    `{"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}`,
			"pre_tokenizer": "null",
			"model":         `{"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": "<unk>", "vocab": {"<unk>": 0, "▁": 1}, "merges": []}`,
		}},
		{"gemma", map[string]string{
			"normalizer":    `{"type": "Replace", "pattern": {"String": " "}, "content": "▁"}`,
			"pre_tokenizer": "null",
			"model":         `{"type": "BPE", "byte_fallback": true, "vocab": {"<unk>": 0, "▁": 1}, "merges": []}`,
		}},
		{"metaspace unigram", map[string]string{
			"pre_tokenizer": `{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}`,
			"model":         `{"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["▁", -1.0]]}`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadFiles(tinyTokenizerJSON(t, true, tinyMerges, tt.fields), nil)
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("LoadFiles = %v, want ErrUnsupported", err)
			}
		})
	}
}
