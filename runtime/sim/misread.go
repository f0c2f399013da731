package sim

import (
	"strings"

	"github.com/hearth-llm/hearth/tokenizer"
)

// MisreadToken returns a tokenizer that reads special token's text as
// plain text (split after its first byte, so that no added token matches),
// as a tokenizer whose vocabulary lacks that token would: an engine given
// it tokenizes differently from Hearth wherever the token appears. It
// plays a wrong tokenizer for tests of Hearth's start-up self-check.
func MisreadToken(inner Tokenizer, special string) Tokenizer {
	return misreadToken{inner: inner, special: special}
}

type misreadToken struct {
	inner   Tokenizer
	special string
}

func (m misreadToken) Encode(text string) []uint32 {
	var ids []uint32
	for {
		at := strings.Index(text, m.special)
		if at < 0 || m.special == "" {
			return append(ids, m.inner.Encode(text)...)
		}
		ids = append(ids, m.inner.Encode(text[:at+1])...)
		text = text[at+1:]
	}
}

func (m misreadToken) Decode(ids []uint32) string { return m.inner.Decode(ids) }

func (m misreadToken) ApplyChatTemplate(req tokenizer.ChatRequest) (string, error) {
	return m.inner.ApplyChatTemplate(req)
}
