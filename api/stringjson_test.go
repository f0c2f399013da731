package api

import (
	"strings"
	"testing"

	json "github.com/goccy/go-json"
)

// A large string is written as the encoder writes it, into a buffer of
// the right size.
func TestAppendStringJSONMatchesTheEncoder(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quote " backslash \ slash /`, "lines\n\r\ttabs", "ctl \x00\x01\x1f\x7f",
		"html <a href='x'>&amp;</a>", "utf-8 é 한 😀", "seps \u2028 \u2029", "bad \xff\xfe utf-8 \xe2\x82",
		strings.Repeat("func main() { if a < b && c > d { fmt.Println(\"hi\\n\") } }\n", 50),
	} {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got := appendStringJSON(nil, s)
		if string(got) != string(want) {
			t.Errorf("%q: got %s, the encoder %s", s, got, want)
		}
		if n := stringJSONLen(s); n != len(want) {
			t.Errorf("%q: length %d, want %d", s, n, len(want))
		}
	}
}
