package kvbm

import (
	"bytes"
	"testing"
)

// FuzzParseHeader: the parser never panics, and a header it accepts
// re-encodes to exactly the bytes it read.
func FuzzParseHeader(f *testing.F) {
	for _, h := range []blockHeader{
		{hash: 1, length: 2621440, payloadSum: 7},
		{hash: 0, length: 0, payloadSum: zeroSum(0)},
	} {
		var b [HeaderSize]byte
		h.encode(b[:])
		f.Add(b[:])
		f.Add(append(b[:], 1, 2, 3))
		b[20] ^= 1
		f.Add(b[:])
	}
	f.Add([]byte("HKVB"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := parseHeader(data)
		if err != nil {
			return
		}
		if h.length < 0 || h.length > MaxBlockBytes {
			t.Fatalf("accepted length %d", h.length)
		}
		var b [HeaderSize]byte
		h.encode(b[:])
		if !bytes.Equal(b[:], data[:HeaderSize]) {
			t.Fatalf("accepted %x, re-encodes to %x", data[:HeaderSize], b)
		}
	})
}
