package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/tokenizer"
)

func TestReadTraceTestdata(t *testing.T) {
	tests := []struct {
		file  string
		first TraceRecord
		last  time.Duration // timestamp of line 200
	}{
		{"testdata/mooncake-conversation-200.jsonl", TraceRecord{Line: 1, InputLength: 6758, OutputLength: 500, HashIDs: iota32(0, 14)}, 0},
		{"testdata/mooncake-synthetic-200.jsonl", TraceRecord{Line: 1, InputLength: 40160, OutputLength: 6, HashIDs: iota32(0, 79)}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			recs, err := ReadTraceFile(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 200 {
				t.Fatalf("%d records, want 200", len(recs))
			}
			if got := recs[0]; got.Line != tt.first.Line || got.Timestamp != tt.first.Timestamp ||
				got.InputLength != tt.first.InputLength || got.OutputLength != tt.first.OutputLength || !slices.Equal(got.HashIDs, tt.first.HashIDs) {
				t.Errorf("first record %+v, want %+v", got, tt.first)
			}
			for i, rec := range recs {
				if rec.Line != i+1 {
					t.Fatalf("record %d says line %d", i, rec.Line)
				}
				if i > 0 && rec.Timestamp < recs[i-1].Timestamp {
					t.Errorf("line %d goes back in time", rec.Line)
				}
				if got := len(rec.Tokens(0)); got != rec.InputLength {
					t.Errorf("line %d expands to %d tokens, want %d", rec.Line, got, rec.InputLength)
				}
			}
		})
	}
}

func iota32(from, n int) []uint32 {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(from + i)
	}
	return ids
}

// TestTraceSharingFollowsHashIDs checks Mooncake's contract on the real
// excerpt: two prompts share exactly the tokens (and so the 16-token block
// hashes) of their common leading hash ids, and differ right after.
func TestTraceSharingFollowsHashIDs(t *testing.T) {
	recs, err := ReadTraceFile("testdata/mooncake-conversation-200.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	recs = recs[:60]
	toks := make([][]uint32, len(recs))
	hashes := make([][]tokenizer.SeqHash, len(recs))
	for i := range recs {
		toks[i] = recs[i].Tokens(0)
		hashes[i] = tokenizer.BlockHashes(toks[i], tokenizer.DefaultBlockSize)
	}
	shared := 0
	for i := range recs {
		for j := i + 1; j < len(recs); j++ {
			a, b := recs[i], recs[j]
			k := 0
			for k < len(a.HashIDs) && k < len(b.HashIDs) && a.HashIDs[k] == b.HashIDs[k] {
				k++
			}
			common := min(k*TraceBlockTokens, len(toks[i]), len(toks[j]))
			if !slices.Equal(toks[i][:common], toks[j][:common]) {
				t.Fatalf("lines %d and %d share %d ids but not their first %d tokens", a.Line, b.Line, k, common)
			}
			blocks := common / tokenizer.DefaultBlockSize
			if !slices.Equal(hashes[i][:blocks], hashes[j][:blocks]) {
				t.Fatalf("lines %d and %d: block hashes of the shared part differ", a.Line, b.Line)
			}
			if k > 0 {
				shared++
			}
			if k*TraceBlockTokens+4 <= min(len(toks[i]), len(toks[j])) {
				at := k * TraceBlockTokens
				if slices.Equal(toks[i][at:at+4], toks[j][at:at+4]) {
					t.Errorf("lines %d and %d: different ids %d and %d begin alike", a.Line, b.Line, a.HashIDs[k], b.HashIDs[k])
				}
				if bl := at / tokenizer.DefaultBlockSize; hashes[i][bl] == hashes[j][bl] {
					t.Errorf("lines %d and %d: the block after the shared ids has the same hash", a.Line, b.Line)
				}
			}
		}
	}
	if shared == 0 {
		t.Error("no two records of the excerpt share a leading id; the test checks nothing")
	}
}

func TestExpandHandChecked(t *testing.T) {
	// Two ids, 600 tokens: 512 from id 7, then the first 88 of id 9; that
	// is 37 full 16-token blocks and 8 tokens of a partial one.
	rec := TraceRecord{InputLength: 600, HashIDs: []uint32{7, 9}}
	toks := rec.Tokens(0)
	if len(toks) != 600 {
		t.Fatalf("%d tokens, want 600", len(toks))
	}
	id7 := AppendBlockTokens(nil, 7, 512, 0)
	id9 := AppendBlockTokens(nil, 9, 512, 0)
	if len(id7) != 512 || !slices.Equal(toks[:512], id7) || !slices.Equal(toks[512:], id9[:88]) {
		t.Fatal("the prompt is not id 7's 512 tokens followed by id 9's first 88")
	}
	if got := AppendBlockTokens([]uint32{1}, 9, 88, 0); !slices.Equal(got[1:], id9[:88]) || got[0] != 1 {
		t.Error("a partial block is not the prefix of the full one")
	}
	if n := len(tokenizer.BlockHashes(toks, tokenizer.DefaultBlockSize)); n != 37 {
		t.Errorf("%d full blocks, want 37", n)
	}
	// Every 16-token block of an id starts with the same four tokens (the
	// id's key); the fifth tells the 32 positions apart.
	fifth := map[uint32]bool{}
	for s := range 32 {
		blk := id7[16*s : 16*s+16]
		if !slices.Equal(blk[:4], id7[:4]) {
			t.Errorf("block %d of id 7 starts %v, block 0 %v", s, blk[:4], id7[:4])
		}
		fifth[blk[4]] = true
	}
	if len(fifth) != 32 {
		t.Errorf("%d distinct position tokens among 32 blocks", len(fifth))
	}
	if slices.Equal(id7[:4], id9[:4]) {
		t.Error("ids 7 and 9 have the same key tokens")
	}
	// Asking for more than one trace block, or less than nothing, is clamped.
	if n := len(AppendBlockTokens(nil, 1, 9999, 0)); n != 512 {
		t.Errorf("expanding 9999 tokens gave %d, want 512", n)
	}
	if n := len(AppendBlockTokens(nil, 1, -3, 0)); n != 0 {
		t.Errorf("expanding -3 tokens gave %d", n)
	}
	if slices.Equal(AppendBlockTokens(nil, 7, 512, 1), id7) {
		t.Error("seeds 0 and 1 expand id 7 alike")
	}
}

func TestPermute32(t *testing.T) {
	// MurmurHash3's fmix32: fixed point 0, published values for 1 and 2.
	for in, want := range map[uint32]uint32{0: 0, 1: 0x514e28b7, 2: 0x30f4c306} {
		if got := permute32(in); got != want {
			t.Errorf("permute32(%d) = %#x, want %#x", in, got, want)
		}
	}
}

func TestExpandedBlocksNeverCollide(t *testing.T) {
	seen := make(map[[16]uint32]uint64, 4096*32)
	for _, id := range append(iota32(0, 4000), 1<<31, 1<<32-1, 0xdeadbeef) {
		toks := AppendBlockTokens(nil, id, 512, 0)
		again := AppendBlockTokens(nil, id, 512, 0)
		if !slices.Equal(toks, again) {
			t.Fatalf("id %d expands differently twice", id)
		}
		for s := range 32 {
			var blk [16]uint32
			copy(blk[:], toks[16*s:])
			key := uint64(id)<<8 | uint64(s)
			if prev, dup := seen[blk]; dup {
				t.Fatalf("id %d block %d equals id %d block %d", id, s, prev>>8, prev&0xff)
			}
			seen[blk] = key
		}
	}
}

func TestReadTraceErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     string
	}{
		{"not json", `{"timestamp": 0,`, "bad trace"},
		{"missing hash ids", `{"timestamp": 0, "input_length": 10, "output_length": 1}`, "want timestamp"},
		{"missing timestamp", `{"input_length": 10, "output_length": 1, "hash_ids": [1]}`, "want timestamp"},
		{"negative timestamp", `{"timestamp": -1, "input_length": 10, "output_length": 1, "hash_ids": [1]}`, "timestamp"},
		{"input too long for ids", `{"timestamp": 0, "input_length": 513, "output_length": 1, "hash_ids": [1]}`, "does not fit"},
		{"input too short for ids", `{"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [1, 2]}`, "does not fit"},
		{"no ids", `{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": []}`, "does not fit"},
		{"zero input", `{"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": [1]}`, "input_length"},
		{"negative output", `{"timestamp": 0, "input_length": 5, "output_length": -1, "hash_ids": [1]}`, "output_length"},
		{"negative id", `{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [-1]}`, "hash id"},
		{"id too big", `{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [4294967296]}`, "hash id"},
		{"error on line 3", "\n{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [1]}\n[]", "line 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := ReadTrace(strings.NewReader(tt.in))
			if !errors.Is(err, ErrBadTrace) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ReadTrace = %v, %v; want ErrBadTrace mentioning %q", recs, err, tt.want)
			}
		})
	}
}

func TestReadTraceAcceptsVariants(t *testing.T) {
	in := "\n" +
		`{"timestamp": 1.5, "input_length": 512, "output_length": 0, "hash_ids": [4294967295], "extra": true}` + "\n" +
		"   \n" +
		`{"hash_ids": [1, 2], "output_length": 3, "input_length": 513, "timestamp": 2}`
	recs, err := ReadTrace(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []TraceRecord{
		{Line: 2, Timestamp: 1500 * time.Microsecond, InputLength: 512, OutputLength: 0, HashIDs: []uint32{1<<32 - 1}},
		{Line: 4, Timestamp: 2 * time.Millisecond, InputLength: 513, OutputLength: 3, HashIDs: []uint32{1, 2}},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	for i := range want {
		g, w := recs[i], want[i]
		if g.Line != w.Line || g.Timestamp != w.Timestamp || g.InputLength != w.InputLength || g.OutputLength != w.OutputLength || !slices.Equal(g.HashIDs, w.HashIDs) {
			t.Errorf("record %d = %+v, want %+v", i, g, w)
		}
	}
}

func FuzzReadTrace(f *testing.F) {
	f.Add(`{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}`)
	f.Add(`{"timestamp": 1e9, "input_length": 1, "output_length": 0, "hash_ids": [0]}` + "\n\n" + `{}`)
	f.Add(`{"timestamp": NaN}`)
	f.Fuzz(func(t *testing.T, in string) {
		recs, err := ReadTrace(strings.NewReader(in))
		if err != nil {
			return
		}
		tr, err := NewTrace(recs, TraceConfig{Speed: 0.001})
		if err != nil {
			t.Fatal(err)
		}
		lengths := map[string]int{}
		for _, r := range recs {
			lengths[fmt.Sprintf("t%06d", r.Line)] = r.InputLength
		}
		for i := range min(tr.Len(), 3) {
			req := tr.Request(i)
			if want := lengths[req.Session]; len(req.Prompt) != want {
				t.Fatalf("request %s has %d tokens, its record %d", req.Session, len(req.Prompt), want)
			}
			if req.Due < 0 || req.OutputTokens < 1 {
				t.Fatalf("request %d due %v asks for %d tokens", i, req.Due, req.OutputTokens)
			}
		}
	})
}

func testRecords() []TraceRecord {
	// Out of order on purpose: the replay sorts by time, stably.
	return []TraceRecord{
		{Line: 1, Timestamp: 2500 * time.Millisecond, InputLength: 40, OutputLength: 7, HashIDs: []uint32{3}},
		{Line: 2, Timestamp: 0, InputLength: 600, OutputLength: 5, HashIDs: []uint32{1, 2}},
		{Line: 3, Timestamp: 1000 * time.Millisecond, InputLength: 10, OutputLength: 0, HashIDs: []uint32{1}},
		{Line: 4, Timestamp: 2500 * time.Millisecond, InputLength: 20, OutputLength: 9, HashIDs: []uint32{4}},
	}
}

func TestTraceReplaySchedule(t *testing.T) {
	tests := []struct {
		name     string
		cfg      TraceConfig
		wantDue  []time.Duration
		wantSess []string
	}{
		{"original pace", TraceConfig{}, []time.Duration{0, time.Second, 2500 * time.Millisecond, 2500 * time.Millisecond},
			[]string{"t000002", "t000003", "t000001", "t000004"}},
		{"twice as fast", TraceConfig{Speed: 2}, []time.Duration{0, 500 * time.Millisecond, 1250 * time.Millisecond, 1250 * time.Millisecond},
			[]string{"t000002", "t000003", "t000001", "t000004"}},
		{"half speed", TraceConfig{Speed: 0.5}, []time.Duration{0, 2 * time.Second, 5 * time.Second, 5 * time.Second},
			[]string{"t000002", "t000003", "t000001", "t000004"}},
		{"limit", TraceConfig{Limit: 2}, []time.Duration{0, time.Second}, []string{"t000002", "t000003"}},
		{"duration after scaling", TraceConfig{Speed: 2, Duration: time.Second}, []time.Duration{0, 500 * time.Millisecond},
			[]string{"t000002", "t000003"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := NewTrace(testRecords(), tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			var due []time.Duration
			var sess []string
			for i := range tr.Len() {
				req := tr.Request(i)
				due = append(due, req.Due)
				sess = append(sess, req.Session)
			}
			if !slices.Equal(due, tt.wantDue) || !slices.Equal(sess, tt.wantSess) {
				t.Errorf("due %v sessions %v, want %v %v", due, sess, tt.wantDue, tt.wantSess)
			}
			if tr.Span() != tt.wantDue[len(tt.wantDue)-1] {
				t.Errorf("span %v", tr.Span())
			}
		})
	}
}

func TestTraceRequests(t *testing.T) {
	tr, err := NewTrace(testRecords(), TraceConfig{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	first := tr.Request(0)
	rec := testRecords()[1]
	if !slices.Equal(first.Prompt, rec.Tokens(3)) || first.OutputTokens != 5 || first.Turn != 0 || first.Answer != nil {
		t.Errorf("first request %+v does not replay line 2", first)
	}
	if first.Segments[0] != (Segment{RoleUser, 0, 600}) || len(first.Segments) != 1 {
		t.Errorf("segments %v, want one user segment", first.Segments)
	}
	if second := tr.Request(1); second.OutputTokens != 1 {
		t.Errorf("output_length 0 asks for %d tokens, want 1", second.OutputTokens)
	}
	if _, err := NewTrace(nil, TraceConfig{Speed: -1}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("negative speed: %v", err)
	}
	if _, err := NewTrace(nil, TraceConfig{Limit: -1}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("negative limit: %v", err)
	}
}

func TestTraceDriverIsOpenLoop(t *testing.T) {
	tr, err := NewTrace(testRecords(), TraceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	d := tr.NewDriver()
	first := d.Next(0)
	if first == nil || first.Session != "t000002" {
		t.Fatalf("Next(0) = %v, want line 2", first)
	}
	if req := d.Next(999 * time.Millisecond); req != nil {
		t.Fatalf("Next(999ms) = %v, want nothing due", req.Session)
	}
	if at, ok := d.Wake(); !ok || at != time.Second {
		t.Errorf("Wake = %v, %v; want 1s", at, ok)
	}
	// Nothing completes, yet the later requests still fall due: open loop.
	var got []*Request
	for req := d.Next(10 * time.Second); req != nil; req = d.Next(10 * time.Second) {
		got = append(got, req)
	}
	if len(got) != 3 {
		t.Fatalf("%d requests due by 10s, want 3", len(got))
	}
	if _, ok := d.Wake(); ok {
		t.Error("Wake still reports a request")
	}
	if d.Finished() {
		t.Error("finished with requests in flight")
	}
	for _, req := range got {
		d.Complete(req, 11*time.Second, false)
	}
	if d.Finished() {
		t.Error("finished with the first request still in flight")
	}
	d.Complete(&Request{}, 0, false) // unknown: ignored
	if d.Finished() {
		t.Error("an unknown completion counted")
	}
	d.Complete(first, 12*time.Second, true)
	if !d.Finished() {
		t.Error("not finished after every request completed")
	}
}
