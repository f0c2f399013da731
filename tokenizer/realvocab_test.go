package tokenizer

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The real vocabularies of testdata/real (see its README) are turned into
// the tokenizer.json Hugging Face ships for their model families, and the
// ids checked against the reference ids the modules they come from publish.

// o200kPattern is gpt-oss's (o200k_base) pre-tokenizer regex.
const o200kPattern = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

func readGzipFile(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// addedTokenJSON is one entry of tokenizer.json's added_tokens.
type addedTokenJSON struct {
	ID         uint32 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// byteLevelTokenizerJSON writes a tokenizer.json as Hugging Face's
// converters do for these families: a Split stage with the family's regex
// (Isolated), ByteLevel without its own regex, a BPE model with
// ignore_merges (a word found whole in the vocabulary is one token, as
// tiktoken does) and the special tokens as added tokens.
func byteLevelTokenizerJSON(t testing.TB, pattern string, vocab map[string]uint32, merges [][2]string, added []addedTokenJSON) []byte {
	t.Helper()
	doc := map[string]any{
		"version":      "1.0",
		"added_tokens": added,
		"normalizer":   nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil, "end_of_word_suffix": nil,
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": true, "vocab": vocab, "merges": merges,
		},
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// byteLevelString is GPT-2's printable spelling of raw bytes.
func byteLevelString(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		sb.WriteRune(byteToRune[c])
	}
	return sb.String()
}

// llama3Specials are Llama 3.1's 256 special tokens, ids 128000-128255.
func llama3Specials() []addedTokenJSON {
	named := map[uint32]string{
		128000: "<|begin_of_text|>", 128001: "<|end_of_text|>", 128004: "<|finetune_right_pad_id|>",
		128006: "<|start_header_id|>", 128007: "<|end_header_id|>", 128008: "<|eom_id|>",
		128009: "<|eot_id|>", 128010: "<|python_tag|>",
	}
	var out []addedTokenJSON
	reserved := 0
	for id := uint32(128000); id < 128256; id++ {
		content, ok := named[id]
		if !ok {
			content = fmt.Sprintf("<|reserved_special_token_%d|>", reserved)
			reserved++
		}
		out = append(out, addedTokenJSON{ID: id, Content: content, Special: true})
	}
	return out
}

// llama3Module is the Go module whose test data holds the Llama 3.2
// vocabulary (128,000 tokens, shared by Llama 3.1 and 3.2) and its merges.
// The vocabulary is Meta's, under the Llama 3.2 Community License, so it is
// read from the module cache rather than copied into this repository.
const llama3Module = "github.com/ollama/ollama@v0.17.4"

// llama3Dir is the directory of llama3Module's Llama 3.2 test data, fetched
// into the module cache through the Go module proxy when missing. Without
// the proxy the test skips, saying why, except in CI.
func llama3Dir(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", llama3Module).Output()
	var mod struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	if err == nil && mod.Error != "" {
		err = errors.New(mod.Error)
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("go mod download %s: %v", llama3Module, err)
		}
		t.Skipf("skipped: the Llama 3 vocabulary comes from %s, which the module proxy did not give: %v", llama3Module, err)
	}
	return filepath.Join(mod.Dir, "tokenizer", "testdata", "llama3.2")
}

// llama3TokenizerJSON builds Llama 3's tokenizer.json from llama3Module's
// vocabulary and merges.
func llama3TokenizerJSON(t testing.TB) []byte {
	t.Helper()
	dir := llama3Dir(t)
	encoder, err := os.ReadFile(filepath.Join(dir, "encoder.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vocab map[string]uint32
	if err := json.Unmarshal(encoder, &vocab); err != nil {
		t.Fatal(err)
	}
	bpe, err := os.ReadFile(filepath.Join(dir, "vocab.bpe"))
	if err != nil {
		t.Fatal(err)
	}
	var merges [][2]string
	sc := bufio.NewScanner(bytes.NewReader(bpe))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#version") || line == "" {
			continue
		}
		l, r, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("merge line %q", line)
		}
		merges = append(merges, [2]string{l, r})
	}
	return byteLevelTokenizerJSON(t, llama3Pattern, vocab, merges, llama3Specials())
}

// o200kTokenizerJSON builds gpt-oss's base vocabulary (o200k_base) as a
// tokenizer.json from the tiktoken ranks in testdata/real/o200k, the way
// transformers' TikTokenConverter does: each token's merge is the last
// step of tiktoken's own byte-pair merge of that token, limited to ranks
// below its own.
func o200kTokenizerJSON(t testing.TB) []byte {
	t.Helper()
	ranks := map[string]int{}
	var tokens [][]byte
	sc := bufio.NewScanner(bytes.NewReader(readGzipFile(t, filepath.Join("testdata", "real", "o200k", "o200k_base.tiktoken.gz"))))
	for sc.Scan() {
		b64, rankText, ok := strings.Cut(sc.Text(), " ")
		tok, err := base64.StdEncoding.DecodeString(b64)
		rank, err2 := strconv.Atoi(rankText)
		if !ok || err != nil || err2 != nil || rank != len(tokens) {
			t.Fatalf("tiktoken line %q", sc.Text())
		}
		ranks[string(tok)] = rank
		tokens = append(tokens, tok)
	}
	vocab := make(map[string]uint32, len(tokens))
	var merges [][2]string
	for rank, tok := range tokens {
		vocab[byteLevelString(tok)] = uint32(rank)
		if len(tok) == 1 {
			continue
		}
		if parts := tiktokenMerge(ranks, tok, rank); len(parts) == 2 {
			merges = append(merges, [2]string{byteLevelString(parts[0]), byteLevelString(parts[1])})
		}
	}
	added := []addedTokenJSON{
		{ID: 199999, Content: "<|endoftext|>", Special: true},
		{ID: 200018, Content: "<|endofprompt|>", Special: true},
	}
	return byteLevelTokenizerJSON(t, o200kPattern, vocab, merges, added)
}

// tiktokenMerge is tiktoken's byte-pair merge of tok using only ranks
// below maxRank.
func tiktokenMerge(ranks map[string]int, tok []byte, maxRank int) [][]byte {
	parts := make([][]byte, len(tok))
	for i := range tok {
		parts[i] = tok[i : i+1]
	}
	var pair []byte
	for {
		best, at := -1, -1
		for i := 0; i+1 < len(parts); i++ {
			pair = append(append(pair[:0], parts[i]...), parts[i+1]...)
			r, ok := ranks[string(pair)]
			if ok && r < maxRank && (best < 0 || r < best) {
				best, at = r, i
			}
		}
		if at < 0 {
			return parts
		}
		parts[at] = append(slices.Clip(parts[at]), parts[at+1]...)
		parts = slices.Delete(parts, at+1, at+2)
	}
}

// realModels holds the models built once per test binary, by family.
var realModels sync.Map

// realModel loads (once per test binary) the model build makes.
func realModel(t *testing.T, name string, build func(testing.TB) []byte) *Model {
	t.Helper()
	if m, ok := realModels.Load(name); ok {
		return m.(*Model)
	}
	m, err := LoadFiles(build(t), nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	realModels.Store(name, m)
	return m
}

func TestRealVocabularies(t *testing.T) {
	zeros := func(n int) string { return strings.Repeat("0", n) }
	tests := []struct {
		family string
		build  func(testing.TB) []byte
		text   string
		want   []uint32
	}{
		// ollama v0.17.4 tokenizer/bytepairencoding_test.go (TestLlama).
		{"llama3", llama3TokenizerJSON, "hello world", []uint32{15339, 1917}},
		{"llama3", llama3TokenizerJSON, "hello <|end_of_text|>", []uint32{15339, 220, 128001}},
		{"llama3", llama3TokenizerJSON, zeros(1), []uint32{15}},
		{"llama3", llama3TokenizerJSON, zeros(2), []uint32{410}},
		{"llama3", llama3TokenizerJSON, zeros(3), []uint32{931}},
		{"llama3", llama3TokenizerJSON, zeros(7), []uint32{931, 931, 15}},
		{"llama3", llama3TokenizerJSON, zeros(17), []uint32{931, 931, 931, 931, 931, 410}},
		// Llama 3's first 100,256 tokens are cl100k_base's: tiktoken-go
		// v0.10.0 tokenizer_test.go (TestCl100kBase).
		{"llama3", llama3TokenizerJSON, "hello  world", []uint32{15339, 220, 1917}},
		{"llama3", llama3TokenizerJSON, "hello   world", []uint32{15339, 256, 1917}},
		{"llama3", llama3TokenizerJSON, "supercalifragilistic", []uint32{13066, 3035, 278, 333, 4193, 321, 4633}},
		{"llama3", llama3TokenizerJSON, "We know what we are, but know not what we may be.",
			[]uint32{1687, 1440, 1148, 584, 527, 11, 719, 1440, 539, 1148, 584, 1253, 387, 13}},
		// tiktoken-go v0.10.0 tokenizer_test.go (TestO200kBase).
		{"o200k", o200kTokenizerJSON, "'RE", []uint32{6, 1099}},
		{"o200k", o200kTokenizerJSON, "hello world", []uint32{24912, 2375}},
		{"o200k", o200kTokenizerJSON, "hello  world", []uint32{24912, 220, 2375}},
		{"o200k", o200kTokenizerJSON, "hello   world", []uint32{24912, 256, 2375}},
		{"o200k", o200kTokenizerJSON, "supercalifragilistic", []uint32{17789, 5842, 366, 17764, 311, 6207}},
		{"o200k", o200kTokenizerJSON, "We know what we are, but know not what we may be.",
			[]uint32{2167, 1761, 1412, 581, 553, 11, 889, 1761, 625, 1412, 581, 1340, 413, 13}},
		{"o200k", o200kTokenizerJSON, "hello <|endoftext|>", []uint32{24912, 220, 199999}},
	}
	for _, tt := range tests {
		t.Run(tt.family+"/"+tt.text[:min(len(tt.text), 20)], func(t *testing.T) {
			m := realModel(t, tt.family, tt.build)
			if got := m.Encode(tt.text); !slices.Equal(got, tt.want) {
				t.Fatalf("Encode(%q) = %v, want %v", tt.text, got, tt.want)
			}
			if got := m.Decode(tt.want); got != tt.text {
				t.Fatalf("Decode(%v) = %q, want %q", tt.want, got, tt.text)
			}
		})
	}
}

// llama31ConfigJSON is a tokenizer_config.json for Llama 3.1 Instruct:
// its special tokens and context, and vLLM's Llama 3.1 JSON tool-calling
// chat template (testdata/real/llama3, from vLLM's examples).
func llama31ConfigJSON(t testing.TB) []byte {
	t.Helper()
	tmpl, err := os.ReadFile(filepath.Join("testdata", "real", "llama3", "tool_chat_template_llama3.1_json.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(map[string]any{
		"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "model_max_length": 131072,
		"chat_template": string(tmpl),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLlama31ChatRendersAndTokenizes(t *testing.T) {
	m, err := LoadFiles(llama3TokenizerJSON(t), llama31ConfigJSON(t))
	if err != nil {
		t.Fatal(err)
	}
	rendered, ids, err := m.EncodeChat(ChatRequest{
		Messages:            []byte(`[{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello world"}]`),
		AddGenerationPrompt: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rendered, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n") ||
		!strings.HasSuffix(rendered, "You are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhello world<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n") {
		t.Fatalf("rendered %q", rendered)
	}
	// <|begin_of_text|><|start_header_id|>system<|end_header_id|> "\n\n"
	// (271 in Llama 3), and "hello world" as in TestRealVocabularies.
	if !slices.Equal(ids[:4], []uint32{128000, 128006, 9125, 128007}) || ids[4] != 271 {
		t.Fatalf("ids start %v", ids[:5])
	}
	if !slices.Contains(ids, 15339) || !slices.Equal(ids[len(ids)-4:], []uint32{128006, 78191, 128007, 271}) {
		t.Fatalf("ids end %v", ids[len(ids)-6:])
	}
}

// TestWriteLlama31Snapshot writes meta-llama/Llama-3.1-8B-Instruct's
// tokenizer files in Hugging Face's hub cache layout under the directory
// HEARTH_WRITE_LLAMA31_HUB names, for running hearth up with that model
// (docs/perf.md): hearth up --hf-cache takes the directory above hub/.
func TestWriteLlama31Snapshot(t *testing.T) {
	hub := os.Getenv("HEARTH_WRITE_LLAMA31_HUB")
	if hub == "" {
		t.Skip("HEARTH_WRITE_LLAMA31_HUB names no directory to write the snapshot to")
	}
	const rev = "0e9e39f249a16976918f6564b8830bc894c89659"
	repo := filepath.Join(hub, "models--meta-llama--Llama-3.1-8B-Instruct")
	snap := filepath.Join(repo, "snapshots", rev)
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		filepath.Join(snap, "tokenizer.json"):        llama3TokenizerJSON(t),
		filepath.Join(snap, "tokenizer_config.json"): llama31ConfigJSON(t),
		filepath.Join(repo, "refs", "main"):          []byte(rev),
	} {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %s", snap)
}
