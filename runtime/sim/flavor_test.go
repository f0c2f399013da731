package sim

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hearth-llm/hearth/kvevents"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// The vectors were computed with Python's hashlib by a line-for-line
// replica of SGLang's get_hash_str (SHA-256 over the prior page's digest and
// the page's tokens as 4-byte little-endian) and hash_str_to_int64 (the
// first 16 hex digits as a signed int64).
func TestSGLangBlockHashes(t *testing.T) {
	qwen := []uint32{151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198, 151644, 872, 198, 9707, 0,
		4294967295, 151643, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}
	tests := []struct {
		name   string
		tokens []uint32
		page   int
		want   []int64
	}{
		{"one page of 1..16", tokens(1, 16), 16, []int64{8635429971592222890}},
		{"three pages of 0..47", tokens(0, 48), 16,
			[]int64{6738917275443968386, 5080553031686747138, -7164637995261029506}},
		{"chat tokens, max uint32", qwen, 16, []int64{-6994960425662416116, 7375718791923449771}},
		{"page size 4", []uint32{5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6}, 4,
			[]int64{-1582671037667975764, -1324354747102845977, 6231423157432541649}},
		{"partial page is not hashed", tokens(1, 15), 16, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []int64
			for _, h := range SGLangBlockHashes(tc.tokens, tc.page) {
				got = append(got, int64(h))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("hashes %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseKind(t *testing.T) {
	tests := []struct {
		in   string
		want hruntime.Kind
		ok   bool
	}{
		{"", hruntime.KindVLLM, true},
		{"vllm", hruntime.KindVLLM, true},
		{"SGLang", hruntime.KindSGLang, true},
		{"tgi", "", false},
		{"test-noevents", "", false},
	}
	for _, tc := range tests {
		got, err := ParseKind(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseKind(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && tc.in != "" {
			if back, _ := ParseKind(string(got)); back != got {
				t.Errorf("%v does not round-trip through String", got)
			}
		}
	}
	if err := (Config{GPU: "rtx4090", Model: "qwen3-8b", Kind: "tgi"}).Validate(); err == nil {
		t.Error("a kind the simulator does not play validates")
	}
}

// An SGLang-flavoured core publishes one BlockStored per page, with SGLang's
// hashes chained through parent_block_hash, and finds its cache by them.
func TestSGLangCoreEvents(t *testing.T) {
	sink := newFakeSink(t)
	c := newCore(t, Config{Model: "qwen3-8b", NumGPUBlocks: 64, Kind: hruntime.KindSGLang}, sink)
	prompt := tokens(100, 16*3+5)
	d := newDriver(c)
	runOne(t, d, "a", prompt, 1)

	want := SGLangBlockHashes(prompt, 16)
	var stored []kvevents.Event
	for _, e := range sink.events {
		if e.Kind == kvevents.BlockStored {
			stored = append(stored, e)
		}
	}
	if len(stored) != len(want) {
		t.Fatalf("%d BlockStored events, want one per full page (%d)", len(stored), len(want))
	}
	for i, e := range stored {
		if len(e.BlockHashes) != 1 || e.BlockHashes[0] != want[i] || e.BlockSize != 16 ||
			!slices.Equal(e.TokenIDs, prompt[i*16:(i+1)*16]) {
			t.Errorf("event %d: %+v, want hash %x and page %d's tokens", i, e, want[i], i)
		}
		if e.HasParent != (i > 0) || (i > 0 && e.ParentBlockHash != want[i-1]) {
			t.Errorf("event %d: parent %x (set %v), want the previous page's hash", i, e.ParentBlockHash, e.HasParent)
		}
	}
	if n := c.CachedPrefixBlocks(prompt); n != 3 {
		t.Errorf("CachedPrefixBlocks = %d, want 3", n)
	}
	// The same pages hit the cache on a second request.
	out := runOne(t, d, "b", concat(prompt[:48], tokens(9000, 20)), 1)
	if got := out[0].CachedTokens; got != 48 {
		t.Errorf("second request: %d cached tokens, want 48", got)
	}
}

// The vLLM flavour's hashes are its own (seeded FNV), not SGLang's, and
// runs of blocks stay in one event.
func TestFlavorsHashDifferently(t *testing.T) {
	prompt := tokens(1, 64)
	var got [2][]kvevents.Event
	for i, f := range []hruntime.Kind{hruntime.KindVLLM, hruntime.KindSGLang} {
		sink := newFakeSink(t)
		c := newCore(t, Config{Model: "qwen3-8b", NumGPUBlocks: 64, Kind: f}, sink)
		runOne(t, newDriver(c), "a", prompt, 1)
		for _, e := range sink.events {
			if e.Kind == kvevents.BlockStored {
				got[i] = append(got[i], e)
			}
		}
	}
	if len(got[0]) != 1 || len(got[0][0].BlockHashes) != 4 {
		t.Fatalf("vLLM flavour: %d events, want one with 4 blocks", len(got[0]))
	}
	if len(got[1]) != 4 {
		t.Fatalf("SGLang flavour: %d events, want 4", len(got[1]))
	}
	if got[0][0].BlockHashes[0] == got[1][0].BlockHashes[0] {
		t.Error("both flavours give the first block the same hash")
	}
}

func TestSGLangStepDoesNotAllocate(t *testing.T) {
	c := newCore(t, Config{Kind: hruntime.KindSGLang}, discardSink{})
	for i := range 32 {
		mustAdd(t, c, 0, &Request{ID: fmt.Sprint(i), Prompt: tokens(i*1000, 200), Output: tokens(1, 1000)})
	}
	c.Step(0)
	c.Step(0)
	// Every 16th decode fills a page, which is hashed and stored.
	if n := testing.AllocsPerRun(200, func() { c.Step(0) }); n != 0 {
		t.Errorf("Step allocates %v times per run, want 0", n)
	}
}

// BenchmarkSGLangPageHash: one page of 16 tokens chained on the previous
// page's digest, the cost the SGLang flavour adds per stored block.
func BenchmarkSGLangPageHash(b *testing.B) {
	page := tokens(1000, 16)
	var prior [32]byte
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		prior, buf = sglangPageDigest(&prior, page, buf)
	}
	_ = sglangBlockID(&prior)
}
