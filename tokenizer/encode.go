package tokenizer

import (
	"context"

	"golang.org/x/text/unicode/norm"
)

// EncodeContext is Encode for a request: it looks at ctx between words
// and, once ctx is done, stops and returns ctx's error, so that a client
// that hangs up stops its prompt's tokenization. A single word is never
// cut: the merge of the longest takes O(n log n) (BenchmarkMergeLongWord).
func (m *Model) EncodeContext(ctx context.Context, text string) ([]uint32, error) {
	st := &stopper{done: ctx.Done()}
	ids := m.encodeAppend(make([]uint32, 0, len(text)/3+4), text, 0, nil, st)
	if st.stopped {
		return nil, ctx.Err()
	}
	return ids, nil
}

// stopper tells an encoding to stop once done is closed. It looks at done
// once every stopCheckBytes of words, not at every word: most words are a
// few bytes long, and a look costs more than merging one. A nil *stopper
// never stops.
type stopper struct {
	done    <-chan struct{}
	since   int
	stopped bool
}

const stopCheckBytes = 16 << 10

// after counts n bytes encoded and reports whether to stop.
func (s *stopper) after(n int) bool {
	if s == nil || s.done == nil {
		return false
	}
	if s.since += n; s.since >= stopCheckBytes {
		s.since = 0
		select {
		case <-s.done:
			s.stopped = true
		default:
		}
	}
	return s.stopped
}

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
// receives the checkpoints found (offsets shifted by base). When st stops
// it, what dst holds is incomplete (st.stopped).
func (m *Model) encodeAppend(dst []uint32, text string, base int, cps *[]checkpoint, st *stopper) []uint32 {
	maxAdded := m.added.maxLen
	for pos := 0; pos < len(text); {
		start, end, id, found := m.added.find(text, pos)
		segEnd := len(text)
		if found {
			segEnd = start
		}
		dst = m.encodeSegment(dst, text[pos:segEnd], base+pos, segEnd == len(text), maxAdded, cps, st)
		if !found || (st != nil && st.stopped) {
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
func (m *Model) encodeSegment(dst []uint32, seg string, base int, atEnd bool, maxAdded int, cps *[]checkpoint, st *stopper) []uint32 {
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
			if st.after(end - i) {
				return dst
			}
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
		if st == nil || !st.stopped { // the split runs on; the words are no longer merged
			dst = m.bpe.encodeWord(dst, normalized[start:end])
			st.after(end - start)
		}
	})
	return dst
}
