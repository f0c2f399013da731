package warm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// seq returns n token ids starting at from.
func seq(from, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(from + i)
	}
	return out
}

// prompt is shared followed by a task of its own.
func prompt(shared []uint32, task int) []uint32 {
	return append(slices.Clone(shared), seq(1_000_000+task*100, 15)...)
}

func lens(ps [][]uint32) []int {
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = len(p)
	}
	return out
}

func TestObserveLearnsWhatTwoSessionsShare(t *testing.T) {
	l := New(Config{})
	system := seq(0, 2003) // not whole blocks: 125 blocks and 3 tokens
	if l.Observe("m", prompt(system, 1)) {
		t.Fatal("one session's prompt made a hot prefix")
	}
	if hot := l.Hot("m"); len(hot) != 0 {
		t.Fatalf("hot after one session: %v", lens(hot))
	}
	if !l.Observe("m", prompt(system, 2)) {
		t.Fatal("a second session sharing 2,003 tokens changed nothing")
	}
	hot := l.Hot("m")
	if len(hot) != 1 || !slices.Equal(hot[0], system[:2000]) {
		t.Fatalf("hot = %v, want the shared 2,000 tokens (whole blocks)", lens(hot))
	}
	if l.Observe("m", prompt(system, 3)) {
		t.Error("a third session of the same prefix changed the hot set")
	}
	if got := l.Hot("other"); got != nil {
		t.Errorf("another model has hot prefixes %v", lens(got))
	}
}

func TestObserveIgnoresShortOverlaps(t *testing.T) {
	l := New(Config{MinTokens: 512})
	l.Observe("m", append(seq(0, 496), seq(5000, 3000)...))
	if l.Observe("m", append(seq(0, 496), seq(9000, 3000)...)) || len(l.Hot("m")) != 0 {
		t.Fatalf("496 shared tokens, below MinTokens 512, made %v hot", lens(l.Hot("m")))
	}
}

func TestObserveProjects(t *testing.T) {
	// Two projects: a common head (the client's identity), then text of
	// each project, then the long tool definitions.
	head := seq(0, 160)
	projA := append(append(slices.Clone(head), seq(10_000, 40)...), seq(20_000, 4000)...)
	projB := append(append(slices.Clone(head), seq(11_000, 40)...), seq(20_000, 4000)...)
	l := New(Config{})
	l.Observe("m", prompt(projA, 1))
	l.Observe("m", prompt(projB, 1)) // shares only the head: not hot
	if hot := l.Hot("m"); len(hot) != 0 {
		t.Fatalf("hot after sessions of two projects: %v", lens(hot))
	}
	l.Observe("m", prompt(projA, 2))
	l.Observe("m", prompt(projB, 2))
	hot := l.Hot("m")
	if len(hot) != 2 || !slices.Equal(hot[0], projB[:len(projB)/16*16]) || !slices.Equal(hot[1], projA[:len(projA)/16*16]) {
		t.Fatalf("hot = %v, want project B's then A's prefix", lens(hot))
	}
}

func TestObserveLongerPrefixReplacesShorter(t *testing.T) {
	l := New(Config{})
	base := seq(0, 1024)
	l.Observe("m", append(slices.Clone(base), seq(7000, 800)...))
	l.Observe("m", append(slices.Clone(base), seq(8000, 800)...))
	if hot := l.Hot("m"); len(hot) != 1 || len(hot[0]) != 1024 {
		t.Fatalf("hot = %v, want [1024]", lens(hot))
	}
	longer := append(slices.Clone(base), seq(7000, 512)...)
	l.Observe("m", append(slices.Clone(longer), seq(40_000, 50)...))
	if hot := l.Hot("m"); len(hot) != 1 || !slices.Equal(hot[0], longer) {
		t.Fatalf("hot = %v, want the 1,536 tokens the latest two sessions share, in place of the 1,024 it extends", lens(hot))
	}
	// What the longer one covers adds nothing.
	if l.Observe("m", append(slices.Clone(base), seq(9000, 800)...)) {
		t.Errorf("a prefix that a hot one covers changed the hot set to %v", lens(l.Hot("m")))
	}
}

func TestObserveBounds(t *testing.T) {
	l := New(Config{MinTokens: 16, MaxPrefixes: 2, MaxModels: 2, MaxTokens: 100, Recent: 2})
	group := func(g int) []uint32 { return seq(g*10_000, 64) }
	for g := range 3 {
		l.Observe("m", append(group(g), seq(900_000+g, 20)...))
		l.Observe("m", append(group(g), seq(800_000+g, 20)...))
	}
	hot := l.Hot("m")
	if len(hot) != 2 || !slices.Equal(hot[0], group(2)) || !slices.Equal(hot[1], group(1)) {
		t.Fatalf("hot = %v, want groups 2 and 1 (MaxPrefixes 2, the least recently seen gone)", lens(hot))
	}
	// A prompt longer than MaxTokens is cut to whole blocks within it.
	long := seq(50_000, 500)
	l.Observe("m", long)
	l.Observe("m", long)
	if hot := l.Hot("m"); len(hot[0]) != 96 {
		t.Fatalf("hot = %v, want a 96-token prefix (MaxTokens 100 in whole blocks)", lens(hot))
	}
	for _, name := range []string{"a", "b"} {
		l.Observe(name, group(5))
		l.Observe(name, group(5))
	}
	if l.Hot("m") != nil || l.Hot("a") == nil || l.Hot("b") == nil {
		t.Errorf("after models a and b with MaxModels 2: m %v, a %v, b %v; want m forgotten",
			lens(l.Hot("m")), lens(l.Hot("a")), lens(l.Hot("b")))
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	l := New(Config{})
	for _, m := range []string{"Qwen/Qwen3-14B-FP8", "other"} {
		for g := range 2 {
			shared := seq(g*50_000, 1040)
			l.Observe(m, prompt(shared, 1))
			l.Observe(m, prompt(shared, 2))
		}
	}
	data, err := l.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back := New(Config{})
	if err := back.UnmarshalBinary(data); err != nil {
		t.Fatalf("UnmarshalBinary of MarshalBinary's output: %v", err)
	}
	for _, m := range []string{"Qwen/Qwen3-14B-FP8", "other"} {
		want, got := l.Hot(m), back.Hot(m)
		if len(got) != 2 || !slices.EqualFunc(want, got, slices.Equal[[]uint32]) {
			t.Errorf("%s: read back %v, wrote %v (order included)", m, lens(got), lens(want))
		}
	}
	again, _ := back.MarshalBinary()
	if !bytes.Equal(again, data) {
		t.Error("writing what was read gives other bytes")
	}
	// Learning goes on from what was read: a session of a loaded prefix
	// refreshes it rather than adding it again.
	if back.Observe("other", prompt(seq(0, 1040), 3)) {
		t.Error("a session starting with a loaded hot prefix changed the hot set")
	}
}

func TestUnmarshalRejects(t *testing.T) {
	good := New(Config{})
	good.Observe("m", prompt(seq(0, 1024), 1))
	good.Observe("m", prompt(seq(0, 1024), 2))
	valid, _ := good.MarshalBinary()
	uv := binary.AppendUvarint
	header := append([]byte(magic), version)
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"other magic", append([]byte("HWRX"), valid[4:]...)},
		{"other version", append(append([]byte(magic), 9), valid[5:]...)},
		{"trailing byte", append(slices.Clone(valid), 0)},
		{"cut short", valid[:len(valid)-1]},
		{"too many models", uv(slices.Clone(header), DefaultMaxModels+1)},
		{"name past the end", append(uv(uv(slices.Clone(header), 1), 10), "abc"...)},
		{"too many prefixes", uv(append(uv(uv(slices.Clone(header), 1), 1), 'm'), DefaultMaxPrefixes+1)},
		{"prefix not whole blocks", uv(uv(append(uv(uv(slices.Clone(header), 1), 1), 'm'), 1), 17)},
		{"prefix too long", uv(uv(append(uv(uv(slices.Clone(header), 1), 1), 'm'), 1), DefaultMaxTokens+16)},
		{"huge count", uv(slices.Clone(header), 1<<62)},
		{"token out of range", uv(uv(uv(append(uv(uv(slices.Clone(header), 1), 1), 'm'), 1), 16), 1<<33)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := New(Config{})
			l.Observe("keep", prompt(seq(0, 1024), 1))
			l.Observe("keep", prompt(seq(0, 1024), 2))
			err := l.UnmarshalBinary(tc.data)
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("err = %v, want ErrFormat", err)
			}
			if len(l.Hot("keep")) != 1 {
				t.Error("a failed read changed the hot prefixes")
			}
		})
	}
}

// FuzzUnmarshalBinary feeds UnmarshalBinary arbitrary bytes: it must not
// panic or allocate beyond its bounds, and what it accepts must write back
// to the same bytes.
func FuzzUnmarshalBinary(f *testing.F) {
	l := New(Config{})
	l.Observe("m", prompt(seq(0, 1024), 1))
	l.Observe("m", prompt(seq(0, 1024), 2))
	valid, _ := l.MarshalBinary()
	f.Add(valid)
	f.Add([]byte(magic))
	f.Add(append([]byte(magic), version, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		l := New(Config{})
		if err := l.UnmarshalBinary(data); err != nil {
			return
		}
		out, err := l.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		back := New(Config{})
		if err := back.UnmarshalBinary(out); err != nil {
			t.Fatalf("reading back what was written: %v", err)
		}
		again, _ := back.MarshalBinary()
		if !bytes.Equal(again, out) {
			t.Fatal("write, read, write differs")
		}
	})
}
