package api

import (
	"bytes"
	"unicode/utf8"

	json "github.com/goccy/go-json"
)

// writeEvent writes one named SSE event with v as its JSON data.
func writeEvent(w *bytes.Buffer, name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{}`) // only values the gateway builds reach here, and they marshal
	}
	w.WriteString("event: ")
	w.WriteString(name)
	w.WriteString("\ndata: ")
	w.Write(b)
	w.WriteString("\n\n")
}

const hexDigits = "0123456789abcdef"

// writeJSONString writes s as a JSON string, for events written without
// encoding/json. Like encoding/json it turns each byte of invalid UTF-8
// into U+FFFD; unlike it, it leaves <, > and & alone (SSE is no HTML).
func writeJSONString(w *bytes.Buffer, s string) {
	w.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			w.WriteString(s[start:i])
			switch c {
			case '"', '\\':
				w.WriteByte('\\')
				w.WriteByte(c)
			case '\n':
				w.WriteString(`\n`)
			case '\r':
				w.WriteString(`\r`)
			case '\t':
				w.WriteString(`\t`)
			default:
				w.WriteString(`\u00`)
				w.WriteByte(hexDigits[c>>4])
				w.WriteByte(hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			w.WriteString(s[start:i])
			w.WriteString(`\ufffd`)
			i++
			start = i
			continue
		}
		i += size
	}
	w.WriteString(s[start:])
	w.WriteByte('"')
}
