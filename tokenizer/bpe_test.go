package tokenizer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// mergeReference is the plain BPE merge: rescan the word for its
// lowest-ranked pair, leftmost among equals, after every merge. It is
// O(n^2) in the word's length and is kept as the definition the fast merge
// is held to.
func (m *bpe) mergeReference(dst []uint32, word string) []uint32 {
	syms := make([]uint32, len(word))
	ranks := make([]mergeRes, len(word))
	for i := 0; i < len(word); i++ {
		syms[i] = m.byteID[word[i]]
	}
	const none = ^uint32(0)
	pairRank := func(l, r uint32) mergeRes {
		if res, ok := m.merges[uint64(l)<<32|uint64(r)]; ok {
			return res
		}
		return mergeRes{rank: none}
	}
	n := len(syms)
	for i := 0; i+1 < n; i++ {
		ranks[i] = pairRank(syms[i], syms[i+1])
	}
	for n > 1 {
		best, at := none, -1
		for i := 0; i+1 < n; i++ {
			if ranks[i].rank < best {
				best, at = ranks[i].rank, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] = ranks[at].id
		copy(syms[at+1:n-1], syms[at+2:n])
		copy(ranks[at+1:n-1], ranks[at+2:n])
		n--
		if at > 0 {
			ranks[at-1] = pairRank(syms[at-1], syms[at])
		}
		if at+1 < n {
			ranks[at] = pairRank(syms[at], syms[at+1])
		}
	}
	return append(dst, syms[:n]...)
}

// mergeSeeds are words whose merges compete: runs of one character (every
// pair the same rank), repeated pairs, code and base64.
var mergeSeeds = []string{
	"a", "ab", "aaa", "aaaa", "aaaaa", "lower", "   ", "\n\n\n\n", "==========", "0000000000000",
	"abababababa", "QUFBQUFBQUFBQUFBQUFB", "𝅘𝅥𝅮𝅘𝅥𝅮𝅘𝅥𝅮", "ﷺﷺﷺ", "))))]]]}}}", "\xff\xfe\xff", "________init________",
	strings.Repeat("x", 300), strings.Repeat("ab", 150) + "c",
}

func FuzzMergeMatchesReference(f *testing.F) {
	m := qwen3Model(f)
	tiny, err := LoadFiles(tinyTokenizerJSON(f, true, [][2]string{{"a", "a"}, {"aa", "a"}, {"a", "b"}, {"b", "a"}, {"aa", "aa"}, {"ab", "a"}}, nil), nil)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range mergeSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, word string) {
		if word == "" {
			return
		}
		for _, model := range []*Model{m, tiny} {
			got, want := model.bpe.merge(nil, word), model.bpe.mergeReference(nil, word)
			if !slices.Equal(got, want) {
				t.Fatalf("merge(%q) = %v, reference %v", word, got, want)
			}
		}
	})
}

// TestLongWordsMergeAsTheReference holds the merge to the reference on
// long words of the shapes that made the plain merge quadratic: runs of one
// character (a minified file's padding, a run of one symbol) and base64.
// How fast they merge is BenchmarkMergeLongWord's to measure.
func TestLongWordsMergeAsTheReference(t *testing.T) {
	t.Parallel()
	m := qwen3Model(t)
	for _, word := range []string{strings.Repeat("a", 5000), strings.Repeat("\U0001D160", 1500), strings.Repeat("QUJD", 1500), strings.Repeat(" ", 4000)} {
		if got, want := m.bpe.merge(nil, word), m.bpe.mergeReference(nil, word); !slices.Equal(got, want) {
			t.Fatalf("merge of %d bytes of %q: %d tokens, reference %d", len(word), word[:4], len(got), len(want))
		}
	}
}

// BenchmarkMergeLongWord merges one 200k-character word (the goal: under
// 50 ms; the plain merge takes more than a minute).
func BenchmarkMergeLongWord(b *testing.B) {
	m := qwen3Model(b)
	for _, c := range []struct{ name, word string }{
		{"a-200k", strings.Repeat("a", 200_000)},
		{"base64-200k", strings.Repeat("QUJD", 50_000)},
		{"U+1D160-200k", strings.Repeat("\U0001D160", 200_000)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.word)))
			defer reportCPU(b)()
			for b.Loop() {
				m.Encode(c.word)
			}
		})
	}
}

// TestEncodeStopsWhenTheRequestEnds: a prompt whose client hung up is not
// tokenized to its end, and a session that was stopped encodes the next
// turn as a plain encode does.
func TestEncodeStopsWhenTheRequestEnds(t *testing.T) {
	t.Parallel()
	m := qwen3Model(t)
	text := strings.Repeat("lorem ipsum dolor sit amet, ", 20_000)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if ids, err := m.EncodeContext(ctx, text); !errors.Is(err, context.Canceled) || ids != nil {
		t.Fatalf("EncodeContext after the request ended = %d ids, %v; want nil, context.Canceled", len(ids), err)
	}
	s := m.NewSession()
	if _, err := s.EncodeContext(ctx, text); !errors.Is(err, context.Canceled) {
		t.Fatalf("Session.EncodeContext after the request ended: %v, want context.Canceled", err)
	}
	want := m.Encode(text + "and more")
	got, err := s.EncodeContext(t.Context(), text+"and more")
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("the next turn after a stopped one: %d ids (%v), want Encode's %d", len(got), err, len(want))
	}
	if got, err := m.EncodeContext(t.Context(), text); err != nil || !slices.Equal(got, m.Encode(text)) {
		t.Fatalf("EncodeContext with a live context differs from Encode (%v)", err)
	}
}
