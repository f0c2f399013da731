package runtime

import (
	"slices"
	"strings"
	"testing"
)

func TestLogRing(t *testing.T) {
	cases := []struct {
		name   string
		writes []string
		keep   int
		want   []string
	}{
		{"lines across writes", []string{"load", "ing\nready\n"}, 10, []string{"loading", "ready"}},
		{"keeps the last", []string{"a\nb\nc\nd\n"}, 2, []string{"c", "d"}},
		{"carriage returns end lines", []string{"10%\r20%\r\n"}, 10, []string{"10%", "20%"}},
		{"a line still being written comes last", []string{"a\nhalf"}, 10, []string{"a", "half"}},
		{"blank lines are dropped", []string{"\n\n  \nx\n"}, 10, []string{"x"}},
		{"a huge line is cut", []string{strings.Repeat("x", maxLogLine+10) + "\n"}, 10, []string{strings.Repeat("x", maxLogLine), strings.Repeat("x", 10)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var seen []string
			r := NewLogRing(tc.keep, func(l string) { seen = append(seen, l) })
			for _, w := range tc.writes {
				if n, err := r.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write: %d, %v", n, err)
				}
			}
			if got := r.Lines(); !slices.Equal(got, tc.want) {
				t.Errorf("lines %q, want %q", got, tc.want)
			}
			if len(seen) == 0 && len(tc.want) > 1 {
				t.Errorf("onLine saw nothing")
			}
		})
	}
}

// FuzzLogRing: whatever an engine prints, the ring holds at most its
// number of lines, none longer than maxLogLine, and never a newline.
func FuzzLogRing(f *testing.F) {
	f.Add([]byte("Loading weights took 12.3 s\nGPU KV cache size: 29,856 tokens\n"), 3)
	f.Add([]byte("\r\r\n\x00"), 1)
	f.Fuzz(func(t *testing.T, out []byte, keep int) {
		keep = max(1, keep%50)
		r := NewLogRing(keep, nil)
		for len(out) > 0 {
			n := min(len(out), 7)
			r.Write(out[:n])
			out = out[n:]
		}
		lines := r.Lines()
		if len(lines) > keep+1 {
			t.Fatalf("%d lines kept, at most %d (+1 partial)", len(lines), keep)
		}
		for _, l := range lines {
			if len(l) > maxLogLine || strings.ContainsAny(l, "\r\n") {
				t.Fatalf("bad line %q", l)
			}
		}
	})
}
