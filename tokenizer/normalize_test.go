package tokenizer

import (
	"strings"

	"golang.org/x/text/unicode/norm"
)

// normalizeLikeEncode returns the text Encode actually tokenizes: each stretch
// between added tokens in NFC, added tokens as written.
func normalizeLikeEncode(m *Model, text string) string {
	var b strings.Builder
	for pos := 0; pos <= len(text); {
		start, end, _, ok := m.added.find(text, pos)
		segEnd := len(text)
		if ok {
			segEnd = start
		}
		seg := text[pos:segEnd]
		if m.normalize {
			seg = norm.NFC.String(seg)
		}
		b.WriteString(seg)
		if !ok {
			break
		}
		b.WriteString(text[start:end])
		pos = end
	}
	return b.String()
}
