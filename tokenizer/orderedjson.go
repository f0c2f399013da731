package tokenizer

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// parseOrderedJSON decodes JSON into values a template can read: objects
// become *exec.Dict, which keeps key order for tojson and for loops over
// items; arrays become pyList; integers stay int and other numbers become
// float64, as Python's json module reads them. It is hand-written because a
// 30k-token conversation is parsed on every turn and encoding/json's token
// API takes a millisecond for it.
func parseOrderedJSON(raw []byte) (any, error) {
	// Decoded strings are never longer than the input, so one arena of
	// that size holds them all without growing.
	p := jsonParser{d: raw, arena: make([]byte, 0, len(raw))}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.d) {
		return nil, fmt.Errorf("%w: trailing data at byte %d", errBadJSON, p.i)
	}
	return v, nil
}

type jsonParser struct {
	d       []byte
	i       int
	arena   []byte // backs every decoded string; never reallocated
	scratch []byte
}

// keep returns b as a string backed by the arena. A conversation holds
// hundreds of strings; one allocation for all of them keeps a turn cheap.
// The arena's bytes are written once and never again (it is only appended
// to, within its capacity), which is what makes the strings immutable.
func (p *jsonParser) keep(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(p.arena)+len(b) > cap(p.arena) {
		return string(b) // cannot happen: decoded text is never longer than JSON
	}
	at := len(p.arena)
	p.arena = append(p.arena, b...)
	return unsafe.String(&p.arena[at], len(b))
}

// maxJSONDepth bounds nesting so that hostile input cannot exhaust the stack.
const maxJSONDepth = 1000

func (p *jsonParser) space() {
	for p.i < len(p.d) {
		switch p.d[p.i] {
		case ' ', '\n', '\r', '\t':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) fail(what string) error {
	return fmt.Errorf("%w: %s at byte %d", errBadJSON, what, p.i)
}

func (p *jsonParser) value(depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, p.fail("nesting too deep")
	}
	if p.i >= len(p.d) {
		return nil, p.fail("unexpected end")
	}
	switch c := p.d[p.i]; {
	case c == '{':
		p.i++
		dict := &exec.Dict{}
		p.space()
		if p.i < len(p.d) && p.d[p.i] == '}' {
			p.i++
			return dict, nil
		}
		for {
			p.space()
			if p.i >= len(p.d) || p.d[p.i] != '"' {
				return nil, p.fail("expected a key")
			}
			key, err := p.str()
			if err != nil {
				return nil, err
			}
			p.space()
			if p.i >= len(p.d) || p.d[p.i] != ':' {
				return nil, p.fail("expected ':'")
			}
			p.i++
			p.space()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			dict.Pairs = append(dict.Pairs, &exec.Pair{Key: exec.AsValue(key), Value: exec.AsValue(v)})
			p.space()
			if p.i >= len(p.d) {
				return nil, p.fail("unterminated object")
			}
			if p.d[p.i] == '}' {
				p.i++
				return dict, nil
			}
			if p.d[p.i] != ',' {
				return nil, p.fail("expected ','")
			}
			p.i++
		}
	case c == '[':
		p.i++
		list := pyList{}
		p.space()
		if p.i < len(p.d) && p.d[p.i] == ']' {
			p.i++
			return list, nil
		}
		for {
			p.space()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
			p.space()
			if p.i >= len(p.d) {
				return nil, p.fail("unterminated array")
			}
			if p.d[p.i] == ']' {
				p.i++
				return list, nil
			}
			if p.d[p.i] != ',' {
				return nil, p.fail("expected ','")
			}
			p.i++
		}
	case c == '"':
		return p.str()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return nil, p.fail("unexpected character")
}

func (p *jsonParser) literal(word string) error {
	if len(p.d)-p.i < len(word) || string(p.d[p.i:p.i+len(word)]) != word {
		return p.fail("bad literal")
	}
	p.i += len(word)
	return nil
}

func (p *jsonParser) number() (any, error) {
	start := p.i
	isFloat := false
	if p.d[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.d) {
		c := p.d[p.i]
		switch {
		case c >= '0' && c <= '9':
		case c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-':
			isFloat = true
		default:
			goto done
		}
		p.i++
	}
done:
	s := string(p.d[start:p.i])
	if p.i == digits || p.d[digits] == '0' && p.i > digits+1 && p.d[digits+1] >= '0' && p.d[digits+1] <= '9' {
		return nil, p.fail("bad number")
	}
	if !isFloat {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return int(n), nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, p.fail("bad number")
	}
	return f, nil
}

// str decodes the string at p.d[p.i] == '"'. Control characters inside
// strings are accepted as they are (Python's json.loads with strict=False
// does the same); everything else follows RFC 8259.
func (p *jsonParser) str() (string, error) {
	p.i++
	rest := p.d[p.i:]
	q := bytes.IndexByte(rest, '"')
	if q < 0 {
		return "", p.fail("unterminated string")
	}
	if k := bytes.IndexByte(rest[:q], '\\'); k < 0 {
		p.i += q + 1
		if !utf8.Valid(rest[:q]) {
			return string([]rune(string(rest[:q]))), nil // invalid bytes become U+FFFD, as encoding/json does
		}
		return p.keep(rest[:q]), nil
	}
	// Escapes: copy the runs between them in bulk into the scratch buffer.
	b := p.scratch[:0]
	for {
		rest = p.d[p.i:]
		q := bytes.IndexByte(rest, '"')
		if q < 0 {
			return "", p.fail("unterminated string")
		}
		k := bytes.IndexByte(rest[:q], '\\')
		if k < 0 {
			b = append(b, rest[:q]...)
			p.i += q + 1
			break
		}
		b = append(b, rest[:k]...)
		p.i += k
		if p.i+1 >= len(p.d) {
			return "", p.fail("unterminated escape")
		}
		esc := p.d[p.i+1]
		p.i += 2
		switch esc {
		case '"', '\\', '/':
			b = append(b, esc)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.fail("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if p.i+1 < len(p.d) && p.d[p.i] == '\\' && p.d[p.i+1] == 'u' {
					save := p.i
					p.i += 2
					if r2, ok = p.hex4(); !ok {
						return "", p.fail("bad \\u escape")
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
					} else {
						p.i = save
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", p.fail("bad escape")
		}
	}
	p.scratch = b
	if !utf8.Valid(b) {
		return string([]rune(string(b))), nil
	}
	return p.keep(b), nil
}

func (p *jsonParser) hex4() (rune, bool) {
	if len(p.d)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.d[p.i : p.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}
