package kvevents

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"unsafe"
)

// FuzzDecode feeds arbitrary payloads to the Decoder, in vLLM's positional
// layout and in SGLang's: it never panics, every error wraps ErrMalformed,
// extra keys lie within the payload, and whatever decodes survives a round
// trip through AppendBatch in every format with the fields that format
// carries.
func FuzzDecode(f *testing.F) {
	for _, v := range allVectors(f) {
		f.Add(v)
	}
	f.Add([]byte{0x92, 0x00, 0xdd, 0xff, 0xff, 0xff, 0xff})
	var dec, dec2 Decoder
	var b, b2 Batch
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, layout := range []Format{FormatMap, FormatSGLang} {
			dec.Format = layout
			roundTrip(t, payload, &dec, &dec2, &b, &b2)
		}
	})
}

func roundTrip(t *testing.T, payload []byte, dec, dec2 *Decoder, b, b2 *Batch) {
	err := dec.Decode(payload, b)
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", err)
		}
		return
	}
	for i := range b.Events {
		for _, raw := range b.Events[i].ExtraKeys {
			if !within(raw, payload) {
				t.Fatalf("extra key %x outside the payload", raw)
			}
		}
	}
	view := batchViewOf(b)
	for _, format := range allFormats {
		out := AppendBatch(nil, b, format)
		dec2.Format = format
		if err := dec2.Decode(out, b2); err != nil {
			t.Fatalf("%v: decoding the re-encoded batch: %v\n%x", format, err, out)
		}
		if got, want := carried(batchViewOf(b2), format), carried(view, format); !reflect.DeepEqual(got, want) {
			t.Fatalf("%v: round trip\n got %+v\nwant %+v", format, got, want)
		}
	}
}

// within reports whether sub is a slice of the memory of p.
func within(sub, p []byte) bool {
	if len(sub) == 0 {
		return true
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(sub)))
	base := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	return start >= base && start+uintptr(len(sub)) <= base+uintptr(len(p)) &&
		bytes.Equal(sub, p[start-base:start-base+uintptr(len(sub))])
}
