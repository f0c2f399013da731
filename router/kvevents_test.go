package router

import (
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/zeebo/xxh3"

	"github.com/hearth-llm/hearth/kvbm"
)

// unhex turns an annotated hex listing into bytes: "#" starts a comment that
// runs to the end of the line, and whitespace is ignored. The vectors below
// are written by hand from the msgpack specification.
func unhex(t testing.TB, listing string) []byte {
	t.Helper()
	var sb strings.Builder
	for line := range strings.SplitSeq(listing, "\n") {
		line, _, _ = strings.Cut(line, "#")
		sb.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(sb.String())
	if err != nil {
		t.Fatalf("bad hex listing: %v", err)
	}
	return b
}

// Hand-written payloads. Strings: fixstr 0xa0|len, then the ASCII bytes.
const (
	// vLLM (2026): batch [ts, events, rank]; each event a map tagged "type".
	// Hashes: a uint64 ≥ 2^63 (0xcf) and a negative int64 (0xd3).
	vecVLLMMap = `
93                                    # array(3): EventBatch
  cb 3f f8 00 00 00 00 00 00          # ts float64 1.5
  91                                  # events: array(1)
    88                                # map(8)
      a4 74797065                     # "type"
      ab 426c6f636b53746f726564       # "BlockStored"
      ac 626c6f636b5f686173686573     # "block_hashes"
      92                              # array(2)
        cf 80 00 00 00 00 00 00 01    # uint64 2^63+1
        d3 ff ff ff ff ff ff ff fe    # int64 -2
      b1 706172656e745f626c6f636b5f68617368 # "parent_block_hash"
      c0                              # nil
      a9 746f6b656e5f696473           # "token_ids"
      94 01 02 cd 01 00 ce 00 01 86 a0 # [1, 2, 256, 100000]
      aa 626c6f636b5f73697a65         # "block_size"
      02
      a7 6c6f72615f6964               # "lora_id"
      c0
      a6 6d656469756d                 # "medium"
      a3 475055                       # "GPU"
      a9 6c6f72615f6e616d65           # "lora_name"
      c0
  00                                  # data_parallel_rank 0
`
	// SGLang: batch [ts, events] without a rank; events positional arrays
	// [tag, block_hashes, parent, token_ids, block_size, lora_id].
	vecSGLangArray = `
92                                    # array(2)
  cb 40 00 00 00 00 00 00 00          # ts 2.0
  93                                  # events: array(3)
    96                                # array(6)
      ab 426c6f636b53746f726564       # "BlockStored"
      91 2a                           # [42]
      07                              # parent 7
      92 05 06                        # tokens [5, 6]
      02                              # block_size 2
      c0                              # lora_id nil
    92                                # array(2)
      ac 426c6f636b52656d6f766564     # "BlockRemoved"
      91 2a                           # [42]
    91                                # array(1)
      b0 416c6c426c6f636b73436c6561726564 # "AllBlocksCleared"
`
	// Older vLLM: positional events with medium and lora_name, then
	// extra_keys, group_idx, and fields this decoder does not know.
	vecVLLMArrayFull = `
93
  ca 3f c0 00 00                      # ts float32 1.5
  92                                  # events: array(2)
    9d                                # array(13)
      ab 426c6f636b53746f726564       # "BlockStored"
      92 d0 9c 7f                     # [int8 -100, 127]
      cc ff                           # parent uint8 255
      94 01 02 03 04                  # tokens
      02                              # block_size
      05                              # lora_id 5
      a3 435055                       # "CPU"
      a7 6d792d6c6f7261               # "my-lora"
      92 c0 91 a7 6d792d6c6f7261      # extra_keys [nil, ["my-lora"]]
      00                              # group_idx 0
      ae 66756c6c5f617474656e74696f6e # kv_cache_spec_kind "full_attention"
      c0                              # kv_cache_spec_sliding_window nil
      81 a5 6c6f63616c c3             # an unknown trailing field {"local": true}
    94                                # array(4)
      ac 426c6f636b52656d6f766564     # "BlockRemoved"
      91 d0 9c                        # [-100]
      a3 435055                       # "CPU"
      01                              # group_idx 1
  c0                                  # data_parallel_rank nil
`
	// Hashes as bytes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0), unknown keys
	// and a batch that is itself a map.
	vecBytesHashesMapBatch = `
83                                    # map(3)
  a6 6576656e7473                     # "events"
  91
    8a                                # map(10)
      a9 746f6b656e5f696473           # "token_ids"
      92 0a 0b
      a8 6c6f63616c697479             # "locality" (unknown)
      a5 6c6f63616c                   # "local"
      a4 74797065                     # "type" (not first)
      ab 426c6f636b53746f726564
      ac 626c6f636b5f686173686573     # "block_hashes"
      91 c4 04 de ad be ef            # [bin8 deadbeef]
      b1 706172656e745f626c6f636b5f68617368
      c4 02 ca fe                     # parent bin8 cafe
      aa 626c6f636b5f73697a65
      02
      b2 6b765f63616368655f737065635f6b696e64 # "kv_cache_spec_kind" (known to vLLM, unused here)
      a3 475055
      a6 6d656469756d
      c0                              # medium nil: GPU
      aa 65787472615f6b657973         # "extra_keys"
      c0                              # nil
      a9 67726f75705f696478           # "group_idx"
      c0                              # nil
  a2 7473                             # "ts"
  cb 40 08 00 00 00 00 00 00          # 3.0
  b2 646174615f706172616c6c656c5f72616e6b # "data_parallel_rank"
  01
`
)

// eventView is what a test compares of a decoded event.
type eventView struct {
	Kind      kvEventKind
	Hashes    []uint64
	Parent    uint64
	HasParent bool
	Tokens    []uint32
	BlockSize int
	LoRAName  string
	LoRAID    bool
	Tier      kvbm.Tier
	TierKnown bool
	Group     int64
	Extra     int
}

func viewOf(ev *kvEvent) eventView {
	v := eventView{
		Kind: ev.kind, Parent: ev.parent, HasParent: ev.hasParent, BlockSize: ev.blockSize,
		LoRAName: string(ev.loraName), LoRAID: ev.hasLoRAID, Tier: ev.tier, TierKnown: ev.tierKnown,
		Group: ev.groupIdx, Extra: len(ev.extraKeys),
	}
	v.Hashes = append([]uint64{}, ev.blockHashes...)
	v.Tokens = append([]uint32{}, ev.tokens...)
	return v
}

func TestDecodeGoldenVectors(t *testing.T) {
	neg := func(v int64) uint64 { return uint64(v) }
	tests := []struct {
		name      string
		listing   string
		ts        float64
		rank      int64
		hasRank   bool
		events    []eventView
		extraRaws []string // hex of each extra_keys entry of event 0
	}{
		{
			name: "vllm map events", listing: vecVLLMMap, ts: 1.5, rank: 0, hasRank: true,
			events: []eventView{{
				Kind: kvBlockStored, Hashes: []uint64{1<<63 + 1, neg(-2)},
				Tokens: []uint32{1, 2, 256, 100000}, BlockSize: 2, Tier: kvbm.TierGPU, TierKnown: true,
			}},
		},
		{
			name: "sglang positional events", listing: vecSGLangArray, ts: 2,
			events: []eventView{
				{Kind: kvBlockStored, Hashes: []uint64{42}, Parent: 7, HasParent: true, Tokens: []uint32{5, 6}, BlockSize: 2, TierKnown: true},
				{Kind: kvBlockRemoved, Hashes: []uint64{42}, Tokens: []uint32{}, TierKnown: true},
				{Kind: kvAllBlocksCleared, Hashes: []uint64{}, Tokens: []uint32{}, TierKnown: true},
			},
		},
		{
			name: "older vllm positional events with every field", listing: vecVLLMArrayFull, ts: 1.5,
			events: []eventView{
				{
					Kind: kvBlockStored, Hashes: []uint64{neg(-100), 127}, Parent: 255, HasParent: true,
					Tokens: []uint32{1, 2, 3, 4}, BlockSize: 2, LoRAName: "my-lora", LoRAID: true,
					Tier: kvbm.TierRAM, TierKnown: true, Extra: 2,
				},
				{Kind: kvBlockRemoved, Hashes: []uint64{neg(-100)}, Tokens: []uint32{}, Tier: kvbm.TierRAM, TierKnown: true, Group: 1},
			},
			extraRaws: []string{"c0", "91a76d792d6c6f7261"},
		},
		{
			name: "bytes hashes in a map batch", listing: vecBytesHashesMapBatch, ts: 3, rank: 1, hasRank: true,
			events: []eventView{{
				Kind:   kvBlockStored,
				Hashes: []uint64{xxh3.Hash([]byte{0xde, 0xad, 0xbe, 0xef})},
				Parent: xxh3.Hash([]byte{0xca, 0xfe}), HasParent: true,
				Tokens: []uint32{10, 11}, BlockSize: 2, TierKnown: true,
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			payload := unhex(t, tc.listing)
			// The vector must be valid msgpack by an independent reading.
			var generic any
			if err := msgpack.Unmarshal(payload, &generic); err != nil {
				t.Fatalf("vector is not msgpack: %v", err)
			}

			var kd kvDecoder
			var b kvEventBatch
			if err := kd.decode(payload, &b); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if b.ts != tc.ts || b.dpRank != tc.rank || b.hasDPRank != tc.hasRank {
				t.Errorf("batch = ts %v rank %v/%v, want %v %v/%v", b.ts, b.dpRank, b.hasDPRank, tc.ts, tc.rank, tc.hasRank)
			}
			var got []eventView
			for i := range b.events {
				got = append(got, viewOf(&b.events[i]))
			}
			if !reflect.DeepEqual(got, tc.events) {
				t.Errorf("events:\n got %+v\nwant %+v", got, tc.events)
			}
			for i, want := range tc.extraRaws {
				sp := b.events[0].extraKeys[i]
				if g := hex.EncodeToString(payload[sp.start:sp.end]); g != want {
					t.Errorf("extra_keys[%d] = %s, want %s", i, g, want)
				}
			}
		})
	}
}

func TestDecodeReusesBuffers(t *testing.T) {
	var kd kvDecoder
	var b kvEventBatch
	full := unhex(t, vecVLLMArrayFull)
	small := unhex(t, vecVLLMMap)
	if err := kd.decode(full, &b); err != nil {
		t.Fatal(err)
	}
	if err := kd.decode(small, &b); err != nil {
		t.Fatal(err)
	}
	// Fields of the earlier, longer event must not leak into the new one.
	got := viewOf(&b.events[0])
	if len(b.events) != 1 || got.LoRAName != "" || got.HasParent || got.Extra != 0 || got.Tier != kvbm.TierGPU || len(got.Tokens) != 4 {
		t.Errorf("second decode = %+v (%d events)", got, len(b.events))
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := kd.decode(full, &b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("decode allocates %v times per batch, want 0", allocs)
	}
}

func TestDecodeMalformed(t *testing.T) {
	tests := []struct {
		name    string
		listing string
	}{
		{"empty payload", ``},
		{"not an array or map", `a3 475055`},
		{"batch array too short", `91 cb 3f f8 00 00 00 00 00 00`},
		{"ts not a number", `92 a1 78 90`},
		{"events not an array", `92 00 a1 78`},
		{"event neither map nor array", `92 00 91 05`},
		{"event array without tag", `92 00 91 90`},
		{"event tag not a string", `92 00 91 91 05`},
		{"event map without type", `92 00 91 81 aa 626c6f636b5f73697a65 02`},
		{"map batch without events", `81 a2 7473 00`},
		{"nil block hash", `92 00 91 92 ac 426c6f636b52656d6f766564 91 c0`},
		{"negative token id", `92 00 91 94 ab 426c6f636b53746f726564 91 01 c0 91 ff`},
		{"token id above uint32", `92 00 91 94 ab 426c6f636b53746f726564 91 01 c0 91 cf 00 00 00 01 00 00 00 00`},
		{"block size negative", `92 00 91 95 ab 426c6f636b53746f726564 90 c0 90 ff`},
		{"array length beyond the payload", `92 00 dd ff ff ff ff`},
		{"map length beyond the payload", `92 00 91 df ff ff ff ff`},
		{"string length beyond the payload", `92 00 91 91 d9 ff 41`},
		{"truncated float", `92 cb 3f f8`},
		{"truncated event", `92 00 91 96 ab 426c6f636b53746f726564 91 2a`},
		{"bytes after the batch", `92 00 90 00`},
		{"deep nesting in an unknown field", `92 00 91 92 b0 416c6c426c6f636b73436c6561726564 ` + strings.Repeat("91 ", 40)},
		{"unknown code in a skipped field", `92 00 91 92 b0 416c6c426c6f636b73436c6561726564 c1`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var kd kvDecoder
			var b kvEventBatch
			err := kd.decode(unhex(t, tc.listing), &b)
			if !errors.Is(err, ErrMalformedEvent) {
				t.Errorf("decode = %v, want ErrMalformedEvent", err)
			}
		})
	}
}

func TestDecodeUnknownEventClassAndMedium(t *testing.T) {
	// ["BlockUpdated", 1, 2] and a BlockRemoved in medium "TAPE".
	payload := unhex(t, `
92 00 92
  93 ac 426c6f636b55706461746564 01 02     # "BlockUpdated"
  93 ac 426c6f636b52656d6f766564 91 01 a4 54415045 # BlockRemoved [1] "TAPE"
`)
	var kd kvDecoder
	var b kvEventBatch
	if err := kd.decode(payload, &b); err != nil {
		t.Fatal(err)
	}
	if len(b.events) != 2 || b.events[0].kind != kvEventUnknown || b.events[1].kind != kvBlockRemoved || b.events[1].tierKnown {
		t.Errorf("events = %+v", b.events)
	}
}

func TestExtraKeysTrivial(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		lora string
		want bool
	}{
		{"nil", "c0", "", true},
		{"empty", "90", "", true},
		{"lora name only", "91a76d792d6c6f7261", "my-lora", true},
		{"lora name as str8", "91d9076d792d6c6f7261", "my-lora", true},
		{"another lora name", "91a76d792d6c6f7262", "my-lora", false},
		{"name without a lora", "91a76d792d6c6f7261", "", false},
		{"multimodal hash", "91a4 61626364", "", false},
		{"two keys", "92a76d792d6c6f7261a3 78797a", "my-lora", false},
		{"truncated", "91", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := kvExtraKeysTrivial(unhex(t, tc.raw), []byte(tc.lora)); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestKvUint(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		v     uint64
		width int
	}{
		{"positive fixint", "7f", 127, 1},
		{"uint8", "cc ff", 255, 2},
		{"int8 positive", "d0 05", 5, 2},
		{"uint16", "cd 01 00", 256, 3},
		{"int16 positive", "d1 7f ff", 32767, 3},
		{"uint32", "ce 00 01 86 a0", 100000, 5},
		{"int32 positive", "d2 00 00 00 01", 1, 5},
		{"uint64", "cf 80 00 00 00 00 00 00 00", 1 << 63, 9},
		{"int64 positive", "d3 00 00 00 00 00 00 00 09", 9, 9},
		{"negative fixint", "ff", 0, 0},
		{"int8 negative", "d0 ff", 0, 0},
		{"int64 negative", "d3 ff ff ff ff ff ff ff ff", 0, 0},
		{"truncated uint32", "ce 00 01", 0, 0},
		{"truncated int16", "d1 00", 0, 0},
		{"nil", "c0", 0, 0},
		{"string", "a1 41", 0, 0},
		{"empty", "", 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, w := kvUint(unhex(t, tc.in))
			if v != tc.v || w != tc.width {
				t.Errorf("kvUint = %d, %d; want %d, %d", v, w, tc.v, tc.width)
			}
		})
	}
}

func TestKvIntBits(t *testing.T) {
	tests := []struct {
		in    string
		v     int64
		width int
	}{
		{"05", 5, 1},
		{"ff", -1, 1},
		{"e0", -32, 1},
		{"cc ff", 255, 2},
		{"d0 80", -128, 2},
		{"cd ff ff", 65535, 3},
		{"d1 80 00", -32768, 3},
		{"ce ff ff ff ff", 1<<32 - 1, 5},
		{"d2 80 00 00 00", -1 << 31, 5},
		{"cf ff ff ff ff ff ff ff fe", -2, 9},
		{"d3 80 00 00 00 00 00 00 00", -1 << 63, 9},
		{"cf 00", 0, 0},
		{"c0", 0, 0},
		{"c4 01 00", 0, 0},
	}
	for _, tc := range tests {
		v, w := kvIntBits(unhex(t, tc.in))
		if int64(v) != tc.v || w != tc.width {
			t.Errorf("kvIntBits(%s) = %d, %d; want %d, %d", tc.in, int64(v), w, tc.v, tc.width)
		}
	}
}

func FuzzDecodeBatch(f *testing.F) {
	for _, v := range []string{vecVLLMMap, vecSGLangArray, vecVLLMArrayFull, vecBytesHashesMapBatch} {
		f.Add(unhex(f, v))
	}
	f.Add([]byte{0x92, 0x00, 0xdd, 0xff, 0xff, 0xff, 0xff})
	var kd kvDecoder
	var b kvEventBatch
	f.Fuzz(func(t *testing.T, payload []byte) {
		err := kd.decode(payload, &b)
		if err != nil && !errors.Is(err, ErrMalformedEvent) {
			t.Fatalf("error %v does not wrap ErrMalformedEvent", err)
		}
		if err != nil {
			return
		}
		for i := range b.events {
			ev := &b.events[i]
			for _, sp := range ev.extraKeys {
				if sp.start < 0 || sp.end > int32(len(payload)) || sp.start > sp.end {
					t.Fatalf("extra key span %v outside the payload", sp)
				}
			}
		}
	})
}
