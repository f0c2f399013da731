package kvevents

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

var update = flag.Bool("update", false, "rewrite the generated payloads in testdata/encode")

var allFormats = []Format{FormatMap, FormatArray, FormatMapBatch, FormatSGLang, FormatSGLangMap}

// goldenBatch exercises every field and the integer widths that matter: a
// hash of 2^63 and one that is negative as an int64, a parent, a LoRA
// adapter by id and name, extra keys, a KV-cache group, every medium.
func goldenBatch() *Batch {
	return &Batch{
		TS: 1_700_000_000.5, DPRank: 1, HasDPRank: true,
		Events: []Event{
			{
				Kind: BlockStored, BlockHashes: []uint64{1 << 63, 5}, TokenIDs: []uint32{1, 2, 300, 70000},
				BlockSize: 2, Medium: MediumGPU,
			},
			{
				Kind: BlockStored, BlockHashes: []uint64{0xe3b0c44298fc1c14}, ParentBlockHash: 5, HasParent: true,
				TokenIDs: []uint32{7, 8}, BlockSize: 2, LoRAID: 3, HasLoRAID: true, LoRAName: []byte("my-lora"),
				ExtraKeys: [][]byte{unhexString("91a76d792d6c6f7261")}, GroupIdx: 1, Medium: MediumGPU,
			},
			{Kind: BlockStored, BlockHashes: []uint64{1 << 63}, Medium: MediumCPU},
			{Kind: BlockRemoved, BlockHashes: []uint64{math.MaxUint64, 5}, Medium: MediumGPU},
			{Kind: BlockRemoved, BlockHashes: []uint64{1 << 63}, Medium: MediumDisk, GroupIdx: 2},
			{Kind: AllBlocksCleared},
		},
	}
}

func unhexString(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// hexLines formats a payload as the generated golden files hold it.
func hexLines(header string, p []byte) string {
	var sb strings.Builder
	sb.WriteString(header)
	for len(p) > 0 {
		n := min(len(p), 16)
		for i, c := range p[:n] {
			if i > 0 {
				sb.WriteByte(' ')
			}
			fmt.Fprintf(&sb, "%02x", c)
		}
		sb.WriteByte('\n')
		p = p[n:]
	}
	return sb.String()
}

// TestAppendBatchGolden pins AppendBatch's output byte for byte. Run with
// -update to rewrite the files after a deliberate change, then check the
// diff against the engines' formats.
func TestAppendBatchGolden(t *testing.T) {
	for _, f := range allFormats {
		t.Run(f.String(), func(t *testing.T) {
			got := AppendBatch(nil, goldenBatch(), f)
			path := filepath.Join("testdata", "encode", f.String()+".hex")
			if *update {
				header := fmt.Sprintf("# goldenBatch in %s format, written by AppendBatch (go test -update).\n", f)
				if err := os.WriteFile(path, []byte(hexLines(header, got)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := readVector(t, "encode/"+f.String())
			if !bytes.Equal(got, want) {
				t.Errorf("AppendBatch differs from %s\n got %x\nwant %x", path, got, want)
			}
		})
	}
}

// TestAppendBatchRoundTrip decodes what AppendBatch writes in every format:
// the batch comes back with every field the format carries.
func TestAppendBatchRoundTrip(t *testing.T) {
	for _, f := range allFormats {
		t.Run(f.String(), func(t *testing.T) {
			in := goldenBatch()
			payload := AppendBatch(nil, in, f)
			var dec Decoder
			var out Batch
			if err := dec.Decode(payload, &out); err != nil {
				t.Fatal(err)
			}
			want := carried(batchViewOf(in), f)
			if got := batchViewOf(&out); !reflect.DeepEqual(got, want) {
				t.Errorf("round trip\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestAppendBatchShape reads AppendBatch's output with an independent
// msgpack reader and checks each format's shape against the engines'
// classes: which fields, in which order or under which keys.
func TestAppendBatchShape(t *testing.T) {
	tests := []struct {
		format Format
		first  string // fmt of the first event
		second string // fmt of the second
		rank   string // fmt of the batch's rank
		hash   string // the encoding of 2^63 (or its bits)
	}{
		{
			FormatMap,
			"map[block_hashes:[9223372036854775808 5] block_size:2 lora_id:<nil> lora_name:<nil> medium:GPU parent_block_hash:<nil> token_ids:[1 2 300 70000] type:BlockStored]",
			"map[block_hashes:[16406829232824261652] block_size:2 extra_keys:[[my-lora]] group_idx:1 lora_id:3 lora_name:my-lora medium:GPU parent_block_hash:5 token_ids:[7 8] type:BlockStored]",
			"1", "cf8000000000000000",
		},
		{
			FormatArray,
			"[BlockStored [9223372036854775808 5] <nil> [1 2 300 70000] 2 <nil> GPU <nil>]",
			"[BlockStored [16406829232824261652] 5 [7 8] 2 3 GPU my-lora [[my-lora]] 1]",
			"1", "cf8000000000000000",
		},
		{
			FormatMapBatch,
			"map[block_hashes:[9223372036854775808 5] block_size:2 lora_id:<nil> lora_name:<nil> medium:GPU parent_block_hash:<nil> token_ids:[1 2 300 70000] type:BlockStored]",
			"map[block_hashes:[16406829232824261652] block_size:2 extra_keys:[[my-lora]] group_idx:1 lora_id:3 lora_name:my-lora medium:GPU parent_block_hash:5 token_ids:[7 8] type:BlockStored]",
			"1", "cf8000000000000000",
		},
		{
			FormatSGLang,
			"[BlockStored [-9223372036854775808 5] <nil> [1 2 300 70000] 2 <nil> GPU]",
			"[BlockStored [-2039914840885289964] 5 [7 8] 2 3 GPU]",
			"1", "d38000000000000000",
		},
	}
	for _, tc := range tests {
		t.Run(tc.format.String(), func(t *testing.T) {
			payload := AppendBatch(nil, goldenBatch(), tc.format)
			if !strings.Contains(hex.EncodeToString(payload), tc.hash) {
				t.Errorf("2^63 is not encoded as %s", tc.hash)
			}
			var v any
			if err := msgpack.Unmarshal(payload, &v); err != nil {
				t.Fatal(err)
			}
			var ts, events, rank any
			if m, ok := v.(map[string]any); ok {
				if tc.format != FormatMapBatch || len(m) != 3 {
					t.Fatalf("batch is a map %v", m)
				}
				ts, events, rank = m["ts"], m["events"], m["data_parallel_rank"]
			} else {
				a := v.([]any)
				if tc.format == FormatMapBatch || len(a) != 3 {
					t.Fatalf("batch is an array %v", a)
				}
				ts, events, rank = a[0], a[1], a[2]
			}
			if ts != 1_700_000_000.5 {
				t.Errorf("ts = %v", ts)
			}
			if got := fmt.Sprint(rank); got != tc.rank {
				t.Errorf("rank = %s, want %s", got, tc.rank)
			}
			evs := events.([]any)
			if len(evs) != 6 {
				t.Fatalf("%d events", len(evs))
			}
			if got := fmt.Sprint(evs[0]); got != tc.first {
				t.Errorf("first event\n got %s\nwant %s", got, tc.first)
			}
			if got := fmt.Sprint(evs[1]); got != tc.second {
				t.Errorf("second event\n got %s\nwant %s", got, tc.second)
			}
		})
	}
}

func TestAppendBatchLeavesOutDefaults(t *testing.T) {
	b := &Batch{TS: 1, Events: []Event{{Kind: BlockRemoved, BlockHashes: []uint64{1}}}}
	tests := []struct {
		format Format
		want   string
	}{
		{FormatMap, "[1 [map[block_hashes:[1] medium:GPU type:BlockRemoved]]]"},
		{FormatArray, "[1 [[BlockRemoved [1] GPU]]]"},
		{FormatMapBatch, "map[events:[map[block_hashes:[1] medium:GPU type:BlockRemoved]] ts:1]"},
		{FormatSGLang, "[1 [[BlockRemoved [1] GPU]]]"},
	}
	for _, tc := range tests {
		var v any
		if err := msgpack.Unmarshal(AppendBatch(nil, b, tc.format), &v); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(v); got != tc.want {
			t.Errorf("%v: got %s, want %s", tc.format, got, tc.want)
		}
	}
}

func TestAppendBatchGrowsOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("skipping: the race detector's instrumentation allocates; the allocation count is checked without -race")
	}
	b := benchBatch()
	for _, f := range allFormats {
		if allocs := testing.AllocsPerRun(20, func() { AppendBatch(nil, b, f) }); allocs != 1 {
			t.Errorf("%v: AppendBatch(nil) allocates %v times, want 1", f, allocs)
		}
		buf := make([]byte, 0, 1<<20)
		if allocs := testing.AllocsPerRun(20, func() { AppendBatch(buf[:0], b, f) }); allocs != 0 {
			t.Errorf("%v: AppendBatch into a large buffer allocates %v times, want 0", f, allocs)
		}
	}
}

func TestAppendBatchLengthHeaders(t *testing.T) {
	// Lengths past the fix* and 16-bit forms, read back.
	long := strings.Repeat("x", 300)
	ev := Event{Kind: BlockStored, BlockHashes: make([]uint64, 70000), TokenIDs: make([]uint32, 20), BlockSize: 0, LoRAName: []byte(long)}
	b := &Batch{TS: 2, Events: make([]Event, 17)}
	for i := range b.Events {
		b.Events[i] = Event{Kind: AllBlocksCleared}
	}
	b.Events[3] = ev
	var dec Decoder
	var out Batch
	for _, f := range []Format{FormatMap, FormatArray} {
		if err := dec.Decode(AppendBatch(nil, b, f), &out); err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		got := &out.Events[3]
		if len(out.Events) != 17 || len(got.BlockHashes) != 70000 || string(got.LoRAName) != long || len(got.TokenIDs) != 20 {
			t.Errorf("%v: %d events, event 3 has %d hashes, lora name of %d bytes", f, len(out.Events), len(got.BlockHashes), len(got.LoRAName))
		}
	}
}

func TestFormatNames(t *testing.T) {
	for _, f := range allFormats {
		got, err := ParseFormat(f.String())
		if err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %v, %v", f.String(), got, err)
		}
	}
	if f, err := ParseFormat(""); err != nil || f != FormatMap {
		t.Errorf(`ParseFormat("") = %v, %v; want map`, f, err)
	}
	if _, err := ParseFormat("json"); err == nil {
		t.Error(`ParseFormat("json") succeeded`)
	}
}

func TestTimestamp(t *testing.T) {
	tests := []struct {
		t    time.Time
		want float64
	}{
		{time.Unix(1_700_000_000, 500_000_000), 1_700_000_000.5},
		{time.Unix(1_700_000_000, 250_000_000), 1_700_000_000.25},
		{time.Unix(0, 0), 0},
		{time.Unix(-2, 500_000_000), -1.5},
	}
	for _, tc := range tests {
		if got := Timestamp(tc.t); got != tc.want {
			t.Errorf("Timestamp(%v) = %v, want %v", tc.t, got, tc.want)
		}
	}
}

// TestAppendBatchSGLangMedia: the simulated SGLang names its tiers as
// SGLang's StorageMedium enum does (kv_events.py: GPU = "GPU",
// CPU = "CPU_PINNED", DISK = "DISK"), written out here by hand.
func TestAppendBatchSGLangMedia(t *testing.T) {
	b := &Batch{TS: 1, Events: []Event{
		{Kind: BlockRemoved, BlockHashes: []uint64{1}, Medium: MediumGPU},
		{Kind: BlockRemoved, BlockHashes: []uint64{2}, Medium: MediumCPU},
		{Kind: BlockRemoved, BlockHashes: []uint64{3}, Medium: MediumDisk},
	}}
	want := unhex(t, `
		92 cb 3ff0000000000000 93
		93 ac 426c6f636b52656d6f766564 91 01 a3 475055                # "GPU"
		93 ac 426c6f636b52656d6f766564 91 02 aa 4350555f50494e4e4544  # "CPU_PINNED"
		93 ac 426c6f636b52656d6f766564 91 03 a4 4449534b              # "DISK"
	`)
	if got := AppendBatch(nil, b, FormatSGLang); !bytes.Equal(got, want) {
		t.Errorf("SGLang media\n got %x\nwant %x", got, want)
	}
}

// TestAppendBatchOffloadedBlocks: the simulated vLLM reports its CPU tier as
// vLLM v0.20's OffloadingConnector does (docs/engine-conformance.md V1-V3):
// each block by its 32-byte digest as msgpack bin, the GPU's int being the
// digest's low 64 bits read big-endian; no parent, no token ids, block_size
// 0, medium "CPU". Read back with the msgpack library as plain values, not
// with the Decoder.
func TestAppendBatchOffloadedBlocks(t *testing.T) {
	const key = 0xa495991b7852b855
	b := &Batch{TS: 1, Events: []Event{
		{Kind: BlockStored, BlockHashes: []uint64{key, 7}, BytesHashes: true, Medium: MediumCPU},
		{Kind: BlockRemoved, BlockHashes: []uint64{key}, BytesHashes: true, Medium: MediumCPU},
	}}
	for _, f := range []Format{FormatMap, FormatMapBatch, FormatArray} {
		var plain any
		if err := msgpack.Unmarshal(AppendBatch(nil, b, f), &plain); err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		var events []any
		switch p := plain.(type) {
		case []any:
			events = p[1].([]any)
		case map[string]any:
			events = p["events"].([]any)
		}
		if len(events) != 2 {
			t.Fatalf("%v: %d events, want 2", f, len(events))
		}
		for i, raw := range events {
			fields := eventFields(t, raw)
			hashes := fields["block_hashes"].([]any)
			first, ok := hashes[0].([]byte)
			if !ok || len(first) != 32 || !bytes.Equal(first[24:], []byte{0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55}) {
				t.Errorf("%v event %d: first hash %#v, want 32 bytes ending a495991b7852b855", f, i, hashes[0])
			}
			if fields["medium"] != "CPU" {
				t.Errorf("%v event %d: medium %v, want CPU", f, i, fields["medium"])
			}
			if i == 0 {
				second, _ := hashes[1].([]byte)
				if len(second) != 32 || !bytes.Equal(second[24:], []byte{0, 0, 0, 0, 0, 0, 0, 7}) || bytes.Equal(second[:24], first[:24]) {
					t.Errorf("%v: second hash %x, want its own 32-byte digest ending 07", f, second)
				}
				if fields["parent_block_hash"] != nil || len(fields["token_ids"].([]any)) != 0 || fields["block_size"] != int8(0) {
					t.Errorf("%v: stored event %v, want no parent, no tokens, block_size 0", f, fields)
				}
			}
		}
	}
}

// eventFields names the fields of an event read as plain msgpack values,
// map or positional (vLLM's class order).
func eventFields(t *testing.T, raw any) map[string]any {
	t.Helper()
	if m, ok := raw.(map[string]any); ok {
		return m
	}
	arr := raw.([]any)
	names := map[string][]string{
		"BlockStored":  {"type", "block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name"},
		"BlockRemoved": {"type", "block_hashes", "medium"},
	}[arr[0].(string)]
	m := make(map[string]any, len(names))
	for i, name := range names {
		if i < len(arr) {
			m[name] = arr[i]
		}
	}
	return m
}

// TestSpecKindRoundTrip: the KV-cache group's kind and window of vLLM's
// stored blocks survive each vLLM layout both ways, with a group before
// them and without.
func TestSpecKindRoundTrip(t *testing.T) {
	b := &Batch{TS: 2.5, Events: []Event{
		{Kind: BlockStored, BlockHashes: []uint64{1}, TokenIDs: []uint32{1, 2}, BlockSize: 2, Medium: MediumGPU,
			GroupIdx: 1, SpecKind: []byte("sliding_window"), SlidingWindow: 128},
		{Kind: BlockStored, BlockHashes: []uint64{2}, TokenIDs: []uint32{3, 4}, BlockSize: 2, Medium: MediumGPU,
			SpecKind: []byte("full_attention")},
	}}
	for _, f := range []Format{FormatMap, FormatArray, FormatMapBatch} {
		var got Batch
		dec := Decoder{Format: f}
		if err := dec.Decode(AppendBatch(nil, b, f), &got); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if g, w := batchViewOf(&got), batchViewOf(b); !reflect.DeepEqual(g, w) {
			t.Errorf("%s: decoded %+v, want %+v", f, g, w)
		}
	}
}
