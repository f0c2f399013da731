package tokenizer

import (
	"strings"
	"testing"
)

// TestTokenStrings: ids spelled as Qwen3's tokenizer.json writes them
// (byte-level alphabet, added tokens by content), as convert_ids_to_tokens.
func TestTokenStrings(t *testing.T) {
	tok, err := Qwen3()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ text, want string }{
		{"hello world", "hello|Ġworld"},
		{"<|im_start|>user\n", "<|im_start|>|user|Ċ"},
		{"é", "Ã©"},
	} {
		if got := strings.Join(tok.TokenStrings(tok.Encode(tc.text)), "|"); got != tc.want {
			t.Errorf("TokenStrings(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
	if got := tok.TokenStrings([]uint32{1 << 30}); got[0] != "" {
		t.Errorf("an id outside the vocabulary spells %q", got[0])
	}
}
