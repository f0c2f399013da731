package kvevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// ErrMalformed is wrapped by every error that says a payload or a message's
// frames could not be read.
var ErrMalformed = errors.New("malformed kv event")

// Decoder decodes EventBatch payloads. The zero value is ready to use; it is
// not safe for concurrent use.
//
// It walks the payload with the low-level msgpack.Decoder calls (no
// reflection, no generic maps), reads strings and byte strings in place,
// and reads the integer arrays that make up most of a payload (token ids,
// block hashes) straight from the bytes, since a Decoder call per integer
// would cost several interface calls each. It reuses every slice it fills,
// so decoding a batch allocates nothing once its buffers have grown.
type Decoder struct {
	// Format is the engine layout of the payloads, which decides the
	// field order of positional events: SGLang's BlockStored has its
	// metadata where vLLM's has lora_name. FormatSGLang reads SGLang's
	// order, every other Format (and the zero value) vLLM's. Map-form
	// events name their fields and read the same in every Format.
	Format Format

	r       bytes.Reader
	d       *msgpack.Decoder
	payload []byte

	// The last medium name seen and what it means, so the common case of
	// every event naming "GPU" costs a byte comparison.
	lastMediumName []byte
	lastMedium     Medium

	// sawBytes records that a hash of the field being read came as bytes.
	sawBytes bool
}

// Decode decodes payload into b, reusing b's buffers. On error b holds an
// unspecified prefix of the batch and must not be applied; the error wraps
// ErrMalformed.
func (dec *Decoder) Decode(payload []byte, b *Batch) error {
	if dec.d == nil {
		dec.d = msgpack.NewDecoder(nil)
	}
	dec.payload = payload
	dec.r.Reset(payload)
	dec.d.Reset(&dec.r)
	b.TS, b.DPRank, b.HasDPRank = 0, 0, false
	b.Events = b.Events[:0]

	if err := dec.decodeBatch(b); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if dec.r.Len() != 0 {
		return fmt.Errorf("%w: %d bytes after the batch", ErrMalformed, dec.r.Len())
	}
	return nil
}

// pos is the offset in the payload of the next byte to decode.
func (dec *Decoder) pos() int { return len(dec.payload) - dec.r.Len() }

// checkLen rejects a container length that the rest of the payload cannot
// hold (every element takes at least one byte), so that a corrupt length
// cannot make the decoder allocate gigabytes.
func (dec *Decoder) checkLen(n, perElem int) error {
	if n < 0 || n*perElem > dec.r.Len() {
		return fmt.Errorf("length %d exceeds the %d bytes left", n, dec.r.Len())
	}
	return nil
}

func isMapCode(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

func (dec *Decoder) decodeBatch(b *Batch) error {
	c, err := dec.d.PeekCode()
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	if isMapCode(c) {
		return dec.decodeBatchMap(b)
	}
	n, err := dec.d.DecodeArrayLen()
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	if n < 2 {
		return fmt.Errorf("batch: array of %d elements, want at least 2", n)
	}
	if err := dec.checkLen(n, 1); err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	for i := range n {
		switch i {
		case 0:
			err = dec.decodeTS(b)
		case 1:
			err = dec.decodeEvents(b)
		case 2:
			err = dec.decodeDPRank(b)
		default:
			err = dec.skip()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (dec *Decoder) decodeBatchMap(b *Batch) error {
	n, err := dec.d.DecodeMapLen()
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	if err := dec.checkLen(n, 2); err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	sawEvents := false
	for range n {
		key, err := dec.str()
		if err != nil {
			return fmt.Errorf("batch key: %w", err)
		}
		switch string(key) {
		case "ts":
			err = dec.decodeTS(b)
		case "events":
			err = dec.decodeEvents(b)
			sawEvents = true
		case "data_parallel_rank":
			err = dec.decodeDPRank(b)
		default:
			err = dec.skip()
		}
		if err != nil {
			return err
		}
	}
	if !sawEvents {
		return errors.New("batch: no events")
	}
	return nil
}

func (dec *Decoder) decodeTS(b *Batch) error {
	ts, err := dec.d.DecodeFloat64()
	if err != nil {
		return fmt.Errorf("batch ts: %w", err)
	}
	b.TS = ts
	return nil
}

func (dec *Decoder) decodeDPRank(b *Batch) error {
	if dec.isNil() {
		return dec.d.DecodeNil()
	}
	r, err := dec.d.DecodeInt64()
	if err != nil {
		return fmt.Errorf("batch data_parallel_rank: %w", err)
	}
	b.DPRank, b.HasDPRank = r, true
	return nil
}

func (dec *Decoder) decodeEvents(b *Batch) error {
	// A batch holds one events array; a second one (a map batch may repeat
	// its key) replaces the first.
	b.Events = b.Events[:0]
	n, err := dec.d.DecodeArrayLen()
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	if err := dec.checkLen(n, 1); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	for i := range n {
		ev := b.nextEvent()
		c, err := dec.d.PeekCode()
		if err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		if isMapCode(c) {
			err = dec.decodeEventMap(ev)
		} else {
			err = dec.decodeEventArray(ev)
		}
		if err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	return nil
}

// field names the event fields the decoder reads.
type field uint8

const (
	fieldSkip field = iota
	fieldBlockHashes
	fieldParent
	fieldTokens
	fieldBlockSize
	fieldLoRAID
	fieldMedium
	fieldLoRAName
	fieldExtraKeys
	fieldGroupIdx
	fieldMetadata
	fieldCacheSalt
	fieldComponentType
	fieldSpecKind
	fieldSlidingWindow
	// fieldSGLangTail is the position after SGLang's base fields, where
	// its wire extensions put a component type (a string) or a salted
	// request's metadata (a map): the value's type says which. A salted
	// event with a component type has its metadata one further.
	fieldSGLangTail
)

func (f field) String() string {
	switch f {
	case fieldBlockHashes:
		return "block_hashes"
	case fieldParent:
		return "parent_block_hash"
	case fieldTokens:
		return "token_ids"
	case fieldBlockSize:
		return "block_size"
	case fieldLoRAID:
		return "lora_id"
	case fieldMedium:
		return "medium"
	case fieldLoRAName:
		return "lora_name"
	case fieldExtraKeys:
		return "extra_keys"
	case fieldGroupIdx:
		return "group_idx"
	case fieldMetadata:
		return "metadata"
	case fieldCacheSalt:
		return "cache_salt"
	case fieldComponentType:
		return "component_type"
	case fieldSpecKind:
		return "kv_cache_spec_kind"
	case fieldSlidingWindow:
		return "kv_cache_spec_sliding_window"
	case fieldSGLangTail:
		return "extension"
	}
	return "unknown field"
}

// Field order of the positional (array) form, after the tag, in each
// engine's class order; msgspec leaves trailing defaults out, so an event may
// end early. vLLM's BlockStored goes on after medium with lora_name,
// extra_keys and group_idx. SGLang's shares vLLM's first six fields; its
// wire extensions (same tags) append fields after them:
// BlockStoredWithMetadata a salted request's metadata struct (a map), and
// with --enable-kv-events-component-types BlockStoredWithComponentType and
// BlockRemovedWithComponentType a component type string (sgl-project/sglang,
// python/sglang/srt/disaggregation/kv_events.py, v0.5.23). Positions past
// the base fields are read by the type of their value.
var (
	vllmStoredFields = [...]field{
		fieldBlockHashes, fieldParent, fieldTokens, fieldBlockSize,
		fieldLoRAID, fieldMedium, fieldLoRAName, fieldExtraKeys, fieldGroupIdx,
		fieldSpecKind, fieldSlidingWindow,
	}
	vllmRemovedFields  = [...]field{fieldBlockHashes, fieldMedium, fieldGroupIdx}
	sglangStoredFields = [...]field{
		fieldBlockHashes, fieldParent, fieldTokens, fieldBlockSize,
		fieldLoRAID, fieldMedium, fieldSGLangTail, fieldMetadata,
	}
	sglangRemovedFields = [...]field{fieldBlockHashes, fieldMedium, fieldSGLangTail}
)

func fieldByName(name []byte) field {
	switch string(name) {
	case "block_hashes":
		return fieldBlockHashes
	case "parent_block_hash":
		return fieldParent
	case "token_ids":
		return fieldTokens
	case "block_size":
		return fieldBlockSize
	case "lora_id":
		return fieldLoRAID
	case "medium":
		return fieldMedium
	case "lora_name":
		return fieldLoRAName
	case "extra_keys":
		return fieldExtraKeys
	case "group_idx":
		return fieldGroupIdx
	case "metadata":
		return fieldMetadata
	case "cache_salt":
		return fieldCacheSalt
	case "component_type":
		return fieldComponentType
	case "kv_cache_spec_kind":
		return fieldSpecKind
	case "kv_cache_spec_sliding_window":
		return fieldSlidingWindow
	}
	return fieldSkip
}

func (dec *Decoder) decodeEventArray(ev *Event) error {
	n, err := dec.d.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 1 {
		return errors.New("empty event array")
	}
	if err := dec.checkLen(n, 1); err != nil {
		return err
	}
	tag, err := dec.str()
	if err != nil {
		return fmt.Errorf("event tag: %w", err)
	}
	ev.Kind = kindByName(tag)
	var order []field
	sglang := dec.Format.SGLang()
	switch {
	case ev.Kind == BlockStored && sglang:
		order = sglangStoredFields[:]
	case ev.Kind == BlockStored:
		order = vllmStoredFields[:]
	case ev.Kind == BlockRemoved && sglang:
		order = sglangRemovedFields[:]
	case ev.Kind == BlockRemoved:
		order = vllmRemovedFields[:]
	}
	for i := 1; i < n; i++ {
		f := fieldSkip
		if i-1 < len(order) {
			f = order[i-1]
		}
		if err := dec.decodeField(ev, f); err != nil {
			return err
		}
	}
	return nil
}

func (dec *Decoder) decodeEventMap(ev *Event) error {
	n, err := dec.d.DecodeMapLen()
	if err != nil {
		return err
	}
	if err := dec.checkLen(n, 2); err != nil {
		return err
	}
	sawType := false
	for range n {
		key, err := dec.str()
		if err != nil {
			return fmt.Errorf("event key: %w", err)
		}
		if string(key) == "type" {
			tag, err := dec.str()
			if err != nil {
				return fmt.Errorf("event type: %w", err)
			}
			ev.Kind = kindByName(tag)
			sawType = true
			continue
		}
		// Field names differ between the event classes, so a field can be
		// decoded before the "type" key has been seen.
		if err := dec.decodeField(ev, fieldByName(key)); err != nil {
			return err
		}
	}
	if !sawType {
		return errors.New("event map without a type")
	}
	return nil
}

func (dec *Decoder) decodeField(ev *Event, f field) error {
	var err error
	switch f {
	case fieldBlockHashes:
		dec.sawBytes = false
		ev.BlockHashes, err = dec.hashList(ev.BlockHashes[:0])
		ev.BytesHashes = ev.BytesHashes || dec.sawBytes
	case fieldParent:
		if dec.isNil() {
			ev.ParentBlockHash, ev.HasParent = 0, false
			err = dec.d.DecodeNil()
		} else {
			dec.sawBytes = false
			ev.ParentBlockHash, err = dec.hash()
			ev.HasParent = true
			ev.BytesHashes = ev.BytesHashes || dec.sawBytes
		}
	case fieldTokens:
		ev.TokenIDs, err = dec.tokenList(ev.TokenIDs[:0])
	case fieldBlockSize:
		var bs int64
		bs, err = dec.d.DecodeInt64() // nil decodes as 0
		if err == nil && (bs < 0 || bs > MaxBlockSize) {
			err = fmt.Errorf("%d out of range", bs)
		}
		ev.BlockSize = int(bs)
	case fieldLoRAID:
		if dec.isNil() {
			ev.LoRAID, ev.HasLoRAID = 0, false
			err = dec.d.DecodeNil()
		} else {
			ev.LoRAID, err = dec.d.DecodeInt64()
			ev.HasLoRAID = true
		}
	case fieldMedium:
		var m []byte
		m, err = dec.optStr()
		if err == nil {
			ev.Medium = dec.medium(m)
		}
	case fieldLoRAName:
		ev.LoRAName, err = dec.optStr()
	case fieldExtraKeys:
		ev.ExtraKeys, err = dec.extraKeys(ev.ExtraKeys[:0])
	case fieldGroupIdx:
		ev.GroupIdx, err = dec.d.DecodeInt64() // nil decodes as 0
	case fieldMetadata:
		var salt []byte
		salt, err = dec.metadata()
		if len(salt) > 0 {
			ev.CacheSalt = salt
		}
	case fieldCacheSalt:
		ev.CacheSalt, err = dec.optStr()
	case fieldComponentType:
		ev.ComponentType, err = dec.optStr()
	case fieldSpecKind:
		ev.SpecKind, err = dec.optStr()
	case fieldSlidingWindow:
		ev.SlidingWindow, err = dec.d.DecodeInt64() // nil decodes as 0
	case fieldSGLangTail:
		c, perr := dec.d.PeekCode()
		switch {
		case perr != nil:
			err = perr
		case isMapCode(c):
			return dec.decodeField(ev, fieldMetadata)
		case msgpcode.IsString(c) || msgpcode.IsBin(c) || c == msgpcode.Nil:
			return dec.decodeField(ev, fieldComponentType)
		default:
			err = fmt.Errorf("unexpected code=%x", c)
		}
	default:
		err = dec.skip()
	}
	if err != nil {
		return fmt.Errorf("%v: %w", f, err)
	}
	return nil
}

// metadata reads SGLang's BlockStoredMetadata, a map (msgspec's default
// struct form) whose cache_salt it returns; keys it does not know are
// skipped, and nil is no metadata.
func (dec *Decoder) metadata() ([]byte, error) {
	n, err := dec.d.DecodeMapLen()
	if err != nil || n < 0 {
		return nil, err
	}
	if err := dec.checkLen(n, 2); err != nil {
		return nil, err
	}
	var salt []byte
	for range n {
		key, err := dec.str()
		if err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
		if string(key) != "cache_salt" {
			if err := dec.skip(); err != nil {
				return nil, err
			}
			continue
		}
		if salt, err = dec.optStr(); err != nil {
			return nil, fmt.Errorf("cache_salt: %w", err)
		}
	}
	return salt, nil
}

// MaxBlockSize is the largest block_size the decoder accepts; a larger one
// is a corrupt payload, not a cache layout.
const MaxBlockSize = 1 << 20

func (dec *Decoder) medium(name []byte) Medium {
	if dec.lastMediumName != nil && bytes.Equal(name, dec.lastMediumName) {
		return dec.lastMedium
	}
	m := parseMedium(name)
	dec.lastMediumName = append(dec.lastMediumName[:0], name...)
	dec.lastMedium = m
	return m
}

func (dec *Decoder) isNil() bool {
	c, err := dec.d.PeekCode()
	return err == nil && c == msgpcode.Nil
}

// str returns a string (or bin) value in place in the payload.
func (dec *Decoder) str() ([]byte, error) {
	n, err := dec.d.DecodeBytesLen()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, errors.New("nil where a string is required")
	}
	return dec.take(n)
}

// optStr is str that reads nil as "".
func (dec *Decoder) optStr() ([]byte, error) {
	n, err := dec.d.DecodeBytesLen()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, nil
	}
	return dec.take(n)
}

// take returns the next n bytes of the payload without copying them.
func (dec *Decoder) take(n int) ([]byte, error) {
	if n > dec.r.Len() {
		return nil, io.ErrUnexpectedEOF
	}
	p := dec.pos()
	if _, err := dec.r.Seek(int64(n), io.SeekCurrent); err != nil {
		return nil, err
	}
	return dec.payload[p : p+n : p+n], nil
}

// hash decodes one engine block hash into its uint64 key, noting in
// dec.sawBytes when it came as bytes.
func (dec *Decoder) hash() (uint64, error) {
	c, err := dec.d.PeekCode()
	if err != nil {
		return 0, err
	}
	switch {
	case msgpcode.IsString(c) || msgpcode.IsBin(c):
		b, err := dec.str()
		if err != nil {
			return 0, err
		}
		dec.sawBytes = true
		return BytesHashKey(b), nil
	case c == msgpcode.Nil:
		return 0, errors.New("nil block hash")
	}
	// DecodeUint64 returns every msgpack int as its 64-bit two's complement
	// pattern: a negative hash and a uint64 ≥ 2^63 both fit.
	return dec.d.DecodeUint64()
}

// BytesHashKey is the key of a block hash sent as bytes: the bytes read as
// a big-endian unsigned integer, of which the low 64 bits are kept. That is
// the int vLLM publishes for the same block (maybe_convert_block_hash in
// vllm/v1/core/kv_cache_utils.py: int.from_bytes(hash, "big") & (2^64-1)),
// so a block reported once as bytes and once as an int has one key. vLLM's
// offloading connector always reports its blocks as bytes, whatever
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES says, and its GPU cache as ints by
// default; the key is what joins them. Bytes shorter than 8 are read as if
// zero-padded on the left, as int.from_bytes does.
func BytesHashKey(b []byte) uint64 {
	if len(b) >= 8 {
		return binary.BigEndian.Uint64(b[len(b)-8:])
	}
	var h uint64
	for _, c := range b {
		h = h<<8 | uint64(c)
	}
	return h
}

func (dec *Decoder) hashList(dst []uint64) ([]uint64, error) {
	n, err := dec.d.DecodeArrayLen()
	if err != nil {
		return dst, err
	}
	if err := dec.checkLen(n, 1); err != nil {
		return dst, err
	}
	for range n {
		// Int hashes, the usual form, are read in place like token ids;
		// anything else goes through the Decoder.
		p := dec.payload[dec.pos():]
		if v, w := intBits(p); w > 0 {
			dst = append(dst, v)
			if _, err := dec.r.Seek(int64(w), io.SeekCurrent); err != nil {
				return dst, err
			}
			continue
		}
		h, err := dec.hash()
		if err != nil {
			return dst, err
		}
		dst = append(dst, h)
	}
	return dst, nil
}

// intBits decodes a msgpack integer of either sign at the start of p into
// its 64-bit two's complement pattern and returns its encoded width, or
// width 0 if p does not start with an integer.
func intBits(p []byte) (v uint64, width int) {
	if len(p) == 0 {
		return 0, 0
	}
	switch c := p[0]; {
	case c <= 0x7f || c >= 0xe0: // fixint
		return uint64(int64(int8(c))), 1
	case (c == msgpcode.Uint64 || c == msgpcode.Int64) && len(p) >= 9:
		return binary.BigEndian.Uint64(p[1:]), 9
	case (c == msgpcode.Uint32) && len(p) >= 5:
		return uint64(binary.BigEndian.Uint32(p[1:])), 5
	case (c == msgpcode.Int32) && len(p) >= 5:
		return uint64(int64(int32(binary.BigEndian.Uint32(p[1:])))), 5
	case (c == msgpcode.Uint16) && len(p) >= 3:
		return uint64(binary.BigEndian.Uint16(p[1:])), 3
	case (c == msgpcode.Int16) && len(p) >= 3:
		return uint64(int64(int16(binary.BigEndian.Uint16(p[1:])))), 3
	case (c == msgpcode.Uint8) && len(p) >= 2:
		return uint64(p[1]), 2
	case (c == msgpcode.Int8) && len(p) >= 2:
		return uint64(int64(int8(p[1]))), 2
	}
	return 0, 0
}

func (dec *Decoder) tokenList(dst []uint32) ([]uint32, error) {
	n, err := dec.d.DecodeArrayLen()
	if err != nil {
		return dst, err
	}
	if err := dec.checkLen(n, 1); err != nil {
		return dst, err
	}
	// Token ids are most of every payload. Reading them through the
	// Decoder costs several interface calls per id, so they are read in
	// place from the payload, then the reader is moved past them.
	p := dec.payload[dec.pos():]
	off := 0
	for range n {
		if off >= len(p) {
			return dst, io.ErrUnexpectedEOF
		}
		var v uint64
		// The common encodings inline; uintAt handles the rest.
		switch c := p[off]; {
		case c <= 0x7f:
			v, off = uint64(c), off+1
		case c == msgpcode.Uint16 && off+3 <= len(p):
			v, off = uint64(binary.BigEndian.Uint16(p[off+1:])), off+3
		case c == msgpcode.Uint32 && off+5 <= len(p):
			v, off = uint64(binary.BigEndian.Uint32(p[off+1:])), off+5
		case c == msgpcode.FixedArrayLow|2:
			// SGLang with EAGLE speculative decoding keys its radix tree
			// by token pairs and publishes each page's ids as the pairs
			// (t[j], t[j+1]): the page's own token is the first of each.
			first, w1 := uintAt(p[off+1:])
			_, w2 := uintAt(p[off+1+w1:])
			if w1 == 0 || w2 == 0 {
				return dst, fmt.Errorf("token id %d: not a pair of unsigned ints", len(dst))
			}
			v, off = first, off+1+w1+w2
		default:
			var w int
			v, w = uintAt(p[off:])
			if w == 0 {
				return dst, fmt.Errorf("token id %d: not an unsigned int", len(dst))
			}
			off += w
		}
		if v > 1<<32-1 {
			return dst, fmt.Errorf("token id %d out of range", v)
		}
		dst = append(dst, uint32(v))
	}
	if _, err := dec.r.Seek(int64(off), io.SeekCurrent); err != nil {
		return dst, err
	}
	return dst, nil
}

// uintAt decodes a non-negative msgpack integer at the start of p and
// returns it with its encoded width, or width 0 if p does not start with
// one.
func uintAt(p []byte) (v uint64, width int) {
	if len(p) == 0 {
		return 0, 0
	}
	c := p[0]
	switch {
	case c <= 0x7f: // positive fixint
		return uint64(c), 1
	case c == msgpcode.Uint8 || c == msgpcode.Int8 && len(p) >= 2 && p[1] < 0x80:
		if len(p) < 2 {
			return 0, 0
		}
		return uint64(p[1]), 2
	case c == msgpcode.Uint16 || c == msgpcode.Int16 && len(p) >= 3 && p[1] < 0x80:
		if len(p) < 3 {
			return 0, 0
		}
		return uint64(binary.BigEndian.Uint16(p[1:])), 3
	case c == msgpcode.Uint32 || c == msgpcode.Int32 && len(p) >= 5 && p[1] < 0x80:
		if len(p) < 5 {
			return 0, 0
		}
		return uint64(binary.BigEndian.Uint32(p[1:])), 5
	case c == msgpcode.Uint64 || c == msgpcode.Int64 && len(p) >= 9 && p[1] < 0x80:
		if len(p) < 9 {
			return 0, 0
		}
		return binary.BigEndian.Uint64(p[1:]), 9
	}
	return 0, 0
}

// extraKeys records the raw encoding of each block's extra keys, in place.
// They are not interpreted here; consumers decide what they mean.
func (dec *Decoder) extraKeys(dst [][]byte) ([][]byte, error) {
	n, err := dec.d.DecodeArrayLen()
	if err != nil || n < 0 {
		return dst, err // nil: no extra keys
	}
	if err := dec.checkLen(n, 1); err != nil {
		return dst, err
	}
	for range n {
		start := dec.pos()
		if err := dec.skip(); err != nil {
			return dst, err
		}
		end := dec.pos()
		dst = append(dst, dec.payload[start:end:end])
	}
	return dst, nil
}

// skip skips one value of any shape. Unlike msgpack.Decoder.Skip it does not
// recurse, so a deeply nested payload cannot exhaust the stack, and it
// steps over strings, byte strings and extensions in place: Skip reads them
// into the Decoder's buffer, which it grows towards their declared length
// and keeps, so a few corrupt lengths would leave gigabytes behind.
func (dec *Decoder) skip() error {
	for pending := 1; pending > 0; pending-- {
		c, err := dec.d.PeekCode()
		if err != nil {
			return err
		}
		var n int
		switch {
		case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
			n, err = dec.d.DecodeArrayLen()
		case isMapCode(c):
			n, err = dec.d.DecodeMapLen()
			n *= 2
		case msgpcode.IsString(c) || msgpcode.IsBin(c):
			_, err = dec.str()
		case msgpcode.IsExt(c):
			var size int
			if _, size, err = dec.d.DecodeExtHeader(); err == nil {
				_, err = dec.take(size)
			}
		default:
			err = dec.d.Skip() // a scalar of at most 8 bytes
		}
		if err != nil {
			return err
		}
		// Every value still to skip takes at least one byte.
		if err := dec.checkLen(pending-1+n, 1); err != nil {
			return err
		}
		pending += n
	}
	return nil
}
