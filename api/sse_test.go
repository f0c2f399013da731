package api

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzWriteJSONString checks the hand-written string encoder against
// encoding/json: what a client decodes must be the same.
func FuzzWriteJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote \" back \\ nl \n cr \r tab \t", "\x00\x1f\x7f", "é😀\u2028", "bad \xff\xfe utf8 \xe2\x82"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var w bytes.Buffer
		writeJSONString(&w, s)
		var got string
		if err := json.Unmarshal(w.Bytes(), &got); err != nil {
			t.Fatalf("%q wrote invalid JSON %s: %v", s, w.Bytes(), err)
		}
		ref, _ := json.Marshal(s)
		var want string
		_ = json.Unmarshal(ref, &want)
		if got != want {
			t.Fatalf("%q: decoded %q, encoding/json's decodes to %q", s, got, want)
		}
	})
}
