package tokenizer

import (
	"sort"
	"strings"
)

// addedToken is an entry of tokenizer.json's added_tokens: matched in the
// raw text before anything else and never split.
type addedToken struct {
	content    string
	id         uint32
	normalized bool
}

// addedVocab finds added tokens leftmost-longest, the way Hugging Face's
// Aho-Corasick matcher does.
type addedVocab struct {
	byFirst [256][]addedToken // longest first
	maxLen  int
	anyNorm bool
}

func newAddedVocab(tokens []addedToken) *addedVocab {
	v := &addedVocab{}
	for _, t := range tokens {
		v.byFirst[t.content[0]] = append(v.byFirst[t.content[0]], t)
		v.maxLen = max(v.maxLen, len(t.content))
		v.anyNorm = v.anyNorm || t.normalized
	}
	for i := range v.byFirst {
		sort.SliceStable(v.byFirst[i], func(a, b int) bool {
			return len(v.byFirst[i][a].content) > len(v.byFirst[i][b].content)
		})
	}
	return v
}

func (v *addedVocab) hasNormalized() bool { return v.anyNorm }

// find returns the first added token at or after s[from:], as its start,
// end and id; ok is false when there is none.
func (v *addedVocab) find(s string, from int) (start, end int, id uint32, ok bool) {
	if v.maxLen == 0 {
		return 0, 0, 0, false
	}
	for i := from; i < len(s); i++ {
		cands := v.byFirst[s[i]]
		if cands == nil {
			continue
		}
		for _, t := range cands {
			if strings.HasPrefix(s[i:], t.content) {
				return i, i + len(t.content), t.id, true
			}
		}
	}
	return 0, 0, 0, false
}
