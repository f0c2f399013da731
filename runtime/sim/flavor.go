package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"

	hruntime "github.com/hearth-llm/hearth/runtime"
)

// The simulator plays an engine kind (runtime.Kind): vLLM, the default, or
// SGLang. The engine model (cache, scheduler, timing) is the same; what
// differs is what the outside sees: block hashes and KV-event layout,
// metric names, health endpoints, start-up lines. SGLang's: SHA-256 page
// hashes and one BlockStored per page in the array event layout, sglang:*
// metrics, /health that waits for warm-up, /health_generate and
// /server_info.

// Plays reports whether the simulator can play an engine kind.
func Plays(k hruntime.Kind) bool { return k == hruntime.KindVLLM || k == hruntime.KindSGLang }

// ParseKind parses the kind the simulator is to play: "vllm" (or "") and
// "sglang", ignoring case.
func ParseKind(s string) (hruntime.Kind, error) {
	k := hruntime.Kind(strings.ToLower(strings.TrimSpace(s)))
	switch {
	case k == "":
		return hruntime.KindVLLM, nil
	case Plays(k):
		return k, nil
	}
	return "", fmt.Errorf("unknown engine flavor %q (want vllm or sglang)", s)
}

// SGLang's block hashes (its radix cache's page hashes, which its KV events
// carry): a page's digest is SHA-256 over the previous page's 32-byte digest
// (nothing for a request's first page) followed by the page's token ids as
// 4-byte little-endian unsigned integers; the event id is the digest's
// first 8 bytes read big-endian, which SGLang writes as a signed int64 (the
// same bits kept here as a uint64). The chain has no seed: equal prefixes
// hash equally in every SGLang process.

// sglangPageDigest returns the digest of one page after prior (nil for the
// first page). buf is scratch space; the grown buffer is returned so that
// the caller can keep it and hash without allocating.
func sglangPageDigest(prior *[sha256.Size]byte, tokens []uint32, buf []byte) ([sha256.Size]byte, []byte) {
	buf = buf[:0]
	if prior != nil {
		buf = append(buf, prior[:]...)
	}
	for _, t := range tokens {
		buf = binary.LittleEndian.AppendUint32(buf, t)
	}
	return sha256.Sum256(buf), buf
}

// sglangSaltDigest is what a salted request's first page chains on: SGLang
// keys its radix tree by the salt and hashes it into the request's pages,
// so that they differ from every other salt's.
func sglangSaltDigest(salt []byte) [sha256.Size]byte {
	return sha256.Sum256(append([]byte("sglang-cache-salt\x00"), salt...))
}

// sglangBlockID is the id of a page in SGLang's KV events.
func sglangBlockID(digest *[sha256.Size]byte) uint64 {
	return binary.BigEndian.Uint64(digest[:8])
}

// SGLangBlockHashes returns SGLang's ids of the full pages of tokens, as its
// KV events carry them (signed int64s in the events, the same bits here).
func SGLangBlockHashes(tokens []uint32, pageSize int) []uint64 {
	if pageSize < 1 {
		return nil
	}
	var out []uint64
	var prior *[sha256.Size]byte
	var buf []byte
	for i := 0; i+pageSize <= len(tokens); i += pageSize {
		var d [sha256.Size]byte
		d, buf = sglangPageDigest(prior, tokens[i:i+pageSize], buf)
		out = append(out, sglangBlockID(&d))
		prior = &d
	}
	return out
}
