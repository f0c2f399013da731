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

func TestLogRingLinesSince(t *testing.T) {
	r := NewLogRing(3, nil)
	lines, next, more := r.LinesSince(0)
	if len(lines) != 0 || next != 0 {
		t.Fatalf("empty ring: %q, next %d", lines, next)
	}
	r.Write([]byte("a\nb\npartial"))
	select {
	case <-more:
	default:
		t.Fatal("the wait channel did not close when a line came")
	}
	lines, next, more = r.LinesSince(0)
	if !slices.Equal(lines, []string{"a", "b"}) || next != 2 {
		t.Fatalf("got %q, next %d; want a, b and 2 (not the partial line)", lines, next)
	}
	if lines, _, _ := r.LinesSince(1); !slices.Equal(lines, []string{"b"}) {
		t.Fatalf("since 1: %q", lines)
	}
	r.Write([]byte(" line"))
	select {
	case <-more:
		t.Fatal("the wait channel closed without a complete line")
	default:
	}
	r.Write([]byte("\nc\nd\n")) // the ring of 3 loses a and b
	<-more
	lines, next, _ = r.LinesSince(1)
	if !slices.Equal(lines, []string{"partial line", "c", "d"}) || next != 5 {
		t.Fatalf("after wrapping: %q, next %d; want the 3 kept lines and 5", lines, next)
	}
	if lines, _, _ := r.LinesSince(4); !slices.Equal(lines, []string{"d"}) {
		t.Fatalf("since 4 after wrapping: %q", lines)
	}
	if lines, next, _ := r.LinesSince(99); len(lines) != 0 || next != 5 {
		t.Fatalf("since the future: %q, next %d", lines, next)
	}
}

// BenchmarkLogRingWrite: writing costs one allocation per line (the line's
// string); a follower adds only what its own reads cost.
func BenchmarkLogRingWrite(b *testing.B) {
	for _, tc := range []struct {
		name   string
		follow bool
	}{{"alone", false}, {"followed", true}} {
		b.Run(tc.name, func(b *testing.B) {
			r := NewLogRing(1000, nil)
			line := []byte("(EngineCore_DP0 pid=164) INFO 01-23 15:51:33 [kv_cache_utils.py:1087] GPU KV cache size: 31,648 tokens\n")
			var seq uint64
			b.ReportAllocs()
			for b.Loop() {
				r.Write(line)
				if tc.follow {
					_, seq, _ = r.LinesSince(seq)
				}
			}
		})
	}
}
