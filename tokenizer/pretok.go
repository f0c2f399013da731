package tokenizer

import (
	"encoding/json"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// preTokenizer splits a normalized segment (text between added tokens) into
// the words that BPE merges independently.
type preTokenizer interface {
	// split calls fn with the byte range of each word of s, in order. peek
	// is one past the last byte of s that decided where the word ends, or -1
	// when the splitter cannot tell (then no safe cut is known inside s).
	split(s string, fn func(start, end, peek int))
}

// The pre-tokenizer regexes of the Qwen2/Qwen3 and Llama 3 families. They
// differ only in how many digits make one word.
const (
	qwen2Pattern  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// gpt2Pattern is what a ByteLevel pre-tokenizer with use_regex splits on.
	gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

type preTokenizerJSON struct {
	Type          string            `json:"type"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Pattern       struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior       string `json:"behavior"`
	Invert         bool   `json:"invert"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
	// IndividualDigits is the Digits pre-tokenizer's: each digit a word
	// of its own, else each run of digits one word.
	IndividualDigits bool `json:"individual_digits"`
}

// parsePreTokenizer accepts what byte-level BPE models use: a ByteLevel
// pre-tokenizer, alone or after Split stages with Isolated behaviour and
// Digits stages (which isolate digits as Split does: Hugging Face's Digits
// splits on char::is_numeric, the categories of \p{N}). A
// known regex gets the hand-written scanner; any other runs through regexp2,
// which backtracks with lookaround as Hugging Face's Oniguruma does.
func parsePreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	if isNull(raw) {
		return nil, fmt.Errorf("%w: no pre-tokenizer (byte-level BPE needs ByteLevel)", ErrUnsupported)
	}
	var p preTokenizerJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("tokenizer: parse pre_tokenizer: %w", err)
	}
	stages := []json.RawMessage{raw}
	if p.Type == "Sequence" {
		stages = p.Pretokenizers
	}
	var patterns []string
	sawByteLevel := false
	for i, stageRaw := range stages {
		var s preTokenizerJSON
		if err := json.Unmarshal(stageRaw, &s); err != nil {
			return nil, fmt.Errorf("tokenizer: parse pre_tokenizer: %w", err)
		}
		switch s.Type {
		case "Split":
			if sawByteLevel {
				return nil, fmt.Errorf("%w: Split after ByteLevel", ErrUnsupported)
			}
			if s.Behavior != "Isolated" || s.Invert {
				return nil, fmt.Errorf("%w: Split behavior %q invert=%v", ErrUnsupported, s.Behavior, s.Invert)
			}
			switch {
			case s.Pattern.Regex != nil:
				patterns = append(patterns, *s.Pattern.Regex)
			case s.Pattern.String != nil:
				patterns = append(patterns, regexp2.Escape(*s.Pattern.String))
			default:
				return nil, fmt.Errorf("%w: Split without a pattern", ErrUnsupported)
			}
		case "Digits":
			if sawByteLevel {
				return nil, fmt.Errorf("%w: Digits after ByteLevel", ErrUnsupported)
			}
			if s.IndividualDigits {
				patterns = append(patterns, `\p{N}`)
			} else {
				patterns = append(patterns, `\p{N}+`)
			}
		case "ByteLevel":
			if i != len(stages)-1 {
				return nil, fmt.Errorf("%w: ByteLevel is not the last pre-tokenizer", ErrUnsupported)
			}
			if s.AddPrefixSpace {
				return nil, fmt.Errorf("%w: ByteLevel add_prefix_space", ErrUnsupported)
			}
			if s.UseRegex == nil || *s.UseRegex {
				patterns = append(patterns, gpt2Pattern)
			}
			sawByteLevel = true
		default:
			return nil, fmt.Errorf("%w: pre-tokenizer %q", ErrUnsupported, s.Type)
		}
	}
	if !sawByteLevel {
		return nil, fmt.Errorf("%w: pre-tokenizer has no ByteLevel stage", ErrUnsupported)
	}
	if len(patterns) == 1 {
		switch patterns[0] {
		case qwen2Pattern:
			return scanner{maxDigits: 1}, nil
		case llama3Pattern:
			return scanner{maxDigits: 3}, nil
		}
	}
	if len(patterns) == 0 {
		return nil, fmt.Errorf("%w: pre-tokenizer that does not split", ErrUnsupported)
	}
	var r regexSplitter
	for _, pat := range patterns {
		re, err := regexp2.Compile(pat, regexp2.None)
		if err != nil {
			return nil, fmt.Errorf("%w: pre-tokenizer regex %q: %v", ErrUnsupported, pat, err)
		}
		r.stages = append(r.stages, re)
	}
	return r, nil
}

// regexSplitter applies Split stages in sequence, each to every piece the
// previous one produced; text no match covers stays a piece of its own.
type regexSplitter struct {
	stages []*regexp2.Regexp
}

func (r regexSplitter) split(s string, fn func(start, end, peek int)) {
	r.splitStage(0, s, 0, fn)
}

func (r regexSplitter) splitStage(stage int, s string, base int, fn func(start, end, peek int)) {
	if stage == len(r.stages) {
		fn(base, base+len(s), -1)
		return
	}
	emit := func(a, b int) {
		if b > a {
			r.splitStage(stage+1, s[a:b], base+a, fn)
		}
	}
	runes := []rune(s)
	// byteAt[i] is the byte offset of rune i.
	byteAt := make([]int, len(runes)+1)
	off := 0
	for i, c := range runes {
		byteAt[i] = off
		off += utf8.RuneLen(c)
	}
	byteAt[len(runes)] = off
	last := 0
	m, err := r.stages[stage].FindRunesMatch(runes)
	for err == nil && m != nil {
		a, b := byteAt[m.Index], byteAt[m.Index+m.Length]
		emit(last, a)
		emit(a, b)
		last = b
		m, err = r.stages[stage].FindNextMatch(m)
	}
	emit(last, len(s))
}

// scanner is a hand-written equivalent of qwen2Pattern (maxDigits 1) and
// llama3Pattern (maxDigits 3), several times faster than regexp2. The fuzz
// test FuzzScannerMatchesRegexp holds it equal to regexp2.
type scanner struct {
	maxDigits int
}

// class of an ASCII byte, for the fast path.
const (
	clsOther = iota
	clsLetter
	clsDigit
	clsSpace   // whitespace other than \r \n
	clsNewline // \r or \n
)

var asciiClass = func() (t [128]uint8) {
	for c := 0; c < 128; c++ {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			t[c] = clsLetter
		case c >= '0' && c <= '9':
			t[c] = clsDigit
		case c == '\r' || c == '\n':
			t[c] = clsNewline
		case c == ' ', c == '\t', c == '\v', c == '\f':
			t[c] = clsSpace
		}
	}
	return t
}()

// classAt returns the class of the rune at s[i] and its width.
func classAt(s string, i int) (uint8, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	switch {
	case unicode.IsLetter(r):
		return clsLetter, w
	case unicode.IsNumber(r):
		return clsDigit, w
	case unicode.IsSpace(r):
		return clsSpace, w
	}
	return clsOther, w
}

func isContractionLetter(c byte) bool {
	switch c | 0x20 {
	case 's', 't', 'm', 'd':
		return true
	}
	return false
}

func (sc scanner) split(s string, fn func(start, end, peek int)) {
	for i := 0; i < len(s); {
		end, peek := sc.next(s, i)
		fn(i, end, peek)
		i = end
	}
}

// next returns the end of the word starting at s[i] and one past the last
// byte looked at to decide it. The alternatives are tried in the regex's
// order; the first that matches wins.
func (sc scanner) next(s string, i int) (end, peek int) {
	n := len(s)
	// peekTo marks the rune starting at j as examined.
	peekTo := func(j int) int {
		if j >= n {
			return n + 1 // saw the end of the segment
		}
		_, w := utf8.DecodeRuneInString(s[j:])
		return j + w
	}
	c0, w0 := classAt(s, i)

	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if s[i] == '\'' && i+1 < n {
		c1 := s[i+1] | 0x20
		if isContractionLetter(s[i+1]) {
			return i + 2, i + 2
		}
		if i+2 < n {
			c2 := s[i+2] | 0x20
			if (c1 == 'r' || c1 == 'v') && c2 == 'e' || c1 == 'l' && c2 == 'l' {
				return i + 3, i + 3
			}
		}
	}

	// [^\r\n\p{L}\p{N}]?\p{L}+
	j := i
	if c0 != clsLetter && c0 != clsDigit && c0 != clsNewline && i+w0 < n {
		if c1, _ := classAt(s, i+w0); c1 == clsLetter {
			j = i + w0
		}
	}
	if c, _ := classAt(s, j); c == clsLetter {
		for j < n {
			c, w := classAt(s, j)
			if c != clsLetter {
				break
			}
			j += w
		}
		return j, peekTo(j)
	}

	// \p{N} or \p{N}{1,3}
	if c0 == clsDigit {
		j = i + w0
		for k := 1; k < sc.maxDigits && j < n; k++ {
			c, w := classAt(s, j)
			if c != clsDigit {
				break
			}
			j += w
		}
		if sc.maxDigits == 1 {
			return j, j
		}
		return j, peekTo(j)
	}

	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	j = i
	if s[i] == ' ' && i+1 < n {
		if c1, _ := classAt(s, i+1); c1 == clsOther {
			j = i + 1
		}
	}
	if c, _ := classAt(s, j); c == clsOther {
		for j < n {
			c, w := classAt(s, j)
			if c != clsOther {
				break
			}
			j += w
		}
		for j < n && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j, peekTo(j)
	}

	// The rest start with whitespace. Find the whitespace run and the last
	// line break in it.
	runEnd, lastBreak := i, -1
	for runEnd < n {
		c, w := classAt(s, runEnd)
		if c != clsSpace && c != clsNewline {
			break
		}
		if c == clsNewline {
			lastBreak = runEnd
		}
		runEnd += w
	}
	peek = peekTo(runEnd)
	// \s*[\r\n]+
	if lastBreak >= 0 {
		return lastBreak + 1, peek
	}
	// \s+(?!\S): the whole run at the end of text, else all but its last rune
	if runEnd >= n {
		return runEnd, peek
	}
	_, lastW := utf8.DecodeLastRuneInString(s[i:runEnd])
	if runEnd-lastW > i {
		return runEnd - lastW, peek
	}
	// \s+
	return runEnd, peek
}
