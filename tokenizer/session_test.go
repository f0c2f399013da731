package tokenizer

import (
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

// agentTurns returns the rendered agent conversations of chat.jsonl, each
// conversation's steps in order.
func agentTurns(t testing.TB) map[string][]chatVector {
	convs := map[string][]chatVector{}
	for _, v := range readJSONLines[chatVector](t, "chat.jsonl.gz") {
		conv, step, ok := strings.Cut(v.ID, "/k")
		if !ok || !strings.HasPrefix(v.ID, "agent/") && !strings.HasPrefix(v.ID, "chatthink/") {
			continue
		}
		_ = step
		convs[conv] = append(convs[conv], v)
	}
	for _, steps := range convs {
		sort.Slice(steps, func(i, j int) bool { return steps[i].ID < steps[j].ID })
	}
	return convs
}

func TestSessionMatchesReferenceAcrossAgentTurns(t *testing.T) {
	m := qwen3Model(t)
	convs := agentTurns(t)
	if len(convs) < 3 {
		t.Fatalf("only %d agent conversations in chat.jsonl", len(convs))
	}
	for name, steps := range convs {
		s := m.NewSession()
		reusedAny := false
		for i, v := range steps {
			got := s.Encode(v.Rendered)
			if !slices.Equal(got, v.IDs) {
				t.Fatalf("%s: ids differ from the reference at %d", v.ID, firstDiff(got, v.IDs))
			}
			if want := BlockHashes(v.IDs, DefaultBlockSize); !slices.Equal(s.BlockHashes(), want) {
				t.Fatalf("%s: session block hashes differ from hashing the ids", v.ID)
			}
			if i > 0 && s.Reused() > 0 {
				reusedAny = true
			}
		}
		if len(steps) > 1 && !reusedAny {
			t.Errorf("%s: no turn reused any token of the one before", name)
		}
	}
}

// TestSessionEqualsFullEncodeAfterEdits feeds a session texts that grow,
// shrink and change in the middle, around the places where a wrong cut
// would show: added tokens, whitespace runs, line breaks, combining marks,
// contractions and digits.
func TestSessionEqualsFullEncodeAfterEdits(t *testing.T) {
	m := qwen3Model(t)
	pieces := []string{"<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|im_", "\n", "\r\n", "  ", "   \n",
		"end|>", "<", "think>", "\t", " ", "word", " Word", "'s", "'ll", "'", "123", "4", "é", "e\u0301", "\u0301", "\u0085", "中文",
		"!!", " (", ")", "{\"a\": 1}", "😀", "x", "\u00a0", "\ufeff"}
	rng := rand.New(rand.NewPCG(1, 2))
	randomText := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	s := m.NewSession()
	text := randomText(50)
	for i := range 3000 {
		switch rng.IntN(4) {
		case 0, 1: // append, the common case
			text += randomText(1 + rng.IntN(8))
		case 2: // cut the tail and write a different one
			text = text[:rng.IntN(len(text)+1)] + randomText(rng.IntN(6))
		case 3: // change something in the middle
			at := rng.IntN(len(text) + 1)
			text = text[:at] + randomText(1) + text[at:]
		}
		got, want := s.Encode(text), m.Encode(text)
		if !slices.Equal(got, want) {
			t.Fatalf("edit %d: session ids differ from a full encode at %d of %d\ntext %q", i, firstDiff(got, want), len(want), text)
		}
		if !slices.Equal(s.BlockHashes(), BlockHashes(want, DefaultBlockSize)) {
			t.Fatalf("edit %d: block hashes differ", i)
		}
	}
}

type prefixVector struct {
	ConvID        string `json:"conv_id"`
	K             int    `json:"k"`
	KNext         int    `json:"k_next"`
	LCPTokens     int    `json:"lcp_tokens"`
	IsTokenPrefix bool   `json:"is_token_prefix"`
}

// TestBlockHashesOfAgentTurnsArePrefixes checks what the router relies on:
// where turn k's tokens are a prefix of turn k+1's, so are its block hashes,
// and where they diverge, the hashes agree exactly up to the diverging block.
func TestBlockHashesOfAgentTurnsArePrefixes(t *testing.T) {
	m := qwen3Model(t)
	byID := map[string]chatVector{}
	for _, v := range readJSONLines[chatVector](t, "chat.jsonl.gz") {
		byID[v.ID] = v
	}
	checked, prefixes := 0, 0
	for _, p := range readJSONLines[prefixVector](t, "prefix.jsonl.gz") {
		cur, okCur := byID[p.ConvID+"/k"+twoDigits(p.K)]
		next, okNext := byID[p.ConvID+"/k"+twoDigits(p.KNext)]
		if !okCur || !okNext {
			continue // chat.jsonl keeps only some steps of each conversation
		}
		_, idsCur, err := m.EncodeChat(cur.request())
		if err != nil {
			t.Fatal(err)
		}
		_, idsNext, err := m.EncodeChat(next.request())
		if err != nil {
			t.Fatal(err)
		}
		if lcp := firstDiff(idsCur, idsNext); lcp != p.LCPTokens {
			t.Errorf("%s k=%d: common token prefix %d, reference says %d", p.ConvID, p.K, lcp, p.LCPTokens)
		}
		hCur, hNext := BlockHashes(idsCur, DefaultBlockSize), BlockHashes(idsNext, DefaultBlockSize)
		if p.IsTokenPrefix {
			prefixes++
			if len(hCur) > len(hNext) || !slices.Equal(hCur, hNext[:len(hCur)]) {
				t.Errorf("%s k=%d: block hashes of the turn are not a prefix of the next turn's", p.ConvID, p.K)
			}
		}
		shared := p.LCPTokens / DefaultBlockSize
		for i := range min(len(hCur), len(hNext)) {
			if same := hCur[i] == hNext[i]; same != (i < shared) {
				t.Errorf("%s k=%d: block %d equal=%v, but %d tokens are shared", p.ConvID, p.K, i, same, p.LCPTokens)
				break
			}
		}
		checked++
	}
	if checked < 5 || prefixes < 3 {
		t.Fatalf("only %d consecutive pairs (%d prefixes) found in chat.jsonl", checked, prefixes)
	}
	t.Logf("%d consecutive turns checked, %d of them token prefixes", checked, prefixes)
}

func twoDigits(n int) string {
	if n < 10 {
		return "0" + string(rune('0'+n))
	}
	return string(rune('0'+n/10)) + string(rune('0'+n%10))
}

// TestSessionCutsNeverStraddle grows texts at the places where reusing the
// tokens of the previous turn up to the end of the common prefix would be
// wrong.
func TestSessionCutsNeverStraddle(t *testing.T) {
	m := qwen3Model(t)
	tests := []struct {
		name  string
		turns []string
	}{
		{"added token completed", []string{"say <|im_", "say <|im_end|>\n"}},
		{"added token prefix of a longer one", []string{"x <think", "x <think>\n", "x <think>\nok</think"}},
		{"letter run extended", []string{"some words", "some wordsmith"}},
		{"whitespace run before a word", []string{"hello   ", "hello   world"}},
		{"line break appended to a whitespace run", []string{"a\n  b\n  ", "a\n  b\n  \nc"}},
		{"combining mark after a letter", []string{"caf e", "caf e\u0301 au lait"}},
		{"contraction completed", []string{"it'", "it's"}},
		{"punctuation run extended", []string{"x !!", "x !!?\n"}},
		{"divergence in the middle", []string{"<|im_start|>user\nabc def<|im_end|>\n", "<|im_start|>user\nabc xyz<|im_end|>\n"}},
		{"text shrinks", []string{"one two three", "one two"}},
		{"same text twice", []string{"same <|im_end|>", "same <|im_end|>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := m.NewSession()
			for i, text := range tc.turns {
				got, want := s.Encode(text), m.Encode(text)
				if !slices.Equal(got, want) {
					t.Fatalf("turn %d %q: session %v, full encode %v", i, text, got, want)
				}
			}
		})
	}
}
