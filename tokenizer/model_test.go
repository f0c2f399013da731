package tokenizer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/clock"
)

// tinyTokenizerJSON builds a byte-level BPE tokenizer.json over all 256
// bytes plus the merges given, in either of the two merge formats.
func tinyTokenizerJSON(t testing.TB, pairMerges bool, merges [][2]string, extra map[string]string) []byte {
	t.Helper()
	var vocab []string
	id := 0
	for b := 0; b < 256; b++ {
		vocab = append(vocab, fmt.Sprintf("%q: %d", string(byteToRune[b]), id))
		id++
	}
	var ms []string
	for _, m := range merges {
		vocab = append(vocab, fmt.Sprintf("%q: %d", m[0]+m[1], id))
		id++
		if pairMerges {
			ms = append(ms, fmt.Sprintf("[%q, %q]", m[0], m[1]))
		} else {
			ms = append(ms, fmt.Sprintf("%q", m[0]+" "+m[1]))
		}
	}
	fields := map[string]string{
		"added_tokens":  fmt.Sprintf(`[{"id": %d, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}]`, id),
		"normalizer":    `{"type": "NFC"}`,
		"pre_tokenizer": `{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": ` + fmt.Sprintf("%q", qwen2Pattern) + `}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}`,
		"decoder":       `{"type": "ByteLevel"}`,
		"model":         `{"type": "BPE", "dropout": null, "unk_token": null, "ignore_merges": false, "vocab": {` + strings.Join(vocab, ", ") + `}, "merges": [` + strings.Join(ms, ", ") + `]}`,
	}
	for k, v := range extra {
		fields[k] = v
	}
	var parts []string
	for k, v := range fields {
		parts = append(parts, fmt.Sprintf("%q: %s", k, v))
	}
	return []byte("{" + strings.Join(parts, ",\n") + "}")
}

var tinyMerges = [][2]string{{"l", "o"}, {"lo", "w"}, {"Ġ", "low"}, {"e", "r"}, {"low", "er"}}

func TestBothMergeFormatsLoadAlike(t *testing.T) {
	for _, pairs := range []bool{false, true} {
		t.Run(fmt.Sprintf("pairs=%v", pairs), func(t *testing.T) {
			m, err := LoadFiles(tinyTokenizerJSON(t, pairs, tinyMerges, nil), nil)
			if err != nil {
				t.Fatal(err)
			}
			// "lower low<|end|>": low+er merges by rank; " low" is one token.
			got := m.Encode("lower low<|end|>")
			want := []uint32{260, 258, 261}
			if !slices.Equal(got, want) {
				t.Fatalf("Encode = %v, want %v", got, want)
			}
			if d := m.Decode(got); d != "lower low<|end|>" {
				t.Fatalf("Decode = %q", d)
			}
		})
	}
}

func TestMergesApplyLowestRankFirst(t *testing.T) {
	// "a b" has the better rank than "b c", so "abc" is [ab, c] even though
	// "bc" also exists.
	m, err := LoadFiles(tinyTokenizerJSON(t, true, [][2]string{{"a", "b"}, {"b", "c"}}, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Encode("abc"); !slices.Equal(got, []uint32{256, 'c'}) {
		t.Fatalf("Encode(abc) = %v", got)
	}
}

func TestLoadRefusesWhatItCannotReproduce(t *testing.T) {
	tests := []struct {
		name  string
		field string
		value string
	}{
		{"unigram model", "model", `{"type": "Unigram", "vocab": [["a", 0.0]]}`},
		{"wordpiece model", "model", `{"type": "WordPiece", "vocab": {"a": 0}}`},
		{"unknown normalizer", "normalizer", `{"type": "Lowercase"}`},
		{"NFKC normalizer", "normalizer", `{"type": "NFKC"}`},
		{"metaspace pre-tokenizer", "pre_tokenizer", `{"type": "Metaspace", "replacement": "▁"}`},
		{"split with merged behaviour", "pre_tokenizer", `{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "a"}, "behavior": "MergedWithPrevious", "invert": false}, {"type": "ByteLevel", "use_regex": false}]}`},
		{"no byte-level stage", "pre_tokenizer", `{"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Isolated", "invert": false}`},
		{"prefix space", "pre_tokenizer", `{"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}`},
		{"wordpiece decoder", "decoder", `{"type": "WordPiece"}`},
		{"lstrip added token", "added_tokens", `[{"id": 300, "content": "<x>", "lstrip": true, "special": true}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadFiles(tinyTokenizerJSON(t, true, tinyMerges, map[string]string{tc.field: tc.value}), nil)
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("got %v, want ErrUnsupported", err)
			}
		})
	}
}

func TestLoadRejectsBrokenFiles(t *testing.T) {
	good := tinyTokenizerJSON(t, true, tinyMerges, nil)
	for name, data := range map[string][]byte{
		"empty":          nil,
		"truncated":      good[:len(good)/2],
		"not an object":  []byte(`[1, 2]`),
		"merge unknown":  tinyTokenizerJSON(t, true, nil, map[string]string{"model": `{"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "zz"]]}`}),
		"three in merge": tinyTokenizerJSON(t, true, nil, map[string]string{"model": `{"type": "BPE", "vocab": {"a": 0}, "merges": ["a b c"]}`}),
	} {
		if _, err := LoadFiles(data, nil); err == nil {
			t.Errorf("%s: loaded without error", name)
		}
	}
}

func TestGPT2StyleByteLevelUsesItsRegex(t *testing.T) {
	m, err := LoadFiles(tinyTokenizerJSON(t, true, tinyMerges, map[string]string{
		"normalizer":    `null`,
		"pre_tokenizer": `{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}`,
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.pre.(regexSplitter); !ok {
		t.Fatalf("pre-tokenizer is %T, want the regexp2 splitter", m.pre)
	}
	if got := splitWords(m.pre, "low  lower's 123"); !slices.Equal(got, []string{"low", " ", " lower", "'s", " 123"}) {
		t.Fatalf("split = %q", got)
	}
}

func TestQwen3Config(t *testing.T) {
	m := qwen3Model(t)
	if got := m.MaxModelLen(); got != 131072 {
		t.Errorf("MaxModelLen = %d, want 131072", got)
	}
	if got := m.VocabSize(); got != 151669 {
		t.Errorf("VocabSize = %d, want 151669", got)
	}
	if got := m.Encode("<|im_start|>"); !slices.Equal(got, []uint32{151644}) {
		t.Errorf("special token: %v", got)
	}
}

func TestDecodeReplacesInvalidUTF8LikeRust(t *testing.T) {
	m := qwen3Model(t)
	// ids of single bytes: the byte-level alphabet maps each byte to one id.
	ids := func(bs ...byte) []uint32 {
		var out []uint32
		for _, b := range bs {
			out = append(out, m.bpe.byteID[b])
		}
		return out
	}
	tests := []struct {
		name  string
		bytes []byte
		want  string
	}{
		{"truncated three-byte sequence is one replacement", []byte{'a', 0xE2, 0x82, 'b'}, "a\uFFFDb"},
		{"two stray continuation bytes are two", []byte{0x80, 0x80}, "\uFFFD\uFFFD"},
		{"surrogate half", []byte{0xED, 0xA0, 0x80}, "\uFFFD\uFFFD\uFFFD"},
		{"valid text untouched", []byte("é"), "é"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := m.Decode(ids(tc.bytes...)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestModelIsSafeForConcurrentUse(t *testing.T) {
	m := qwen3Model(t)
	vectors := readJSONLines[tokenizeVector](t, "tokenize.jsonl.gz")
	chats := readJSONLines[chatVector](t, "chat.jsonl.gz")[:20]
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < len(vectors); i += 4 {
				if got := m.Encode(vectors[i].Text); !slices.Equal(got, vectors[i].IDs) {
					errs <- vectors[i].ID
					return
				}
			}
			for _, c := range chats {
				if r, err := m.ApplyChatTemplate(c.request()); err != nil || r != c.Rendered {
					errs <- c.ID
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for id := range errs {
		t.Errorf("%s: wrong result under concurrent use", id)
	}
}

func TestToJSONWritesLikePython(t *testing.T) {
	m := qwen3Model(t)
	tmpl, err := newChatTemplate(`{{ messages[0] | tojson }}|{{ messages[0] | tojson(indent=2) }}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = m
	got, err := tmpl.render(ChatRequest{Messages: []byte(`[{"z": 1, "a": [1.5, 1e20, 1e-7, 100.0, -0.0, true, null], "ü": "é\n\"\u0001<>&'"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"z": 1, "a": [1.5, 1e+20, 1e-07, 100.0, -0.0, true, null], "ü": "é\n\"\u0001<>&'"}|{
  "z": 1,
  "a": [
    1.5,
    1e+20,
    1e-07,
    100.0,
    -0.0,
    true,
    null
  ],
  "ü": "é\n\"\u0001<>&'"
}`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestTemplateGlobals(t *testing.T) {
	tmpl, err := newChatTemplate(`{{ strftime_now("%Y-%m-%d %A %b") }}{% if messages|length > 1 %}{{ raise_exception("too many: " ~ messages|length) }}{% endif %}{{ bos_token }}`, map[string]string{"bos_token": "<s>"})
	if err != nil {
		t.Fatal(err)
	}
	tmpl.clock = clock.NewFake(time.Date(2026, 3, 5, 10, 0, 0, 0, time.UTC))
	got, err := tmpl.render(ChatRequest{Messages: []byte(`[{}]`)})
	if err != nil || got != "2026-03-05 Thursday Mar<s>" {
		t.Errorf("got %q, %v", got, err)
	}
	_, err = tmpl.render(ChatRequest{Messages: []byte(`[{}, {}]`)})
	if !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), "too many: 2") {
		t.Errorf("raise_exception: got %v", err)
	}
}

func TestApplyChatTemplateRejectsBadInput(t *testing.T) {
	m := qwen3Model(t)
	for name, msgs := range map[string]string{
		"not JSON":      `[{"role": "user", "content": "hi"`,
		"not an array":  `{"role": "user"}`,
		"trailing data": `[] []`,
	} {
		if _, err := m.ApplyChatTemplate(ChatRequest{Messages: []byte(msgs)}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	noTemplate, err := LoadFiles(tinyTokenizerJSON(t, true, tinyMerges, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noTemplate.ApplyChatTemplate(ChatRequest{Messages: []byte(`[]`)}); !errors.Is(err, ErrNoChatTemplate) {
		t.Errorf("model without template: got %v", err)
	}
}

// TestDeepSeekStyleSplitSequence loads the pre-tokenizer layout of DeepSeek
// V3 (three isolating splits, each applied to the pieces of the one before)
// and checks the pieces.
func TestDeepSeekStyleSplitSequence(t *testing.T) {
	split := func(re string) string {
		return `{"type": "Split", "pattern": {"Regex": ` + fmt.Sprintf("%q", re) + `}, "behavior": "Isolated", "invert": false}`
	}
	pre := `{"type": "Sequence", "pretokenizers": [` + strings.Join([]string{
		split(`\p{N}{1,3}`),
		split(`[一-龥぀-ゟ゠-ヿ]+`),
		split(`[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + `{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`),
		`{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}`,
	}, ", ") + `]}`
	m, err := LoadFiles(tinyTokenizerJSON(t, true, tinyMerges, map[string]string{"normalizer": `{"type": "Sequence", "normalizers": []}`, "pre_tokenizer": pre}), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := splitWords(m.pre, "abc 1234 中文x")
	want := []string{"abc", " ", "123", "4", " ", "中文", "x"}
	if !slices.Equal(got, want) {
		t.Fatalf("split = %q, want %q", got, want)
	}
	if d := m.Decode(m.Encode("abc 1234 中文x")); d != "abc 1234 中文x" {
		t.Fatalf("round trip = %q", d)
	}
}

func TestMinTokensIsALowerBound(t *testing.T) {
	m, err := Qwen3()
	if err != nil {
		t.Fatal(err)
	}
	if got := m.MaxTokenBytes(); got < 16 {
		t.Fatalf("MaxTokenBytes = %d", got)
	}
	texts := []string{
		"",
		"hello world",
		strings.Repeat(" ", 5000),
		strings.Repeat("-", 5000),
		strings.Repeat("=", 3000) + strings.Repeat("\n", 3000),
		strings.Repeat("한국어 ", 500),
		strings.Repeat("\u1112\u1161\u11ab", 1000), // jamo that NFC composes into 한
		strings.Repeat("e\u0301\u0323", 1000),
		strings.Repeat("func main() { fmt.Println(\"hi\") }\n", 300),
	}
	for _, text := range texts {
		if lb, n := m.MinTokens(text), len(m.Encode(text)); lb > n {
			t.Errorf("MinTokens(%.20q…) = %d > %d tokens", text, lb, n)
		}
	}
	if lb := m.MinTokens(strings.Repeat("x", 31<<20)); lb < (31<<20)/m.MaxTokenBytes() {
		t.Errorf("an ASCII text's bound %d is not its length over the longest token", lb)
	}
}
