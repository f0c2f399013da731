package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/hearth-llm/hearth/kvevents"
)

// Flavor is the engine the simulator stands in for. The engine model
// (cache, scheduler, timing) is the same; what differs is what the outside
// sees: block hashes and KV-event layout, metric names, health endpoints,
// start-up lines.
type Flavor uint8

const (
	// FlavorVLLM is vLLM V1, the default.
	FlavorVLLM Flavor = iota
	// FlavorSGLang is SGLang: SHA-256 page hashes and one BlockStored per
	// page in the array event layout, sglang:* metrics, /health that waits
	// for warm-up, /health_generate and /get_server_info.
	FlavorSGLang
)

// String returns the name ParseFlavor accepts: "vllm" or "sglang".
func (f Flavor) String() string {
	if f == FlavorSGLang {
		return "sglang"
	}
	return "vllm"
}

// ParseFlavor parses "vllm" (or "") and "sglang", ignoring case.
func ParseFlavor(s string) (Flavor, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "vllm":
		return FlavorVLLM, nil
	case "sglang":
		return FlavorSGLang, nil
	}
	return 0, fmt.Errorf("unknown engine flavor %q (want vllm or sglang)", s)
}

// EventFormat is the KV-event payload layout the flavour's engine writes:
// vLLM's current map form, or SGLang's positional one.
func (f Flavor) EventFormat() kvevents.Format {
	if f == FlavorSGLang {
		return kvevents.FormatSGLang
	}
	return kvevents.FormatMap
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
