package tokenizer

import (
	"golang.org/x/text/unicode/norm"
)

// checkpoint is a place in a text where tokenization may restart: the
// tokens before offset are final as long as the text before peek is
// unchanged.
type checkpoint struct {
	offset int // byte offset in the raw text, a word or added-token boundary
	tokens int // number of tokens before offset
	peek   int // one past the last byte that decided the tokens before offset
}

// encodeAppend tokenizes text and appends its ids to dst. base is the offset
// of text within a larger string, for checkpoints; cps, when not nil,
// receives the checkpoints found (offsets shifted by base).
func (m *Model) encodeAppend(dst []uint32, text string, base int, cps *[]checkpoint) []uint32 {
	maxAdded := m.added.maxLen
	for pos := 0; pos < len(text); {
		start, end, id, found := m.added.find(text, pos)
		segEnd := len(text)
		if found {
			segEnd = start
		}
		dst = m.encodeSegment(dst, text[pos:segEnd], base+pos, segEnd == len(text), maxAdded, cps)
		if !found {
			break
		}
		dst = append(dst, id)
		if cps != nil {
			// Whether an added token starts at start was decided by at
			// most maxAdded bytes from any position before end.
			*cps = append(*cps, checkpoint{offset: base + end, tokens: len(dst), peek: base + max(end, start+maxAdded)})
		}
		pos = end
	}
	return dst
}

// encodeSegment tokenizes text between added tokens. atEnd says the segment
// runs to the end of the whole text (nothing after it was seen).
func (m *Model) encodeSegment(dst []uint32, seg string, base int, atEnd bool, maxAdded int, cps *[]checkpoint) []uint32 {
	if seg == "" {
		return dst
	}
	normalized := seg
	if m.normalize && !norm.NFC.IsNormalString(seg) {
		normalized = norm.NFC.String(seg)
		// Offsets in the normalized text no longer match the raw text, so
		// no checkpoint can be placed inside it.
		cps = nil
	}
	// segPeek is what seeing the end of the segment costs: the added token
	// that ends it, or the end of the text (never safe to reuse).
	segPeek := base + len(seg) + maxAdded
	if atEnd {
		segPeek = int(^uint(0) >> 1)
	}
	if sc, ok := m.pre.(scanner); ok {
		for i := 0; i < len(normalized); {
			end, peek := sc.next(normalized, i)
			dst = m.bpe.encodeWord(dst, normalized[i:end])
			i = end
			if cps != nil && end < len(normalized) && normalized[end] < 0x80 {
				p := base + peek
				if peek > len(normalized) {
					p = segPeek
				}
				// A word boundary followed by ASCII is also a boundary of
				// NFC, so normalizing the rest alone gives the same text.
				*cps = append(*cps, checkpoint{offset: base + end, tokens: len(dst), peek: max(p, base+end+maxAdded)})
			}
		}
		return dst
	}
	m.pre.split(normalized, func(start, end, _ int) {
		dst = m.bpe.encodeWord(dst, normalized[start:end])
	})
	return dst
}
