package kvevents

import (
	"errors"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestDecodeGoldenVectors decodes the hand-written payloads of
// testdata/decode, written from the msgpack specification and the engines'
// classes, not from this package's encoder.
func TestDecodeGoldenVectors(t *testing.T) {
	neg := func(v int64) uint64 { return uint64(v) }
	tests := []struct {
		name   string
		format Format // the layout of positional events; zero: vLLM's
		want   batchView
	}{
		{
			name: "vllm_map",
			want: batchView{TS: math.Float64bits(1.5), HasDPRank: true, Events: []eventView{{
				Kind: BlockStored, Hashes: []uint64{1<<63 + 1, neg(-2)},
				Tokens: []uint32{1, 2, 256, 100000}, BlockSize: 2, Medium: MediumGPU,
			}}},
		},
		{
			name: "sglang_array_old",
			want: batchView{TS: math.Float64bits(2), Events: []eventView{
				{Kind: BlockStored, Hashes: []uint64{42}, Parent: 7, HasParent: true, Tokens: []uint32{5, 6}, BlockSize: 2},
				{Kind: BlockRemoved, Hashes: []uint64{42}},
				{Kind: AllBlocksCleared},
			}},
		},
		{
			name: "sglang_tiers",
			want: batchView{TS: math.Float64bits(4), DPRank: 1, HasDPRank: true, Events: []eventView{
				{
					Kind: BlockStored, Hashes: []uint64{0xe3b0c44298fc1c14, 0xba7816bf8f01cfea},
					Parent: 200, HasParent: true, Tokens: []uint32{1, 2, 3, 4}, BlockSize: 2,
				},
				{Kind: BlockRemoved, Hashes: []uint64{0xe3b0c44298fc1c14}, Medium: MediumCPU},
				{Kind: BlockRemoved, Hashes: []uint64{200}, Medium: MediumDisk},
				{Kind: BlockRemoved, Hashes: []uint64{math.MaxUint64}, Medium: MediumExternal},
			}},
		},
		{
			// A salted and an unsalted event in one batch: both arrive.
			name: "sglang_salted", format: FormatSGLang,
			want: batchView{TS: math.Float64bits(5), HasDPRank: true, Events: []eventView{
				{Kind: BlockStored, Hashes: []uint64{42}, Tokens: []uint32{5, 6}, BlockSize: 2, Salt: "alice"},
				{Kind: BlockStored, Hashes: []uint64{43}, Tokens: []uint32{7, 8}, BlockSize: 2},
			}},
		},
		{
			// SGLang's map events: the salt at the top level or nested,
			// session_id known and not needed.
			name: "sglang_map_salted", format: FormatSGLang,
			want: batchView{TS: math.Float64bits(7), HasDPRank: true, Events: []eventView{
				{Kind: BlockStored, Hashes: []uint64{42}, Tokens: []uint32{5, 6}, BlockSize: 2, Salt: "alice"},
				{Kind: BlockStored, Hashes: []uint64{43}, Parent: 42, HasParent: true, Tokens: []uint32{7, 8}, BlockSize: 2, Salt: "bob"},
				{Kind: BlockRemoved, Hashes: []uint64{42}, Medium: MediumCPU},
			}},
		},
		{
			// A component type string at position 7 (and 3 of a removal),
			// before a salted event's metadata.
			name: "sglang_component_type", format: FormatSGLang,
			want: batchView{TS: math.Float64bits(8), HasDPRank: true, Events: []eventView{
				{Kind: BlockStored, Hashes: []uint64{42}, Tokens: []uint32{5, 6}, BlockSize: 2, Component: "full"},
				{Kind: BlockStored, Hashes: []uint64{43}, Tokens: []uint32{5, 6}, BlockSize: 2, Component: "swa"},
				{Kind: BlockStored, Hashes: []uint64{44}, Tokens: []uint32{7, 8}, BlockSize: 2, Component: "full", Salt: "alice"},
				{Kind: BlockRemoved, Hashes: []uint64{43}, Component: "swa"},
			}},
		},
		{
			// EAGLE's token pairs: each page's own tokens are the firsts.
			name: "sglang_eagle", format: FormatSGLang,
			want: batchView{TS: math.Float64bits(6), HasDPRank: true, Events: []eventView{
				{Kind: BlockStored, Hashes: []uint64{42}, Tokens: []uint32{5, 6}, BlockSize: 2, Medium: MediumGPU},
				{Kind: BlockStored, Hashes: []uint64{43}, Parent: 42, HasParent: true, Tokens: []uint32{300, 7}, BlockSize: 2, Medium: MediumGPU},
			}},
		},
		{
			name: "vllm_array_full",
			want: batchView{TS: math.Float64bits(1.5), Events: []eventView{
				{
					Kind: BlockStored, Hashes: []uint64{neg(-100), 127}, Parent: 255, HasParent: true,
					Tokens: []uint32{1, 2, 3, 4}, BlockSize: 2, LoRAName: "my-lora", LoRAID: 5, HasLoRAID: true,
					Medium: MediumCPU, Extra: []string{"c0", "91a76d792d6c6f7261"}, SpecKind: "full_attention",
				},
				{Kind: BlockRemoved, Hashes: []uint64{neg(-100)}, Medium: MediumCPU, Group: 1},
			}},
		},
		{
			name: "bytes_hashes_map_batch",
			want: batchView{TS: math.Float64bits(3), DPRank: 1, HasDPRank: true, Events: []eventView{{
				Kind:   BlockStored,
				Hashes: []uint64{0xdeadbeef}, Parent: 0xcafe, HasParent: true, Bytes: true,
				Tokens: []uint32{10, 11}, BlockSize: 2, SpecKind: "GPU",
			}}},
		},
		{
			// The offloading connector's CPU events name the GPU cache's
			// blocks by their digests: the keys must be the GPU's ints.
			name: "vllm_offload_cpu",
			want: batchView{TS: math.Float64bits(5), HasDPRank: true, Events: []eventView{
				{
					Kind: BlockStored, Hashes: []uint64{0xa495991b7852b855, 0xb410ff61f20015ad},
					Tokens: []uint32{1, 2, 3, 4}, BlockSize: 2, Medium: MediumGPU,
				},
				{
					Kind: BlockStored, Hashes: []uint64{0xa495991b7852b855, 0xb410ff61f20015ad},
					Bytes: true, Medium: MediumCPU,
				},
				{Kind: BlockRemoved, Hashes: []uint64{0xa495991b7852b855}, Bytes: true, Medium: MediumCPU},
			}},
		},
		{
			name: "vllm_mediums",
			want: batchView{TS: math.Float64bits(1), Events: []eventView{
				{Kind: BlockRemoved, Hashes: []uint64{1}, Medium: MediumGPU},
				{Kind: BlockRemoved, Hashes: []uint64{2}, Medium: MediumCPU},
				{Kind: BlockRemoved, Hashes: []uint64{3}, Medium: MediumDisk},
				{Kind: BlockRemoved, Hashes: []uint64{4}, Medium: MediumDisk},
				{Kind: BlockRemoved, Hashes: []uint64{5}, Medium: MediumCPU},
				{Kind: BlockRemoved, Hashes: []uint64{6}, Medium: MediumUnknown},
			}},
		},
		{
			name: "unknown_class",
			want: batchView{Events: []eventView{
				{Kind: KindUnknown},
				// Fields of an unknown class are read by name all the same;
				// consumers skip the event by its kind.
				{Kind: KindUnknown, Hashes: []uint64{7}},
				{Kind: AllBlocksCleared},
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			payload := readVector(t, "decode/"+tc.name)
			// The vector must be valid msgpack by an independent reading.
			var generic any
			if err := msgpack.Unmarshal(payload, &generic); err != nil {
				t.Fatalf("vector is not msgpack: %v", err)
			}
			dec := Decoder{Format: tc.format}
			var b Batch
			if err := dec.Decode(payload, &b); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if got := batchViewOf(&b); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decoded\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDecodeReusesBuffers(t *testing.T) {
	var dec Decoder
	var b Batch
	full := readVector(t, "decode/vllm_array_full")
	small := readVector(t, "decode/vllm_map")
	if err := dec.Decode(full, &b); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(small, &b); err != nil {
		t.Fatal(err)
	}
	// Fields of the earlier, longer event must not leak into the new one.
	got := viewOf(&b.Events[0])
	if len(b.Events) != 1 || got.LoRAName != "" || got.HasParent || got.HasLoRAID || got.Extra != nil ||
		got.Medium != MediumGPU || len(got.Tokens) != 4 || b.HasDPRank != true {
		t.Errorf("second decode = %+v (%d events)", got, len(b.Events))
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := dec.Decode(full, &b); err != nil {
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
		{"block size too large", `92 00 91 95 ab 426c6f636b53746f726564 90 c0 90 ce 00 10 00 01`},
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
			var dec Decoder
			var b Batch
			err := dec.Decode(unhex(t, tc.listing), &b)
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("decode = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestParseMedium(t *testing.T) {
	tests := []struct {
		name string
		want Medium
	}{
		{"", MediumGPU},
		{"GPU", MediumGPU},
		{"cuda", MediumGPU},
		{"CPU", MediumCPU},
		{"cpu", MediumCPU},
		{"CPU_PINNED", MediumCPU},
		{"Host", MediumCPU},
		{"DISK", MediumDisk},
		{"STORAGE", MediumDisk},
		{"nvme", MediumDisk},
		{"EXTERNAL", MediumExternal},
		// Names SGLang never wrote (its StorageMedium enum has none).
		{"CPU_TIER1", MediumUnknown},
		{"CPU_TIER2", MediumUnknown},
		{"TAPE", MediumUnknown},
		{"UNKNOWN", MediumUnknown},
		{"CPU_PINNED_BUT_LONGER_THAN_ANY", MediumUnknown},
	}
	for _, tc := range tests {
		if got := ParseMedium(tc.name); got != tc.want {
			t.Errorf("ParseMedium(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Every medium's own names parse back to it.
	for m := range MediumUnknown + 1 {
		if got := ParseMedium(m.String()); got != m {
			t.Errorf("ParseMedium(%q) = %v, want %v", m.String(), got, m)
		}
		if got := ParseMedium(m.sglangName()); got != m {
			t.Errorf("ParseMedium(%q) = %v, want %v", m.sglangName(), got, m)
		}
	}
}

func TestUintAt(t *testing.T) {
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
			v, w := uintAt(unhex(t, tc.in))
			if v != tc.v || w != tc.width {
				t.Errorf("uintAt = %d, %d; want %d, %d", v, w, tc.v, tc.width)
			}
		})
	}
}

func TestIntBits(t *testing.T) {
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
		v, w := intBits(unhex(t, tc.in))
		if int64(v) != tc.v || w != tc.width {
			t.Errorf("intBits(%s) = %d, %d; want %d, %d", tc.in, int64(v), w, tc.v, tc.width)
		}
	}
}

func TestBytesHashKey(t *testing.T) {
	// vLLM's maybe_convert_block_hash: int.from_bytes(b, "big") & (2**64-1),
	// values worked out by hand (the digests are SHA-256 of "" and "abc").
	tests := []struct {
		in   string // hex
		want uint64
	}{
		{"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", 0xa495991b7852b855},
		{"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", 0xb410ff61f20015ad},
		{"ff0102030405060708", 0x0102030405060708}, // the high byte is dropped
		{"0102030405060708", 0x0102030405060708},
		{"deadbeef", 0xdeadbeef}, // short: read as if zero-padded
		{"", 0},
	}
	for _, tc := range tests {
		if got := BytesHashKey(unhexString(tc.in)); got != tc.want {
			t.Errorf("BytesHashKey(%s) = %#x, want %#x", tc.in, got, tc.want)
		}
	}
}

// TestDecodeHugeSkippedLengthsCostNothing decodes payloads whose skipped
// fields declare strings, byte strings and extensions of gigabytes: they
// are rejected without allocating for the declared length, so a long-lived
// decoder does not grow with every such payload.
func TestDecodeHugeSkippedLengthsCostNothing(t *testing.T) {
	cleared := `b0 416c6c426c6f636b73436c6561726564` // "AllBlocksCleared"
	payloads := [][]byte{
		unhex(t, `92 00 91 92 `+cleared+` db 7f ff ff ff 41`),    // str32
		unhex(t, `92 00 91 92 `+cleared+` c6 7f ff ff ff 41`),    // bin32
		unhex(t, `92 00 91 92 `+cleared+` c9 7f ff ff ff 01 41`), // ext32
		unhex(t, `82 a6 6576656e7473 90 a1 78 c6 7f ff ff ff`),   // bin32 under an unknown batch key
	}
	var dec Decoder
	var b Batch
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 20 {
		for _, p := range payloads {
			if err := dec.Decode(p, &b); !errors.Is(err, ErrMalformed) {
				t.Fatalf("decode = %v, want ErrMalformed", err)
			}
		}
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("80 malformed payloads allocated %d bytes", grew)
	}
}

// TestDecodePositionalLayouts: vLLM's and SGLang's positional BlockStored
// differ after medium (vLLM: lora_name, extra_keys; SGLang: a salted
// request's metadata map), so each is read in its engine's layout only.
func TestDecodePositionalLayouts(t *testing.T) {
	var b Batch
	salted := readVector(t, "decode/sglang_salted")
	if err := (&Decoder{Format: FormatMap}).Decode(salted, &b); err == nil {
		t.Error("SGLang's metadata read as vLLM's lora_name")
	}
	full := readVector(t, "decode/vllm_array_full")
	if err := (&Decoder{Format: FormatSGLang}).Decode(full, &b); err == nil {
		t.Error("vLLM's lora_name read as SGLang's metadata")
	}
	if err := (&Decoder{Format: FormatArray}).Decode(full, &b); err != nil || string(b.Events[0].LoRAName) != "my-lora" {
		t.Errorf("vLLM positional: %v, lora_name %q", err, b.Events[0].LoRAName)
	}
}
