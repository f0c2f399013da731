package tokenizer

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"github.com/nikolalohinski/gonja/v2/exec"
)

var fuzzSeeds = []string{
	"", "Hello, world!", "it's 'LL 'Re", "  \n\n  x", "a\r\n\r\nb", "\u0085\u00a0\ufeff x", "e\u0301",
	"<|im_start|>user\nhi<|im_end|>", "<|im_start", "1234567 89", "👨‍👩‍👧 ok", "x   ", " !!!\n\n", "\t\tfoo",
	"日本語のテキスト", "مرحبا", "func main() {\n\tfmt.Println(\"hi\")\n}\n",
}

// splitWords returns the words p cuts s into.
func splitWords(p preTokenizer, s string) []string {
	var out []string
	p.split(s, func(start, end, _ int) { out = append(out, s[start:end]) })
	return out
}

func FuzzScannerMatchesRegexp(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	refs := map[int]regexSplitter{}
	for digits, pat := range map[int]string{1: qwen2Pattern, 3: llama3Pattern} {
		refs[digits] = regexSplitter{stages: []*regexp2.Regexp{regexp2.MustCompile(pat, regexp2.None)}}
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // regexp2 reads runes; the model only ever splits valid UTF-8 after NFC
		}
		for digits, ref := range refs {
			got, want := splitWords(scanner{maxDigits: digits}, s), splitWords(ref, s)
			if !slices.Equal(got, want) {
				t.Fatalf("maxDigits %d, %q:\nscanner %q\nregexp2 %q", digits, s, got, want)
			}
		}
	})
}

func FuzzEncodeDecode(f *testing.F) {
	m := qwen3Model(f)
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := m.Encode(s) // must not panic on any input
		if !utf8.ValidString(s) {
			return
		}
		if got, want := m.Decode(ids), normalizeLikeEncode(m, s); got != want {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
	})
}

func FuzzSessionEqualsEncode(f *testing.F) {
	m := qwen3Model(f)
	for i, s := range fuzzSeeds {
		f.Add(s, fuzzSeeds[(i+1)%len(fuzzSeeds)], uint16(i*3))
	}
	f.Fuzz(func(t *testing.T, a, b string, cut uint16) {
		// The second turn keeps part of the first and appends b.
		second := a[:int(cut)%(len(a)+1)] + b
		s := m.NewSession()
		s.Encode(a)
		if got, want := s.Encode(second), m.Encode(second); !slices.Equal(got, want) {
			t.Fatalf("after %q, session encodes %q as %v, want %v", a, second, got, want)
		}
	})
}

// plainJSON turns parseOrderedJSON's values into what encoding/json
// decodes into an any.
func plainJSON(v any) any {
	switch t := v.(type) {
	case *exec.Dict:
		m := map[string]any{}
		for _, p := range t.Pairs {
			m[p.Key.String()] = plainJSON(p.Value.Interface())
		}
		return m
	case pyList:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = plainJSON(e)
		}
		return out
	case int:
		return float64(t)
	}
	return v
}

func FuzzParseOrderedJSON(f *testing.F) {
	for _, s := range []string{`[]`, `{"a": [1, 2.5, -0, 1e400, "x\u00e9\ud83d\ude00\\\"", true, null]}`, `{"a":1,"a":2}`, `"\ud800"`, `[1,]`, `{"a" 1}`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseOrderedJSON(data)
		valid := json.Valid(data)
		if valid && err != nil {
			t.Fatalf("valid JSON %q rejected: %v", data, err)
		}
		if err != nil || !valid {
			return // control characters in strings are accepted on purpose
		}
		var want any
		if err := json.Unmarshal(data, &want); err != nil {
			return // e.g. a number out of float64's range
		}
		if !reflect.DeepEqual(plainJSON(got), want) {
			t.Fatalf("%q: got %#v, want %#v", data, plainJSON(got), want)
		}
	})
}

// FuzzLoadFiles feeds broken tokenizer files to the loader: it must return
// an error or a model that encodes without panicking, never crash.
func FuzzLoadFiles(f *testing.F) {
	t := &testing.T{}
	f.Add(tinyTokenizerJSON(t, true, tinyMerges, nil), []byte(`{"chat_template": "{{ messages[0].content }}", "model_max_length": 10}`))
	f.Add(tinyTokenizerJSON(t, false, tinyMerges, map[string]string{"normalizer": "null"}), []byte(`{"chat_template": [{"name": "default", "template": "x"}]}`))
	f.Add(tinyTokenizerJSON(t, true, tinyMerges, map[string]string{"pre_tokenizer": `{"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true}, {"type": "ByteLevel", "use_regex": true}]}`}), []byte(nil))
	f.Fuzz(func(t *testing.T, tok, cfg []byte) {
		m, err := LoadFiles(tok, cfg)
		if err != nil {
			return
		}
		ids := m.Encode("lower <|end|> 123 é")
		m.Decode(ids)
		m.ApplyChatTemplate(ChatRequest{Messages: []byte(`[{"role": "user", "content": "hi"}]`)})
	})
}
