package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// tokenizer.json is 10 MB or more, nearly all of it vocabulary and merges.
// encoding/json needs over a second for it on a small machine, so the file
// is cut into its fields by a minimal scanner, small fields go through
// encoding/json and the two big ones through the parsers below.

var errBadJSON = errors.New("malformed JSON")

func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\n' || d[i] == '\r' || d[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at d[i] == '"'.
func skipString(d []byte, i int) (int, error) {
	for i++; i < len(d); i++ {
		switch d[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("%w: unterminated string", errBadJSON)
}

// skipValue returns the index after the JSON value starting at d[i].
func skipValue(d []byte, i int) (int, error) {
	if i >= len(d) {
		return 0, fmt.Errorf("%w: unexpected end", errBadJSON)
	}
	switch d[i] {
	case '"':
		return skipString(d, i)
	case '{', '[':
		depth := 0
		for ; i < len(d); i++ {
			switch d[i] {
			case '"':
				end, err := skipString(d, i)
				if err != nil {
					return 0, err
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("%w: unterminated object or array", errBadJSON)
	}
	start := i
	for i < len(d) && d[i] != ',' && d[i] != '}' && d[i] != ']' && d[i] != ' ' && d[i] != '\n' && d[i] != '\r' && d[i] != '\t' {
		i++
	}
	if i == start {
		return 0, fmt.Errorf("%w: expected a value at byte %d", errBadJSON, start)
	}
	return i, nil
}

// objectFields returns the raw value of each key of the JSON object d.
func objectFields(d []byte) (map[string]json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	i := skipSpace(d, 0)
	if i >= len(d) || d[i] != '{' {
		return nil, fmt.Errorf("%w: expected an object", errBadJSON)
	}
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == '}' {
		return fields, nil
	}
	for {
		key, next, err := readString(d, i)
		if err != nil {
			return nil, err
		}
		i = skipSpace(d, next)
		if i >= len(d) || d[i] != ':' {
			return nil, fmt.Errorf("%w: expected ':' at byte %d", errBadJSON, i)
		}
		i = skipSpace(d, i+1)
		end, err := skipValue(d, i)
		if err != nil {
			return nil, err
		}
		fields[key] = d[i:end]
		i = skipSpace(d, end)
		if i >= len(d) {
			return nil, fmt.Errorf("%w: unterminated object", errBadJSON)
		}
		if d[i] == '}' {
			return fields, nil
		}
		if d[i] != ',' {
			return nil, fmt.Errorf("%w: expected ',' at byte %d", errBadJSON, i)
		}
		i = skipSpace(d, i+1)
	}
}

// readString decodes the JSON string at d[i].
func readString(d []byte, i int) (string, int, error) {
	if i >= len(d) || d[i] != '"' {
		return "", 0, fmt.Errorf("%w: expected a string at byte %d", errBadJSON, i)
	}
	end, err := skipString(d, i)
	if err != nil {
		return "", 0, err
	}
	raw := d[i+1 : end-1]
	for _, c := range raw {
		if c == '\\' || c < 0x20 {
			var s string
			if err := json.Unmarshal(d[i:end], &s); err != nil {
				return "", 0, fmt.Errorf("%w: %v", errBadJSON, err)
			}
			return s, end, nil
		}
	}
	return string(raw), end, nil
}

// parseVocab reads {"token": id, ...} calling fn for each entry.
func parseVocab(d []byte, fn func(token string, id uint32) error) error {
	i := skipSpace(d, 0)
	if i >= len(d) || d[i] != '{' {
		return fmt.Errorf("vocab: %w: expected an object", errBadJSON)
	}
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == '}' {
		return nil
	}
	for {
		tok, next, err := readString(d, i)
		if err != nil {
			return fmt.Errorf("vocab: %w", err)
		}
		i = skipSpace(d, next)
		if i >= len(d) || d[i] != ':' {
			return fmt.Errorf("vocab: %w: expected ':' at byte %d", errBadJSON, i)
		}
		i = skipSpace(d, i+1)
		end, err := skipValue(d, i)
		if err != nil {
			return fmt.Errorf("vocab: %w", err)
		}
		id, err := strconv.ParseUint(string(d[i:end]), 10, 32)
		if err != nil {
			return fmt.Errorf("vocab: id of %q: %w", tok, err)
		}
		if err := fn(tok, uint32(id)); err != nil {
			return err
		}
		i = skipSpace(d, end)
		if i >= len(d) {
			return fmt.Errorf("vocab: %w: unterminated object", errBadJSON)
		}
		if d[i] == '}' {
			return nil
		}
		if d[i] != ',' {
			return fmt.Errorf("vocab: %w: expected ',' at byte %d", errBadJSON, i)
		}
		i = skipSpace(d, i+1)
	}
}

// parseMergeList reads merges in either format of tokenizer.json: "a b"
// strings (older files) or ["a", "b"] pairs, calling fn for each in rank
// order.
func parseMergeList(d []byte, fn func(left, right string) error) error {
	i := skipSpace(d, 0)
	if i >= len(d) || d[i] != '[' {
		return fmt.Errorf("merges: %w: expected an array", errBadJSON)
	}
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == ']' {
		return nil
	}
	for n := 0; ; n++ {
		if i >= len(d) {
			return fmt.Errorf("merges: %w: unterminated array", errBadJSON)
		}
		var left, right string
		switch d[i] {
		case '"':
			s, next, err := readString(d, i)
			if err != nil {
				return fmt.Errorf("merges: %w", err)
			}
			var ok bool
			left, right, ok = cutSpace(s)
			if !ok {
				return fmt.Errorf("merges: merge %d %q is not two tokens", n, s)
			}
			i = next
		case '[':
			var err error
			i = skipSpace(d, i+1)
			if left, i, err = readString(d, i); err != nil {
				return fmt.Errorf("merges: %w", err)
			}
			i = skipSpace(d, i)
			if i >= len(d) || d[i] != ',' {
				return fmt.Errorf("merges: merge %d is not a pair", n)
			}
			if right, i, err = readString(d, skipSpace(d, i+1)); err != nil {
				return fmt.Errorf("merges: %w", err)
			}
			i = skipSpace(d, i)
			if i >= len(d) || d[i] != ']' {
				return fmt.Errorf("merges: merge %d is not a pair", n)
			}
			i++
		default:
			return fmt.Errorf("merges: %w: unexpected byte %q at %d", errBadJSON, d[i], i)
		}
		if err := fn(left, right); err != nil {
			return err
		}
		i = skipSpace(d, i)
		if i >= len(d) {
			return fmt.Errorf("merges: %w: unterminated array", errBadJSON)
		}
		if d[i] == ']' {
			return nil
		}
		if d[i] != ',' {
			return fmt.Errorf("merges: %w: expected ',' at byte %d", errBadJSON, i)
		}
		i = skipSpace(d, i+1)
	}
}

// cutSpace splits "a b" into its two tokens; there must be exactly one space.
func cutSpace(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			for j := i + 1; j < len(s); j++ {
				if s[j] == ' ' {
					return "", "", false
				}
			}
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}
