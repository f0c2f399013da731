package assets

import (
	"bytes"
	"io/fs"
	"testing"
)

func TestStaticFiles(t *testing.T) {
	tests := []struct {
		name string
		file string
		want string // a string the file must contain
	}{
		{"htmx", "htmx.min.js", "4.0.1"},
		{"sse extension", "hx-sse.min.js", "hx-sse:connect"},
		{"licence", "htmx-LICENSE", "Zero-Clause BSD"},
		{"styles", "console.css", "prefers-color-scheme: dark"},
		{"copy buttons", "console.js", "data-copy"},
		{"icon", "favicon.svg", "<svg"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := fs.ReadFile(Static, tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, []byte(tc.want)) {
				t.Errorf("%s does not contain %q", tc.file, tc.want)
			}
		})
	}
}
