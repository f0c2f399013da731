package router

// Decoding of the KV-cache events vLLM and SGLang publish over ZMQ.
//
// A payload is one msgpack-encoded EventBatch. Engines have used two
// encodings of it over time and both are accepted:
//
//   - the batch: an array [ts, events, data_parallel_rank?] (msgspec's
//     array_like form; SGLang leaves the rank out) or a map with the keys
//     "ts", "events" and "data_parallel_rank";
//   - each event: a map whose "type" key names the class (vLLM since 2026),
//     or a positional array whose first element names it (older vLLM and
//     SGLang), with the fields in class order:
//     BlockStored:  [tag, block_hashes, parent_block_hash, token_ids,
//     block_size, lora_id, medium, lora_name, extra_keys, group_idx,
//     kv_cache_spec_kind, kv_cache_spec_sliding_window]
//     BlockRemoved: [tag, block_hashes, medium, group_idx]
//     AllBlocksCleared: [tag]
//     Trailing fields may be missing (msgspec omits defaults); fields this
//     decoder does not know, in either form, are skipped.
//
// Block hashes are the engine's own ids. They arrive as msgpack ints (a
// uint64 at or above 2^63 is a msgpack uint64, Python's hash() may be
// negative) or as bytes when vLLM runs with
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0. Both become a uint64 key: an int by
// its 64-bit two's complement pattern, bytes by their XXH3-64 hash.
//
// The decoder walks the payload with the low-level msgpack.Decoder calls
// (no reflection, no generic maps), reads strings and byte strings in place,
// and reads the integer arrays that make up most of a payload (token ids,
// block hashes) straight from the bytes, since a Decoder call per integer
// would cost several interface calls each. It reuses every slice it fills,
// so decoding a batch allocates nothing once its buffers have grown.
//
// Ingest throughput: decode, re-hash, engine-hash mapping and index updates
// into a trivial index, in a steady state of ~8k mapped blocks where every
// batch stores 256 blocks (16 tokens each, in 8-block BlockStored events)
// and removes as many. Measured with
//
//	go test ./router/ -run '^$' -bench 'BenchmarkIngest$' -benchtime 3s -cpu 1
//
// on a 2-core "Oxide Virtual Turin-like" VM that other builds kept busy
// (load average 10–14), so wall-clock rates understate one core. Four runs:
// 2.7–3.7 million stored blocks per CPU-second of the ingesting thread
// (blocks/cpu-s), 1.0–1.5 million per wall-clock second; 0 allocations per
// batch; the mapping held 25.8 bytes per mapped block. Decoding alone
// (BenchmarkDecodeBatch) ran at 4.4–7.0 million blocks per wall-clock
// second.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
	"github.com/zeebo/xxh3"

	"github.com/hearth-llm/hearth/kvbm"
)

// ErrMalformedEvent is wrapped by every error that says a KV-event message
// could not be decoded. The message is counted and skipped.
var ErrMalformedEvent = errors.New("malformed kv event")

// kvEventKind is the class of one KV-cache event.
type kvEventKind uint8

const (
	kvEventUnknown kvEventKind = iota // a class this decoder does not know; skipped
	kvBlockStored
	kvBlockRemoved
	kvAllBlocksCleared
)

func (k kvEventKind) String() string {
	switch k {
	case kvBlockStored:
		return "BlockStored"
	case kvBlockRemoved:
		return "BlockRemoved"
	case kvAllBlocksCleared:
		return "AllBlocksCleared"
	}
	return "unknown"
}

// kvSpan is a byte range [start, end) of the payload being decoded.
type kvSpan struct{ start, end int32 }

// kvEvent is one decoded event. Slices and spans point into buffers owned by
// the decoder or into the payload, so an event is valid only until the next
// decode call and while the payload is unchanged.
type kvEvent struct {
	kind        kvEventKind
	blockHashes []uint64 // engine block hashes, as uint64 keys
	parent      uint64   // engine hash of the block before the first, if hasParent
	hasParent   bool
	tokens      []uint32 // token ids of all stored blocks, concatenated
	blockSize   int
	hasLoRAID   bool   // lora_id was set (old engines name adapters only by id)
	loraName    []byte // "" for the base model
	tier        kvbm.Tier
	tierKnown   bool     // medium named a tier kvbm knows
	groupIdx    int64    // KV-cache group of hybrid models; 0 when absent
	extraKeys   []kvSpan // raw msgpack of each block's extra keys, one per block, if present
}

func (ev *kvEvent) reset() {
	*ev = kvEvent{
		blockHashes: ev.blockHashes[:0],
		tokens:      ev.tokens[:0],
		extraKeys:   ev.extraKeys[:0],
		tier:        kvbm.TierGPU,
		tierKnown:   true,
	}
}

// kvEventBatch is one decoded EventBatch.
type kvEventBatch struct {
	ts        float64
	dpRank    int64
	hasDPRank bool
	events    []kvEvent
}

// nextEvent returns a reset event appended to the batch, reusing the
// buffers of an event decoded earlier into the same slot.
func (b *kvEventBatch) nextEvent() *kvEvent {
	if len(b.events) < cap(b.events) {
		b.events = b.events[:len(b.events)+1]
	} else {
		b.events = append(b.events, kvEvent{})
	}
	ev := &b.events[len(b.events)-1]
	ev.reset()
	return ev
}

// kvDecoder decodes EventBatch payloads. The zero value is ready to use; it
// is not safe for concurrent use.
type kvDecoder struct {
	r       bytes.Reader
	d       *msgpack.Decoder
	payload []byte

	// The last medium seen and its tier, so the common case of every event
	// naming "GPU" costs a byte comparison.
	lastMedium    []byte
	lastTier      kvbm.Tier
	lastTierKnown bool
}

// decode decodes payload into b, reusing b's buffers. On error b holds an
// unspecified prefix of the batch and must not be applied.
func (kd *kvDecoder) decode(payload []byte, b *kvEventBatch) (err error) {
	if kd.d == nil {
		kd.d = msgpack.NewDecoder(nil)
	}
	kd.payload = payload
	kd.r.Reset(payload)
	kd.d.Reset(&kd.r)
	b.ts, b.dpRank, b.hasDPRank = 0, 0, false
	b.events = b.events[:0]

	if err := kd.decodeBatch(b); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformedEvent, err)
	}
	if kd.r.Len() != 0 {
		return fmt.Errorf("%w: %d bytes after the batch", ErrMalformedEvent, kd.r.Len())
	}
	return nil
}

// pos is the offset in the payload of the next byte to decode.
func (kd *kvDecoder) pos() int { return len(kd.payload) - kd.r.Len() }

// checkLen rejects a container length that the rest of the payload cannot
// hold (every element takes at least one byte), so that a corrupt length
// cannot make the decoder allocate gigabytes.
func (kd *kvDecoder) checkLen(n, perElem int) error {
	if n < 0 || n*perElem > kd.r.Len() {
		return fmt.Errorf("length %d exceeds the %d bytes left", n, kd.r.Len())
	}
	return nil
}

func (kd *kvDecoder) decodeBatch(b *kvEventBatch) error {
	c, err := kd.d.PeekCode()
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	if msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32 {
		return kd.decodeBatchMap(b)
	}
	n, err := kd.d.DecodeArrayLen()
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	if n < 2 {
		return fmt.Errorf("batch: array of %d elements, want at least 2", n)
	}
	if err := kd.checkLen(n, 1); err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	for i := range n {
		switch i {
		case 0:
			err = kd.decodeTS(b)
		case 1:
			err = kd.decodeEvents(b)
		case 2:
			err = kd.decodeDPRank(b)
		default:
			err = kd.skip()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (kd *kvDecoder) decodeBatchMap(b *kvEventBatch) error {
	n, err := kd.d.DecodeMapLen()
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	if err := kd.checkLen(n, 2); err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	sawEvents := false
	for range n {
		key, err := kd.str()
		if err != nil {
			return fmt.Errorf("batch key: %w", err)
		}
		switch string(key) {
		case "ts":
			err = kd.decodeTS(b)
		case "events":
			err = kd.decodeEvents(b)
			sawEvents = true
		case "data_parallel_rank":
			err = kd.decodeDPRank(b)
		default:
			err = kd.skip()
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

func (kd *kvDecoder) decodeTS(b *kvEventBatch) error {
	ts, err := kd.d.DecodeFloat64()
	if err != nil {
		return fmt.Errorf("batch ts: %w", err)
	}
	b.ts = ts
	return nil
}

func (kd *kvDecoder) decodeDPRank(b *kvEventBatch) error {
	if kd.isNil() {
		return kd.d.DecodeNil()
	}
	r, err := kd.d.DecodeInt64()
	if err != nil {
		return fmt.Errorf("batch data_parallel_rank: %w", err)
	}
	b.dpRank, b.hasDPRank = r, true
	return nil
}

func (kd *kvDecoder) decodeEvents(b *kvEventBatch) error {
	n, err := kd.d.DecodeArrayLen()
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	if err := kd.checkLen(n, 1); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	for i := range n {
		ev := b.nextEvent()
		c, err := kd.d.PeekCode()
		if err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		if msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32 {
			err = kd.decodeEventMap(ev)
		} else {
			err = kd.decodeEventArray(ev)
		}
		if err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	return nil
}

// kvField names the event fields this decoder reads.
type kvField uint8

const (
	kvFieldSkip kvField = iota
	kvFieldBlockHashes
	kvFieldParent
	kvFieldTokens
	kvFieldBlockSize
	kvFieldLoRAID
	kvFieldMedium
	kvFieldLoRAName
	kvFieldExtraKeys
	kvFieldGroupIdx
)

// Field order of the positional (array) form, after the tag.
var (
	kvStoredFields = [...]kvField{
		kvFieldBlockHashes, kvFieldParent, kvFieldTokens, kvFieldBlockSize,
		kvFieldLoRAID, kvFieldMedium, kvFieldLoRAName, kvFieldExtraKeys, kvFieldGroupIdx,
	}
	kvRemovedFields = [...]kvField{kvFieldBlockHashes, kvFieldMedium, kvFieldGroupIdx}
)

func kvFieldByName(name []byte) kvField {
	switch string(name) {
	case "block_hashes":
		return kvFieldBlockHashes
	case "parent_block_hash":
		return kvFieldParent
	case "token_ids":
		return kvFieldTokens
	case "block_size":
		return kvFieldBlockSize
	case "lora_id":
		return kvFieldLoRAID
	case "medium":
		return kvFieldMedium
	case "lora_name":
		return kvFieldLoRAName
	case "extra_keys":
		return kvFieldExtraKeys
	case "group_idx":
		return kvFieldGroupIdx
	}
	return kvFieldSkip
}

func kvKindByName(name []byte) kvEventKind {
	switch string(name) {
	case "BlockStored":
		return kvBlockStored
	case "BlockRemoved":
		return kvBlockRemoved
	case "AllBlocksCleared":
		return kvAllBlocksCleared
	}
	return kvEventUnknown
}

func (kd *kvDecoder) decodeEventArray(ev *kvEvent) error {
	n, err := kd.d.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 1 {
		return errors.New("empty event array")
	}
	if err := kd.checkLen(n, 1); err != nil {
		return err
	}
	tag, err := kd.str()
	if err != nil {
		return fmt.Errorf("event tag: %w", err)
	}
	ev.kind = kvKindByName(tag)
	var order []kvField
	switch ev.kind {
	case kvBlockStored:
		order = kvStoredFields[:]
	case kvBlockRemoved:
		order = kvRemovedFields[:]
	}
	for i := 1; i < n; i++ {
		f := kvFieldSkip
		if i-1 < len(order) {
			f = order[i-1]
		}
		if err := kd.decodeField(ev, f); err != nil {
			return err
		}
	}
	return nil
}

func (kd *kvDecoder) decodeEventMap(ev *kvEvent) error {
	n, err := kd.d.DecodeMapLen()
	if err != nil {
		return err
	}
	if err := kd.checkLen(n, 2); err != nil {
		return err
	}
	sawType := false
	for range n {
		key, err := kd.str()
		if err != nil {
			return fmt.Errorf("event key: %w", err)
		}
		if string(key) == "type" {
			tag, err := kd.str()
			if err != nil {
				return fmt.Errorf("event type: %w", err)
			}
			ev.kind = kvKindByName(tag)
			sawType = true
			continue
		}
		// Field names differ between the event classes, so a field can be
		// decoded before the "type" key has been seen.
		if err := kd.decodeField(ev, kvFieldByName(key)); err != nil {
			return err
		}
	}
	if !sawType {
		return errors.New("event map without a type")
	}
	return nil
}

func (kd *kvDecoder) decodeField(ev *kvEvent, f kvField) error {
	var err error
	switch f {
	case kvFieldBlockHashes:
		ev.blockHashes, err = kd.hashList(ev.blockHashes[:0])
	case kvFieldParent:
		if kd.isNil() {
			ev.hasParent = false
			err = kd.d.DecodeNil()
		} else {
			ev.parent, err = kd.hash()
			ev.hasParent = true
		}
	case kvFieldTokens:
		ev.tokens, err = kd.tokenList(ev.tokens[:0])
	case kvFieldBlockSize:
		var bs int64
		bs, err = kd.d.DecodeInt64() // nil decodes as 0
		if err == nil && (bs < 0 || bs > 1<<20) {
			err = fmt.Errorf("block_size %d out of range", bs)
		}
		ev.blockSize = int(bs)
	case kvFieldLoRAID:
		if kd.isNil() {
			err = kd.d.DecodeNil()
		} else {
			_, err = kd.d.DecodeInt64()
			ev.hasLoRAID = true
		}
	case kvFieldMedium:
		var m []byte
		m, err = kd.optStr()
		if err == nil {
			ev.tier, ev.tierKnown = kd.parseMedium(m)
		}
	case kvFieldLoRAName:
		ev.loraName, err = kd.optStr()
	case kvFieldExtraKeys:
		ev.extraKeys, err = kd.extraKeys(ev.extraKeys[:0])
	case kvFieldGroupIdx:
		ev.groupIdx, err = kd.d.DecodeInt64() // nil decodes as 0
	default:
		err = kd.skip()
	}
	if err != nil {
		return fmt.Errorf("field %d: %w", f, err)
	}
	return nil
}

func (kd *kvDecoder) parseMedium(m []byte) (kvbm.Tier, bool) {
	if kd.lastMedium != nil && bytes.Equal(m, kd.lastMedium) {
		return kd.lastTier, kd.lastTierKnown
	}
	t, ok := kvbm.ParseMedium(string(m))
	kd.lastMedium = append(kd.lastMedium[:0], m...)
	kd.lastTier, kd.lastTierKnown = t, ok
	return t, ok
}

func (kd *kvDecoder) isNil() bool {
	c, err := kd.d.PeekCode()
	return err == nil && c == msgpcode.Nil
}

// str returns a string (or bin) value in place in the payload.
func (kd *kvDecoder) str() ([]byte, error) {
	n, err := kd.d.DecodeBytesLen()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, errors.New("nil where a string is required")
	}
	return kd.take(n)
}

// optStr is str that reads nil as "".
func (kd *kvDecoder) optStr() ([]byte, error) {
	n, err := kd.d.DecodeBytesLen()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, nil
	}
	return kd.take(n)
}

// take returns the next n bytes of the payload without copying them.
func (kd *kvDecoder) take(n int) ([]byte, error) {
	if n > kd.r.Len() {
		return nil, io.ErrUnexpectedEOF
	}
	p := kd.pos()
	if _, err := kd.r.Seek(int64(n), io.SeekCurrent); err != nil {
		return nil, err
	}
	return kd.payload[p : p+n : p+n], nil
}

// hash decodes one engine block hash into its uint64 key.
func (kd *kvDecoder) hash() (uint64, error) {
	c, err := kd.d.PeekCode()
	if err != nil {
		return 0, err
	}
	switch {
	case msgpcode.IsString(c) || msgpcode.IsBin(c):
		b, err := kd.str()
		if err != nil {
			return 0, err
		}
		return xxh3.Hash(b), nil
	case c == msgpcode.Nil:
		return 0, errors.New("nil block hash")
	}
	// DecodeUint64 returns every msgpack int as its 64-bit two's complement
	// pattern: a negative Python hash and a uint64 ≥ 2^63 both fit.
	return kd.d.DecodeUint64()
}

func (kd *kvDecoder) hashList(dst []uint64) ([]uint64, error) {
	n, err := kd.d.DecodeArrayLen()
	if err != nil {
		return dst, err
	}
	if err := kd.checkLen(n, 1); err != nil {
		return dst, err
	}
	for range n {
		// Int hashes, the usual form, are read in place like token ids;
		// anything else goes through the Decoder.
		p := kd.payload[kd.pos():]
		if v, w := kvIntBits(p); w > 0 {
			dst = append(dst, v)
			if _, err := kd.r.Seek(int64(w), io.SeekCurrent); err != nil {
				return dst, err
			}
			continue
		}
		h, err := kd.hash()
		if err != nil {
			return dst, err
		}
		dst = append(dst, h)
	}
	return dst, nil
}

// kvIntBits decodes a msgpack integer of either sign at the start of p into
// its 64-bit two's complement pattern and returns its encoded width, or
// width 0 if p does not start with an integer.
func kvIntBits(p []byte) (v uint64, width int) {
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

func (kd *kvDecoder) tokenList(dst []uint32) ([]uint32, error) {
	n, err := kd.d.DecodeArrayLen()
	if err != nil {
		return dst, err
	}
	if err := kd.checkLen(n, 1); err != nil {
		return dst, err
	}
	// Token ids are most of every payload. Reading them through the
	// Decoder costs several interface calls per id, so they are read in
	// place from the payload, then the reader is moved past them.
	p := kd.payload[kd.pos():]
	off := 0
	for range n {
		if off >= len(p) {
			return dst, io.ErrUnexpectedEOF
		}
		var v uint64
		// The common encodings inline; kvUint handles the rest.
		switch c := p[off]; {
		case c <= 0x7f:
			v, off = uint64(c), off+1
		case c == msgpcode.Uint16 && off+3 <= len(p):
			v, off = uint64(binary.BigEndian.Uint16(p[off+1:])), off+3
		case c == msgpcode.Uint32 && off+5 <= len(p):
			v, off = uint64(binary.BigEndian.Uint32(p[off+1:])), off+5
		default:
			var w int
			v, w = kvUint(p[off:])
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
	if _, err := kd.r.Seek(int64(off), io.SeekCurrent); err != nil {
		return dst, err
	}
	return dst, nil
}

// kvUint decodes a non-negative msgpack integer at the start of p and
// returns it with its encoded width, or width 0 if p does not start with
// one.
func kvUint(p []byte) (v uint64, width int) {
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

// extraKeys records the raw encoding of each block's extra keys. They are
// not interpreted here; the ingester decides what they mean for hashing.
func (kd *kvDecoder) extraKeys(dst []kvSpan) ([]kvSpan, error) {
	n, err := kd.d.DecodeArrayLen()
	if err != nil || n < 0 {
		return dst, err // nil: no extra keys
	}
	if err := kd.checkLen(n, 1); err != nil {
		return dst, err
	}
	for range n {
		start := kd.pos()
		if err := kd.skip(); err != nil {
			return dst, err
		}
		dst = append(dst, kvSpan{int32(start), int32(kd.pos())})
	}
	return dst, nil
}

// skip skips one value of any shape. Unlike msgpack.Decoder.Skip it does not
// recurse, so a deeply nested payload cannot exhaust the stack.
func (kd *kvDecoder) skip() error {
	for pending := 1; pending > 0; pending-- {
		c, err := kd.d.PeekCode()
		if err != nil {
			return err
		}
		var n int
		switch {
		case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
			n, err = kd.d.DecodeArrayLen()
		case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
			n, err = kd.d.DecodeMapLen()
			n *= 2
		default:
			err = kd.d.Skip() // a scalar, string, bin or ext: no nesting
		}
		if err != nil {
			return err
		}
		// Every value still to skip takes at least one byte.
		if err := kd.checkLen(pending-1+n, 1); err != nil {
			return err
		}
		pending += n
	}
	return nil
}
