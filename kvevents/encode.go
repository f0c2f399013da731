package kvevents

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Format is a layout of the EventBatch payload, as one engine release
// writes it.
type Format uint8

const (
	// FormatMap is vLLM since mid-2026: the batch an array, each event a
	// map with a "type" key.
	FormatMap Format = iota
	// FormatArray is older vLLM: each event a positional array whose first
	// element is the class name.
	FormatArray
	// FormatMapBatch is vLLM's main branch, which dropped msgspec's
	// array_like from EventBatch as well as from the events: the batch a
	// map {"ts", "events", "data_parallel_rank"}, the events maps.
	FormatMapBatch
	// FormatSGLang is SGLang: positional events with SGLang's fields (no
	// lora_name, extra keys or group), its medium names, and block hashes
	// as signed int64s.
	FormatSGLang
	// FormatSGLangMap is SGLang v0.5.23's map events: the batch an array
	// [ts, events, attn_dp_rank], each event a map tagged "type" with
	// SGLang's fields, a salted request's "cache_salt" at the top level
	// and a "component_type" when the engine labels components.
	FormatSGLangMap
)

// SGLang reports whether f is one of SGLang's layouts.
func (f Format) SGLang() bool { return f == FormatSGLang || f == FormatSGLangMap }

// String returns the name ParseFormat accepts.
func (f Format) String() string {
	switch f {
	case FormatArray:
		return "array"
	case FormatMapBatch:
		return "map-batch"
	case FormatSGLang:
		return "sglang"
	case FormatSGLangMap:
		return "sglang-map"
	}
	return "map"
}

// ParseFormat parses "map" (or ""), "array", "map-batch", "sglang" or
// "sglang-map".
func ParseFormat(s string) (Format, error) {
	switch s {
	case "map", "":
		return FormatMap, nil
	case "array":
		return FormatArray, nil
	case "map-batch":
		return FormatMapBatch, nil
	case "sglang":
		return FormatSGLang, nil
	case "sglang-map":
		return FormatSGLangMap, nil
	}
	return 0, fmt.Errorf("kvevents: unknown format %q (want map, array, map-batch, sglang or sglang-map)", s)
}

// AppendBatch appends the msgpack encoding of b in format f to dst and
// returns the extended buffer. It grows dst at most once.
//
// Integers take the smallest msgpack encoding that holds them, as Python's
// encoders choose: a vLLM hash of 2^63 or more is a msgpack uint64, an
// SGLang hash is written as the signed int64 with the same bits. Fields
// msgspec would leave out as defaults are left out: data_parallel_rank
// without HasDPRank, extra_keys when empty, group_idx when 0. An event of
// KindUnknown is written as a bare "Unknown" tag.
func AppendBatch(dst []byte, b *Batch, f Format) []byte {
	dst = slices.Grow(dst, sizeBound(b))
	fields := 2
	if b.HasDPRank {
		fields = 3
	}
	if f == FormatMapBatch {
		dst = appendMapLen(dst, fields)
		dst = appendStr(dst, "ts")
		dst = appendFloat64(dst, b.TS)
		dst = appendStr(dst, "events")
	} else {
		dst = appendArrayLen(dst, fields)
		dst = appendFloat64(dst, b.TS)
	}
	dst = appendArrayLen(dst, len(b.Events))
	for i := range b.Events {
		ev := &b.Events[i]
		switch f {
		case FormatArray:
			dst = appendEventArray(dst, ev)
		case FormatSGLang:
			dst = appendEventSGLang(dst, ev)
		case FormatSGLangMap:
			dst = appendEventSGLangMap(dst, ev)
		default:
			dst = appendEventMap(dst, ev)
		}
	}
	if b.HasDPRank {
		if f == FormatMapBatch {
			dst = appendStr(dst, "data_parallel_rank")
		}
		dst = appendInt(dst, b.DPRank)
	}
	return dst
}

// sizeBound is an upper bound of the encoded size of b in any format.
func sizeBound(b *Batch) int {
	n := 64
	for i := range b.Events {
		ev := &b.Events[i]
		n += 300 + len(ev.LoRAName) + len(ev.CacheSalt) + len(ev.ComponentType) + len(ev.SpecKind) + 9*len(ev.BlockHashes) + 5*len(ev.TokenIDs)
		if ev.BytesHashes {
			n += (2 + digestSize - 9) * (len(ev.BlockHashes) + 1) // and the parent
		}
		for _, raw := range ev.ExtraKeys {
			n += max(len(raw), 1)
		}
	}
	return n
}

// Field order follows vLLM's BlockStored / BlockRemoved / AllBlocksCleared
// structs; fields without a default (lora_id, medium, lora_name) are always
// written.
func appendEventMap(dst []byte, ev *Event) []byte {
	switch ev.Kind {
	case BlockStored:
		n := 8
		if len(ev.ExtraKeys) > 0 {
			n++
		}
		if ev.GroupIdx != 0 {
			n++
		}
		if len(ev.SpecKind) > 0 {
			n++
		}
		if ev.SlidingWindow != 0 {
			n++
		}
		dst = appendMapLen(dst, n)
		dst = appendStr(dst, "type")
		dst = appendStr(dst, "BlockStored")
		dst = appendStr(dst, "block_hashes")
		dst = appendHashes(dst, ev.BlockHashes, vllmHashForm(ev))
		dst = appendStr(dst, "parent_block_hash")
		dst = appendParent(dst, ev, vllmHashForm(ev))
		dst = appendStr(dst, "token_ids")
		dst = appendTokens(dst, ev.TokenIDs)
		dst = appendStr(dst, "block_size")
		dst = appendInt(dst, int64(ev.BlockSize))
		dst = appendStr(dst, "lora_id")
		dst = appendLoRAID(dst, ev)
		dst = appendStr(dst, "medium")
		dst = appendStr(dst, ev.Medium.String())
		dst = appendStr(dst, "lora_name")
		dst = appendOptBytes(dst, ev.LoRAName)
		if len(ev.ExtraKeys) > 0 {
			dst = appendStr(dst, "extra_keys")
			dst = appendExtraKeys(dst, ev.ExtraKeys)
		}
		if ev.GroupIdx != 0 {
			dst = appendStr(dst, "group_idx")
			dst = appendInt(dst, ev.GroupIdx)
		}
		if len(ev.SpecKind) > 0 {
			dst = appendStr(dst, "kv_cache_spec_kind")
			dst = appendStr(dst, string(ev.SpecKind))
		}
		if ev.SlidingWindow != 0 {
			dst = appendStr(dst, "kv_cache_spec_sliding_window")
			dst = appendInt(dst, ev.SlidingWindow)
		}
	case BlockRemoved:
		n := 3
		if ev.GroupIdx != 0 {
			n++
		}
		dst = appendMapLen(dst, n)
		dst = appendStr(dst, "type")
		dst = appendStr(dst, "BlockRemoved")
		dst = appendStr(dst, "block_hashes")
		dst = appendHashes(dst, ev.BlockHashes, vllmHashForm(ev))
		dst = appendStr(dst, "medium")
		dst = appendStr(dst, ev.Medium.String())
		if ev.GroupIdx != 0 {
			dst = appendStr(dst, "group_idx")
			dst = appendInt(dst, ev.GroupIdx)
		}
	default:
		dst = appendMapLen(dst, 1)
		dst = appendStr(dst, "type")
		dst = appendStr(dst, ev.Kind.String())
	}
	return dst
}

// appendEventArray writes the positional form. A field with a default can
// only be left out when every field after it is, so a group_idx forces an
// extra_keys (nil) before it, and a spec kind or window both, and each
// other.
func appendEventArray(dst []byte, ev *Event) []byte {
	switch ev.Kind {
	case BlockStored:
		n := 8
		switch {
		case len(ev.SpecKind) > 0 || ev.SlidingWindow != 0:
			n = 12
		case ev.GroupIdx != 0:
			n = 10
		case len(ev.ExtraKeys) > 0:
			n = 9
		}
		dst = appendArrayLen(dst, n)
		dst = appendStr(dst, "BlockStored")
		dst = appendHashes(dst, ev.BlockHashes, vllmHashForm(ev))
		dst = appendParent(dst, ev, vllmHashForm(ev))
		dst = appendTokens(dst, ev.TokenIDs)
		dst = appendInt(dst, int64(ev.BlockSize))
		dst = appendLoRAID(dst, ev)
		dst = appendStr(dst, ev.Medium.String())
		dst = appendOptBytes(dst, ev.LoRAName)
		if n >= 9 {
			if len(ev.ExtraKeys) > 0 {
				dst = appendExtraKeys(dst, ev.ExtraKeys)
			} else {
				dst = append(dst, 0xc0)
			}
		}
		if n >= 10 {
			dst = appendInt(dst, ev.GroupIdx)
		}
		if n == 12 {
			dst = appendOptBytes(dst, ev.SpecKind)
			if ev.SlidingWindow != 0 {
				dst = appendInt(dst, ev.SlidingWindow)
			} else {
				dst = append(dst, 0xc0)
			}
		}
	case BlockRemoved:
		n := 3
		if ev.GroupIdx != 0 {
			n = 4
		}
		dst = appendArrayLen(dst, n)
		dst = appendStr(dst, "BlockRemoved")
		dst = appendHashes(dst, ev.BlockHashes, vllmHashForm(ev))
		dst = appendStr(dst, ev.Medium.String())
		if n == 4 {
			dst = appendInt(dst, ev.GroupIdx)
		}
	default:
		dst = appendArrayLen(dst, 1)
		dst = appendStr(dst, ev.Kind.String())
	}
	return dst
}

// appendEventSGLang writes SGLang's positional classes: BlockStored
// [tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id,
// medium], with a component type appended when the event has one
// (BlockStoredWithComponentType) and then a salted request's metadata
// {"cache_salt": ...} (BlockStoredWithMetadata); BlockRemoved [tag,
// block_hashes, medium] and its component type.
func appendEventSGLang(dst []byte, ev *Event) []byte {
	switch ev.Kind {
	case BlockStored:
		n := 7
		if len(ev.ComponentType) > 0 {
			n++
		}
		if len(ev.CacheSalt) > 0 {
			n++
		}
		dst = appendArrayLen(dst, n)
		dst = appendStr(dst, "BlockStored")
		dst = appendHashes(dst, ev.BlockHashes, hashSigned)
		dst = appendParent(dst, ev, hashSigned)
		dst = appendTokens(dst, ev.TokenIDs)
		dst = appendInt(dst, int64(ev.BlockSize))
		dst = appendLoRAID(dst, ev)
		dst = appendStr(dst, ev.Medium.sglangName())
		if len(ev.ComponentType) > 0 {
			dst = appendOptBytes(dst, ev.ComponentType)
		}
		if len(ev.CacheSalt) > 0 {
			dst = appendMapLen(dst, 1)
			dst = appendStr(dst, "cache_salt")
			dst = appendOptBytes(dst, ev.CacheSalt)
		}
	case BlockRemoved:
		n := 3
		if len(ev.ComponentType) > 0 {
			n++
		}
		dst = appendArrayLen(dst, n)
		dst = appendStr(dst, "BlockRemoved")
		dst = appendHashes(dst, ev.BlockHashes, hashSigned)
		dst = appendStr(dst, ev.Medium.sglangName())
		if n == 4 {
			dst = appendOptBytes(dst, ev.ComponentType)
		}
	default:
		dst = appendArrayLen(dst, 1)
		dst = appendStr(dst, ev.Kind.String())
	}
	return dst
}

// appendEventSGLangMap writes SGLang's map events: the fields of its
// classes by name, medium in SGLang's names, hashes as signed ints, and
// cache_salt and component_type only when the event has them.
func appendEventSGLangMap(dst []byte, ev *Event) []byte {
	switch ev.Kind {
	case BlockStored:
		n := 7
		if len(ev.CacheSalt) > 0 {
			n++
		}
		if len(ev.ComponentType) > 0 {
			n++
		}
		dst = appendMapLen(dst, n)
		dst = appendStr(dst, "type")
		dst = appendStr(dst, "BlockStored")
		dst = appendStr(dst, "block_hashes")
		dst = appendHashes(dst, ev.BlockHashes, hashSigned)
		dst = appendStr(dst, "parent_block_hash")
		dst = appendParent(dst, ev, hashSigned)
		dst = appendStr(dst, "token_ids")
		dst = appendTokens(dst, ev.TokenIDs)
		dst = appendStr(dst, "block_size")
		dst = appendInt(dst, int64(ev.BlockSize))
		dst = appendStr(dst, "lora_id")
		dst = appendLoRAID(dst, ev)
		dst = appendStr(dst, "medium")
		dst = appendStr(dst, ev.Medium.sglangName())
		if len(ev.CacheSalt) > 0 {
			dst = appendStr(dst, "cache_salt")
			dst = appendOptBytes(dst, ev.CacheSalt)
		}
		if len(ev.ComponentType) > 0 {
			dst = appendStr(dst, "component_type")
			dst = appendOptBytes(dst, ev.ComponentType)
		}
	case BlockRemoved:
		n := 3
		if len(ev.ComponentType) > 0 {
			n++
		}
		dst = appendMapLen(dst, n)
		dst = appendStr(dst, "type")
		dst = appendStr(dst, "BlockRemoved")
		dst = appendStr(dst, "block_hashes")
		dst = appendHashes(dst, ev.BlockHashes, hashSigned)
		dst = appendStr(dst, "medium")
		dst = appendStr(dst, ev.Medium.sglangName())
		if n == 4 {
			dst = appendStr(dst, "component_type")
			dst = appendOptBytes(dst, ev.ComponentType)
		}
	default:
		dst = appendMapLen(dst, 1)
		dst = appendStr(dst, "type")
		dst = appendStr(dst, ev.Kind.String())
	}
	return dst
}

// hashForm is how an engine writes a block hash.
type hashForm uint8

const (
	hashUnsigned hashForm = iota // vLLM's ints: uint64 above 2^63
	hashSigned                   // SGLang's ints: the same bits as an int64
	hashBytes                    // vLLM's raw digests (Event.BytesHashes)
)

// vllmHashForm is the form vLLM writes ev's hashes in.
func vllmHashForm(ev *Event) hashForm {
	if ev.BytesHashes {
		return hashBytes
	}
	return hashUnsigned
}

func appendHashes(dst []byte, hashes []uint64, form hashForm) []byte {
	dst = appendArrayLen(dst, len(hashes))
	for _, h := range hashes {
		dst = appendHash(dst, h, form)
	}
	return dst
}

func appendHash(dst []byte, h uint64, form hashForm) []byte {
	switch form {
	case hashSigned:
		return appendInt(dst, int64(h))
	case hashBytes:
		return appendDigest(dst, h)
	}
	return appendUint(dst, h)
}

// digestSize is the length of vLLM's block hashes as bytes: a SHA-256
// digest under its default --prefix-caching-hash-algo.
const digestSize = 32

// appendDigest writes the block whose key is h as vLLM sends it as bytes:
// a 32-byte msgpack bin (msgspec's encoding of bytes) whose last 8 bytes,
// big-endian, are h (BytesHashKey). The 24 bytes before them are the rest
// of the engine's digest, which a key does not keep; they are filled with a
// mix of h so that every block's digest differs there too, as real ones do,
// and a reader that took the wrong end of it would get keys that match
// nothing.
func appendDigest(dst []byte, h uint64) []byte {
	dst = append(dst, 0xc4, digestSize)
	x := h
	for range (digestSize - 8) / 8 {
		x = splitmix64(x)
		dst = binary.BigEndian.AppendUint64(dst, x)
	}
	return binary.BigEndian.AppendUint64(dst, h)
}

// splitmix64 is one step of the SplitMix64 generator (Steele, Lea and
// Flood, 2014), a cheap full-period mixer.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

func appendParent(dst []byte, ev *Event, form hashForm) []byte {
	if !ev.HasParent {
		return append(dst, 0xc0)
	}
	return appendHash(dst, ev.ParentBlockHash, form)
}

func appendLoRAID(dst []byte, ev *Event) []byte {
	if !ev.HasLoRAID {
		return append(dst, 0xc0)
	}
	return appendInt(dst, ev.LoRAID)
}

func appendTokens(dst []byte, ids []uint32) []byte {
	dst = appendArrayLen(dst, len(ids))
	for _, id := range ids {
		dst = appendUint(dst, uint64(id))
	}
	return dst
}

func appendExtraKeys(dst []byte, keys [][]byte) []byte {
	dst = appendArrayLen(dst, len(keys))
	for _, raw := range keys {
		if len(raw) == 0 {
			dst = append(dst, 0xc0)
		} else {
			dst = append(dst, raw...)
		}
	}
	return dst
}

// appendOptBytes writes b as a string, or nil when it is empty.
func appendOptBytes(dst []byte, b []byte) []byte {
	if len(b) == 0 {
		return append(dst, 0xc0)
	}
	dst = appendStrLen(dst, len(b))
	return append(dst, b...)
}

// The msgpack primitives, in their smallest encodings.

func appendStr(dst []byte, s string) []byte {
	dst = appendStrLen(dst, len(s))
	return append(dst, s...)
}

func appendStrLen(dst []byte, n int) []byte {
	switch {
	case n < 32:
		return append(dst, 0xa0|byte(n))
	case n <= math.MaxUint8:
		return append(dst, 0xd9, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xda), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
}

func appendArrayLen(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdd), uint32(n))
}

func appendMapLen(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdf), uint32(n))
}

func appendUint(dst []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(dst, byte(v))
	case v <= math.MaxUint8:
		return append(dst, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), v)
}

func appendInt(dst []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(dst, uint64(v))
	case v >= -32:
		return append(dst, byte(v))
	case v >= math.MinInt8:
		return append(dst, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(dst, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(dst, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xd3), uint64(v))
}

func appendFloat64(dst []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 0xcb), math.Float64bits(f))
}
