package tokenizer

import (
	"slices"
	"testing"
)

// TestSaltedHashesChainFromTheFirstBlock: the salt changes the first
// block's hash and so every block after it, and a prompt continuing a
// salted parent hashes as the whole salted prompt does.
func TestSaltedHashesChainFromTheFirstBlock(t *testing.T) {
	t.Parallel()
	toks := make([]uint32, 64)
	for i := range toks {
		toks[i] = uint32(i)
	}
	salted := SaltedBlockHashes(toks, 16, "x")
	plain := BlockHashes(toks, 16)
	for i := range plain {
		if salted[i] == plain[i] {
			t.Errorf("block %d: salted hash equals the unsalted one", i)
		}
	}
	h := Hasher{}.WithSalt("x")
	head := h.AppendBlockHashes(nil, nil, toks[:32], 16)
	tail := h.AppendBlockHashes(nil, &head[1], toks[32:], 16)
	if !slices.Equal(append(head, tail...), salted) {
		t.Error("continuing a salted parent differs from hashing the salted prompt whole")
	}
	if !slices.Equal(SaltedBlockHashes(toks, 16, ""), plain) {
		t.Error("an empty salt changes the hashes")
	}
}
