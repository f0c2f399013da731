package bench

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/hearth-llm/hearth/tokenizer"
)

func TestVocabularyIsDistinctWords(t *testing.T) {
	words, ids := Words()
	if len(words) != 256 || len(ids) != 256 {
		t.Fatalf("vocabulary has %d words and %d ids, want 256", len(words), len(ids))
	}
	seenWord := map[string]bool{}
	seenID := map[uint32]bool{}
	for i, w := range words {
		if seenWord[w] || seenID[ids[i]] {
			t.Errorf("entry %d (%q, %d) repeats a word or id", i, w, ids[i])
		}
		seenWord[w], seenID[ids[i]] = true, true
		// A leading space then letters only: the pre-tokenizer keeps such a
		// word in one piece, whatever word comes before or after it.
		if len(w) < 2 || w[0] != ' ' || strings.IndexFunc(w[1:], func(r rune) bool { return !unicode.IsLower(r) }) >= 0 {
			t.Errorf("entry %d %q is not a space and lowercase letters", i, w)
		}
	}
}

// TestVocabularyIsQwen3Tokens checks the claim the live runner relies on:
// every word is one Qwen3 token with the listed id, and generated text
// tokenizes back into exactly the generated ids.
func TestVocabularyIsQwen3Tokens(t *testing.T) {
	m, err := tokenizer.Qwen3()
	if err != nil {
		t.Fatalf("load Qwen3 tokenizer: %v", err)
	}
	words, ids := Words()
	for i, w := range words {
		if got := m.Encode(w); !slices.Equal(got, []uint32{ids[i]}) {
			t.Errorf("Encode(%q) = %v, want [%d]", w, got, ids[i])
		}
	}
	a, err := NewAgentic(AgenticConfig{Seed: 3, PrefixTokens: 500, TotalSessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	last := a.Session(0).Turns[DefaultSteps-1]
	if got := m.Encode(last.Text()); !slices.Equal(got, last.Prompt) {
		t.Errorf("Encode(Text(prompt)) differs from the prompt's %d ids (got %d ids)", len(last.Prompt), len(got))
	}
	var rec TraceRecord = TraceRecord{InputLength: 700, HashIDs: []uint32{5, 6}}
	toks := rec.Tokens(0)
	text, err := Text(toks)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Encode(text); !slices.Equal(got, toks) {
		t.Errorf("Encode(Text(trace tokens)) differs from the tokens")
	}
}

func TestText(t *testing.T) {
	got, err := Text([]uint32{vocabulary[0].id, vocabulary[255].id, vocabulary[7].id})
	if err != nil {
		t.Fatal(err)
	}
	if want := vocabulary[0].text + vocabulary[255].text + vocabulary[7].text; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
	if _, err := Text([]uint32{vocabulary[0].id, 151643}); !errors.Is(err, ErrUnknownToken) {
		t.Errorf("Text of an unknown id: err = %v, want ErrUnknownToken", err)
	}
	if got, err := Text(nil); err != nil || got != "" {
		t.Errorf("Text(nil) = %q, %v", got, err)
	}
}

func TestRandIsDeterministicAndInRange(t *testing.T) {
	a, b := NewRand(42), NewRand(42)
	c := NewRand(43)
	differ := false
	for range 1000 {
		x, y, z := a.Uint64(), b.Uint64(), c.Uint64()
		if x != y {
			t.Fatal("same seed gave different streams")
		}
		differ = differ || x != z
	}
	if !differ {
		t.Error("seeds 42 and 43 gave the same stream")
	}
	// SplitMix64's published first output for seed 0.
	if got := NewRand(0).Uint64(); got != 0xe220a8397b1dcdaf {
		t.Errorf("first output for seed 0 = %#x, want 0xe220a8397b1dcdaf", got)
	}
	r := NewRand(1)
	counts := make([]int, 7)
	for range 70000 {
		n := r.IntN(7)
		if n < 0 || n >= 7 {
			t.Fatalf("IntN(7) = %d", n)
		}
		counts[n]++
		if f := r.Float64(); f < 0 || f >= 1 {
			t.Fatalf("Float64 = %v", f)
		}
	}
	for v, n := range counts {
		if n < 9000 || n > 11000 {
			t.Errorf("IntN(7) gave %d %d times of 70000, want about 10000", v, n)
		}
	}
	if r.IntN(0) != 0 || r.IntN(-3) != 0 {
		t.Error("IntN of a non-positive bound is not 0")
	}
}

func TestLogNormalMatchesItsQuantiles(t *testing.T) {
	tests := []struct {
		name string
		dist LogNormal
	}{
		{"default tool pause", DefaultToolPause},
		{"narrow", LogNormal{Median: 500 * time.Millisecond, P90: 800 * time.Millisecond}},
		{"degenerate", LogNormal{Median: 2 * time.Second, P90: 2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRand(7)
			const n = 100000
			ms := make([]float64, n)
			for i := range ms {
				ms[i] = millis(tt.dist.Sample(r))
			}
			slices.Sort(ms)
			for _, q := range []struct {
				p    float64
				want time.Duration
			}{{50, tt.dist.Median}, {90, tt.dist.P90}} {
				got := Percentile(ms, q.p)
				want := millis(q.want)
				if math.Abs(got-want) > 0.03*want+1 {
					t.Errorf("p%v = %.1f ms, want %.1f ms within 3%%", q.p, got, want)
				}
			}
		})
	}
}

func TestUniformAndConstant(t *testing.T) {
	r := NewRand(1)
	u := Uniform{Min: time.Second, Max: 3 * time.Second}
	var sum time.Duration
	for range 10000 {
		d := u.Sample(r)
		if d < u.Min || d > u.Max {
			t.Fatalf("uniform sample %v outside [%v, %v]", d, u.Min, u.Max)
		}
		sum += d
	}
	if mean := sum / 10000; mean < 1950*time.Millisecond || mean > 2050*time.Millisecond {
		t.Errorf("uniform mean %v, want about 2s", mean)
	}
	if d := (Constant{Value: 1500 * time.Millisecond}).Sample(r); d != 1500*time.Millisecond {
		t.Errorf("constant sample %v", d)
	}
}

func TestParseDist(t *testing.T) {
	tests := []struct {
		name, in string
		want     DurationDist
		wantErr  bool
	}{
		{"lognormal", "lognormal:3s,20s", LogNormal{3 * time.Second, 20 * time.Second}, false},
		{"lognormal with spaces", " lognormal: 500ms , 2s ", LogNormal{500 * time.Millisecond, 2 * time.Second}, false},
		{"uniform", "uniform:1s,5s", Uniform{time.Second, 5 * time.Second}, false},
		{"const", "const:2s", Constant{2 * time.Second}, false},
		{"bare duration", "250ms", Constant{250 * time.Millisecond}, false},
		{"zero const", "const:0s", Constant{0}, false},
		{"unknown kind", "gamma:1s,2s", nil, true},
		{"too few", "lognormal:3s", nil, true},
		{"too many", "const:1s,2s", nil, true},
		{"p90 below median", "lognormal:3s,1s", nil, true},
		{"zero median", "lognormal:0s,1s", nil, true},
		{"max below min", "uniform:5s,1s", nil, true},
		{"negative", "const:-1s", nil, true},
		{"huge", "const:2000h", nil, true},
		{"not a duration", "const:soon", nil, true},
		{"empty", "", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDist(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrBadDist) {
					t.Errorf("ParseDist(%q) = %v, %v; want ErrBadDist", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseDist(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			back, err := ParseDist(got.String())
			if err != nil || back != got {
				t.Errorf("ParseDist(%q.String()) = %v, %v", got, back, err)
			}
		})
	}
}

func FuzzParseDist(f *testing.F) {
	for _, s := range []string{"lognormal:3s,20s", "uniform:1s,5s", "const:2s", "2s", "x:1,2", "lognormal:1ns,1000h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDist(s)
		if err != nil {
			return
		}
		r := NewRand(1)
		for range 10 {
			if v := d.Sample(r); v < 0 || v > maxSample {
				t.Fatalf("%v sampled %v", d, v)
			}
		}
		back, err := ParseDist(d.String())
		if err != nil || back != d {
			t.Fatalf("round trip of %v: %v, %v", d, back, err)
		}
	})
}

func TestParseIntRange(t *testing.T) {
	tests := []struct {
		name, in string
		want     IntRange
		wantErr  bool
	}{
		{"range", "200-500", IntRange{200, 500}, false},
		{"single", "150", IntRange{150, 150}, false},
		{"spaces", " 1 - 2 ", IntRange{1, 2}, false},
		{"reversed", "5-1", IntRange{}, true},
		{"negative", "-5", IntRange{}, true},
		{"too big", "1-99999999999", IntRange{}, true},
		{"word", "many", IntRange{}, true},
		{"empty", "", IntRange{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseIntRange(tt.in)
			if tt.wantErr != (err != nil) || got != tt.want {
				t.Fatalf("ParseIntRange(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrBadRange) {
				t.Errorf("error %v does not wrap ErrBadRange", err)
			}
			if err == nil {
				if back, err := ParseIntRange(got.String()); err != nil || back != got {
					t.Errorf("round trip of %v: %v, %v", got, back, err)
				}
			}
		})
	}
}

func FuzzParseIntRange(f *testing.F) {
	for _, s := range []string{"200-500", "150", "-1", "3-2", "0-16777216"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseIntRange(s)
		if err != nil {
			return
		}
		if g.Min < 0 || g.Max < g.Min || g.Max > maxTokens {
			t.Fatalf("ParseIntRange(%q) accepted %v", s, g)
		}
		r := NewRand(1)
		for range 10 {
			if v := g.Sample(r); v < g.Min || v > g.Max {
				t.Fatalf("%v sampled %d", g, v)
			}
		}
	})
}
