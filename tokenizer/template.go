package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"

	"github.com/hearth-llm/hearth/clock"
)

// ErrNoChatTemplate is returned when a chat is rendered with a model whose
// tokenizer_config.json has no chat template.
var ErrNoChatTemplate = errors.New("tokenizer: model has no chat template")

// ErrTemplate wraps errors raised while rendering a chat template, including
// the template's own raise_exception calls (a client's bad conversation).
var ErrTemplate = errors.New("chat template")

// chatTemplate is a parsed Jinja chat template, rendered with the
// environment Hugging Face transformers gives it.
type chatTemplate struct {
	tmpl       *exec.Template
	qwen3      bool              // source is Qwen3's template: render it with renderQwen3
	toolBlocks toolBlocks        // for renderQwen3
	special    map[string]string // bos_token, eos_token, ... as strings
	clock      clock.Clock       // strftime_now's time
}

func newChatTemplate(source string, special map[string]string) (*chatTemplate, error) {
	cfg := config.New()
	// transformers renders with trim_blocks and lstrip_blocks on.
	cfg.TrimBlocks = true
	cfg.LeftStripBlocks = true

	filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	if err := filters.Replace("tojson", filterToJSON); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t := &chatTemplate{special: special, clock: clock.Real{}, qwen3: isQwen3Template(source)}
	globals := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	globals.Set("raise_exception", raiseException)
	globals.Set("strftime_now", func(_ *exec.Evaluator, params *exec.VarArgs) (string, error) {
		if len(params.Args) != 1 || !params.Args[0].IsString() {
			return "", errors.New("strftime_now takes one format string")
		}
		return strftime(t.clock.Now(), params.Args[0].String()), nil
	})
	env := &exec.Environment{
		Context:           globals,
		Filters:           filters,
		Tests:             builtins.Tests,
		ControlStructures: builtins.ControlStructures,
		Methods:           templateMethods(),
	}
	const name = "/chat_template"
	loader, err := loaders.NewMemoryLoader(map[string]string{name: source})
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t.tmpl, err = exec.NewTemplate(name, cfg, loader, env)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: parse chat template: %w", err)
	}
	return t, nil
}

func raiseException(_ *exec.Evaluator, params *exec.VarArgs) (string, error) {
	msg := "raise_exception called"
	if len(params.Args) > 0 {
		msg = params.Args[0].String()
	}
	return "", errors.New(msg)
}

func (t *chatTemplate) render(req ChatRequest) (string, error) {
	messages, err := parseOrderedJSON(req.Messages)
	if err != nil {
		return "", fmt.Errorf("tokenizer: messages: %w", err)
	}
	if _, ok := messages.(pyList); !ok {
		return "", fmt.Errorf("tokenizer: messages is not a JSON array")
	}
	if t.qwen3 {
		if block, ok := t.toolBlocks.get(req.Tools); ok {
			if out, ok := renderQwen3(messages.(pyList), block, req.AddGenerationPrompt, req.Kwargs); ok {
				return out, nil
			}
		}
	}
	var tools any
	if !isNull(req.Tools) {
		if tools, err = parseOrderedJSON(req.Tools); err != nil {
			return "", fmt.Errorf("tokenizer: tools: %w", err)
		}
	}
	return t.renderJinja(messages, tools, req)
}

// renderJinja renders through gonja.
func (t *chatTemplate) renderJinja(messages, tools any, req ChatRequest) (string, error) {
	data := make(map[string]any, len(req.Kwargs)+8)
	for k, v := range t.special {
		data[k] = v
	}
	// Kwargs are decoded from JSON by callers, so objects in them are maps:
	// turn them into ordered values through a JSON round trip.
	for k, v := range req.Kwargs {
		data[k] = orderedKwarg(v)
	}
	data["messages"] = messages
	data["tools"] = tools
	data["add_generation_prompt"] = req.AddGenerationPrompt
	out, err := t.tmpl.ExecuteToString(exec.NewContext(data))
	if err != nil {
		return "", fmt.Errorf("tokenizer: %w: %w", ErrTemplate, err)
	}
	return out, nil
}

func orderedKwarg(v any) any {
	switch v.(type) {
	case map[string]any, []any:
		raw, err := json.Marshal(v)
		if err != nil {
			return v
		}
		if o, err := parseOrderedJSON(raw); err == nil {
			return o
		}
	case json.RawMessage:
		if o, err := parseOrderedJSON(v.(json.RawMessage)); err == nil {
			return o
		}
	}
	return v
}

// ApplyChatTemplate renders req with the model's chat template, as
// transformers' apply_chat_template(tokenize=False) does.
func (m *Model) ApplyChatTemplate(req ChatRequest) (string, error) {
	if m.template == nil {
		return "", ErrNoChatTemplate
	}
	return m.template.render(req)
}

// EncodeChat renders req and tokenizes the result.
func (m *Model) EncodeChat(req ChatRequest) (rendered string, ids []uint32, err error) {
	rendered, err = m.ApplyChatTemplate(req)
	if err != nil {
		return "", nil, err
	}
	return rendered, m.Encode(rendered), nil
}

// filterToJSON is transformers' tojson: json.dumps with ensure_ascii=False,
// separators ", " and ": " (or "," with indent), key order kept.
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	indent := -1
	if v, ok := params.KwArgs["indent"]; ok && !v.IsNil() {
		if !v.IsInteger() {
			return exec.AsValue(errors.New("tojson: indent must be an integer"))
		}
		indent = v.Integer()
	}
	var b strings.Builder
	if err := writePyJSON(&b, in.Interface(), indent, 0); err != nil {
		return exec.AsValue(err)
	}
	return exec.AsSafeValue(b.String())
}

func writePyJSON(b *strings.Builder, v any, indent, depth int) error {
	newline := func(d int) {
		if indent >= 0 {
			b.WriteByte('\n')
			b.WriteString(strings.Repeat(" ", indent*d))
		}
	}
	itemSep := ", "
	if indent >= 0 {
		itemSep = ","
	}
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if t {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		writePyString(b, t)
	case int:
		b.WriteString(strconv.Itoa(t))
	case int64:
		b.WriteString(strconv.FormatInt(t, 10))
	case float64:
		b.WriteString(pyFloatRepr(t))
	case *exec.Value:
		return writePyJSON(b, t.Interface(), indent, depth)
	case *exec.Dict:
		if len(t.Pairs) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteByte('{')
		for i, p := range t.Pairs {
			if i > 0 {
				b.WriteString(itemSep)
			}
			newline(depth + 1)
			writePyString(b, p.Key.String())
			b.WriteString(": ")
			if err := writePyJSON(b, p.Value.Interface(), indent, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte('}')
	case exec.Dict:
		return writePyJSON(b, &t, indent, depth)
	case []any:
		return writePyJSON(b, pyList(t), indent, depth)
	case []string:
		l := make(pyList, len(t))
		for i, s := range t {
			l[i] = s
		}
		return writePyJSON(b, l, indent, depth)
	case pyList:
		if len(t) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteString(itemSep)
			}
			newline(depth + 1)
			if err := writePyJSON(b, e, indent, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte(']')
	case map[string]any:
		// A dict made inside the template: gonja does not keep its order,
		// so write it sorted to stay deterministic.
		d := exec.NewDict()
		for _, k := range exec.AsValue(t).Keys() {
			d.Pairs = append(d.Pairs, &exec.Pair{Key: k, Value: exec.AsValue(t[k.String()])})
		}
		return writePyJSON(b, d, indent, depth)
	default:
		return fmt.Errorf("tojson: cannot serialise %T", v)
	}
	return nil
}

// writePyString writes s as Python's json.dumps(ensure_ascii=False) does.
func writePyString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, w := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && w == 1 {
				b.WriteString(`\ufffd`)
			} else {
				b.WriteString(s[i : i+w])
			}
			i += w
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xF])
			} else {
				b.WriteByte(c)
			}
		}
		i++
	}
	b.WriteByte('"')
}

// pyFloatRepr formats f as Python's repr(float): the shortest round-trip
// digits, always with a fraction or exponent.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	// Python switches to exponent notation below 1e-4 and from 1e16.
	digits := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(digits, "e")
	e, _ := strconv.Atoi(expStr)
	if e < -4 || e >= 16 {
		sign := "+"
		if e < 0 {
			sign = "-"
			e = -e
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, e)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// strftime formats t with the C strftime directives templates use.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			b.WriteByte(format[i])
			continue
		}
		i++
		switch format[i] {
		case 'Y':
			fmt.Fprintf(&b, "%04d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&b, "%02d", (t.Hour()+11)%12+1)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'B':
			b.WriteString(t.Month().String())
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'Z':
			name, _ := t.Zone()
			b.WriteString(name)
		case 'z':
			b.WriteString(t.Format("-0700"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
