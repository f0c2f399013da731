package tokenizer

import (
	"encoding/binary"

	"github.com/zeebo/xxh3"
)

// DefaultBlockSize is the number of tokens in one KV block, vLLM's default
// on CUDA, and Hearth's one block size: the KV block (vLLM) or page
// (SGLang) size every engine runs with, the size the router and the
// gateway hash prompts in, and the unit the planner counts KV capacity in.
// An engine with another size would publish blocks the router cannot
// match.
const DefaultBlockSize = 16

// hashSeed is the seed of every block hash; it matches Dynamo's router so
// that hashes are comparable across implementations.
const hashSeed = 1337

// SeqHash identifies a full KV block together with its whole prefix: two
// blocks have the same SeqHash only if every token before and in them is the
// same. It is what the router indexes.
type SeqHash uint64

// Hasher hashes token ids into chained block hashes. The zero value hashes
// for the base model; use NewHasher for a LoRA adapter.
type Hasher struct {
	seed uint64
	// salt is SaltKey of the request's cache_salt, 0 for none.
	salt uint64
}

// WithSalt returns h hashing for requests with the given cache_salt ("" for
// none). Both engines isolate a salted request's KV from every other
// salt's: vLLM puts the salt in the extra keys of a request's first block
// (vllm/v1/core/kv_cache_utils.py, generate_block_hash_extra_keys), so
// every block chained after it differs; SGLang keys its radix tree by salt
// and hashes it into every page. Hearth mixes it into the first block's
// local hash (MixSalt), which the chain carries to every later block, so
// that a salted prompt has one set of sequence hashes whichever engine
// stored it. Blocks continuing a parent are hashed as usual: the parent's
// sequence hash already carries the salt.
func (h Hasher) WithSalt(salt string) Hasher {
	h.salt = 0
	if salt != "" {
		h.salt = SaltKey([]byte(salt))
	}
	return h
}

// SaltKey is what a cache_salt mixes into the local hash of a sequence's
// first block: never 0, so that a salt always changes the hash.
func SaltKey(salt []byte) uint64 {
	return xxh3.HashSeed(salt, 0x6b76_7361_6c74) | 1 // "kvsalt"
}

// MixSalt returns the local hash of a sequence's first block for a request
// with the given cache_salt; an empty salt leaves it unchanged.
func MixSalt(local uint64, salt []byte) uint64 {
	if len(salt) == 0 {
		return local
	}
	return local ^ SaltKey(salt)
}

// NewHasher returns a Hasher for blocks computed with the named LoRA adapter
// ("" for the base model). Adapters get their own hash space: the same tokens
// under another adapter are different KV.
func NewHasher(loraName string) Hasher {
	if loraName == "" {
		return Hasher{seed: hashSeed}
	}
	return Hasher{seed: hashSeed + xxh3.HashString(loraName)}
}

func (h Hasher) seedOrDefault() uint64 {
	if h.seed == 0 {
		return hashSeed
	}
	return h.seed
}

// LocalHash hashes the token ids of one block on their own: XXH3-64 over the
// ids as little-endian uint32s.
func (h Hasher) LocalHash(block []uint32) uint64 {
	var buf [4 * 64]byte
	var b []byte
	if len(block) <= 64 {
		b = buf[:4*len(block)]
	} else {
		b = make([]byte, 4*len(block))
	}
	for i, t := range block {
		binary.LittleEndian.PutUint32(b[4*i:], t)
	}
	return xxh3.HashSeed(b, h.seedOrDefault())
}

// Chain returns the sequence hash of a block whose parent has sequence hash
// parent and whose own tokens have local hash local.
func Chain(parent SeqHash, local uint64) SeqHash {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(parent))
	binary.LittleEndian.PutUint64(b[8:], local)
	return SeqHash(xxh3.HashSeed(b[:], hashSeed))
}

// AppendBlockHashes appends to dst the sequence hashes of every full block of
// tokens (a trailing partial block is not hashed) and returns the extended
// slice. parent is the sequence hash of the block before tokens[0], or nil
// when tokens start the sequence.
func (h Hasher) AppendBlockHashes(dst []SeqHash, parent *SeqHash, tokens []uint32, blockSize int) []SeqHash {
	if blockSize <= 0 {
		blockSize = DefaultBlockSize
	}
	for i := 0; i+blockSize <= len(tokens); i += blockSize {
		local := h.LocalHash(tokens[i : i+blockSize])
		var s SeqHash
		if parent == nil {
			s = SeqHash(local ^ h.salt)
		} else {
			s = Chain(*parent, local)
		}
		dst = append(dst, s)
		parent = &dst[len(dst)-1]
	}
	return dst
}

// BlockHashes returns the sequence hashes of every full block of tokens,
// hashed for the base model.
func BlockHashes(tokens []uint32, blockSize int) []SeqHash {
	if blockSize <= 0 {
		blockSize = DefaultBlockSize
	}
	return Hasher{}.AppendBlockHashes(make([]SeqHash, 0, len(tokens)/blockSize), nil, tokens, blockSize)
}

// SaltedBlockHashes returns the sequence hashes of every full block of
// tokens for a request with the given cache_salt (Hasher.WithSalt), hashed
// for the base model; an empty salt gives BlockHashes.
func SaltedBlockHashes(tokens []uint32, blockSize int, salt string) []SeqHash {
	if blockSize <= 0 {
		blockSize = DefaultBlockSize
	}
	h := Hasher{}.WithSalt(salt)
	return h.AppendBlockHashes(make([]SeqHash, 0, len(tokens)/blockSize), nil, tokens, blockSize)
}
