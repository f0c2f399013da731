package tokenizer

import (
	"encoding/binary"
	"testing"

	"github.com/zeebo/xxh3"
)

// TestBlockHashesFollowTheSpec recomputes the chain from the written formula
// (docs/ARCHITECTURE.md, "Block hashes") with nothing but xxh3, so a change
// in the implementation that drifts from the formula fails here.
func TestBlockHashesFollowTheSpec(t *testing.T) {
	tokens := make([]uint32, 16*3+5)
	for i := range tokens {
		tokens[i] = uint32(i*7919 + 3)
	}
	got := BlockHashes(tokens, 16)
	if len(got) != 3 {
		t.Fatalf("got %d hashes for 53 tokens, want 3 (partial block not hashed)", len(got))
	}
	var prev uint64
	for i := 0; i < 3; i++ {
		raw := make([]byte, 64)
		for j, tok := range tokens[16*i : 16*i+16] {
			binary.LittleEndian.PutUint32(raw[4*j:], tok)
		}
		local := xxh3.HashSeed(raw, 1337)
		want := local
		if i > 0 {
			var pair [16]byte
			binary.LittleEndian.PutUint64(pair[:], prev)
			binary.LittleEndian.PutUint64(pair[8:], local)
			want = xxh3.HashSeed(pair[:], 1337)
		}
		if uint64(got[i]) != want {
			t.Errorf("block %d: got %#x, want %#x", i, got[i], want)
		}
		prev = want
	}
}

func TestBlockHashesDependOnWholePrefix(t *testing.T) {
	a := make([]uint32, 32)
	b := make([]uint32, 32)
	b[0] = 1 // differs only in the first block
	ha, hb := BlockHashes(a, 16), BlockHashes(b, 16)
	if ha[0] == hb[0] || ha[1] == hb[1] {
		t.Fatalf("second block hashes equal although prefixes differ: %x %x", ha, hb)
	}
}

func TestLoRAHashesDiffer(t *testing.T) {
	tokens := make([]uint32, 16)
	base := Hasher{}.AppendBlockHashes(nil, nil, tokens, 16)
	lora := NewHasher("sql-adapter").AppendBlockHashes(nil, nil, tokens, 16)
	if base[0] == lora[0] {
		t.Fatal("LoRA adapter hashes equal the base model's")
	}
	if same := NewHasher("").AppendBlockHashes(nil, nil, tokens, 16); same[0] != base[0] {
		t.Fatal(`NewHasher("") differs from the zero Hasher`)
	}
}

func TestAppendBlockHashesContinuesAChain(t *testing.T) {
	tokens := make([]uint32, 64)
	for i := range tokens {
		tokens[i] = uint32(i)
	}
	whole := BlockHashes(tokens, 16)
	first := Hasher{}.AppendBlockHashes(nil, nil, tokens[:32], 16)
	rest := Hasher{}.AppendBlockHashes(first, &first[1], tokens[32:], 16)
	for i := range whole {
		if whole[i] != rest[i] {
			t.Fatalf("block %d: incremental %x, whole %x", i, rest[i], whole[i])
		}
	}
}

func BenchmarkBlockHashes8k(b *testing.B) {
	tokens := make([]uint32, 8000)
	for i := range tokens {
		tokens[i] = uint32(i)
	}
	dst := make([]SeqHash, 0, 500)
	b.ReportAllocs()
	b.SetBytes(int64(4 * len(tokens)))
	for b.Loop() {
		dst = Hasher{}.AppendBlockHashes(dst[:0], nil, tokens, 16)
	}
}
