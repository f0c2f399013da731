package config

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Source says where a flag's effective value came from.
type Source string

// The sources of a value, weakest first: a value from a stronger source
// replaces one from a weaker.
const (
	SourceDefault Source = "default"
	SourceFile    Source = "file"
	SourceEnv     Source = "env"
	SourceFlag    Source = "flag"
)

// Setting is one flag's effective value and where it came from.
type Setting struct {
	Name string
	// Values are the texts the flag was set with, in order: one for a
	// plain flag, any number for a repeatable one; the default's text when
	// nothing set it.
	Values []string
	Source Source
	// Origin names the source: the file's path, the variable's name, or ""
	// for defaults and the command line.
	Origin string
}

// Sources is what Apply reads besides the command line.
type Sources struct {
	// File is the TOML file ("" for none). A missing file is an error only
	// when Required (the user named it); the default path may be absent.
	File     string
	Required bool
	// Getenv reads the environment (nil reads none).
	Getenv func(string) string
	// NoEnv names flags that no variable sets, because their HEARTH_
	// name already means something else (HEARTH_API_KEY is a client's key,
	// not the server's).
	NoEnv []string
	// Skip names flags that neither the file nor the environment set (the
	// flag naming the file itself).
	Skip []string
}

// EnvName is the variable that sets a flag: HEARTH_ and the flag's name
// in upper case with dashes as underscores (kv-store-dir:
// HEARTH_KV_STORE_DIR).
func EnvName(flagName string) string {
	return "HEARTH_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Repeatable is a flag that may be given more than once, each value
// handed to the function in turn (fs.Var(config.Repeatable(fn), name,
// usage)). The file sets it from an array; Apply and Line list all its
// values. A flag defined with flag.Func keeps only its last value here.
type Repeatable func(string) error

// Set passes one value to the function.
func (r Repeatable) Set(s string) error { return r(s) }

// String is empty: the values live wherever the function puts them, and
// help shows no default, as for flag.Func.
func (Repeatable) String() string { return "" }

// IsRepeatable says that the flag may be given more than once.
func (Repeatable) IsRepeatable() bool { return true }

// TrackValues wraps the flags of fset that flag.Func or Repeatable define
// so that the texts they are set with are kept: such a flag shows nothing
// through String, and a repeatable flag's values are lost once parsed.
// Call it after defining the flags and before parsing; Apply reads what it
// kept. Typed flags are left alone: their String is their value.
func TrackValues(fset *flag.FlagSet) {
	fset.VisitAll(func(f *flag.Flag) {
		if _, ok := f.Value.(trackedValue); ok || getterOf(f) != nil {
			return
		}
		t := &tracker{Value: f.Value}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			f.Value = &boolTracker{t}
			return
		}
		f.Value = t
	})
}

type trackedValue interface {
	flag.Value
	setTexts() []string
	inner() flag.Value
}

type tracker struct {
	flag.Value
	texts []string
}

// String tolerates the zero tracker, which the flag package makes to learn
// whether a default is the type's zero value.
func (t *tracker) String() string {
	if t == nil || t.Value == nil {
		return ""
	}
	return t.Value.String()
}

func (t *tracker) Set(s string) error {
	if err := t.Value.Set(s); err != nil {
		return err
	}
	t.texts = append(t.texts, s)
	return nil
}

func (t *tracker) setTexts() []string { return t.texts }

func (t *tracker) inner() flag.Value { return t.Value }

type boolTracker struct{ *tracker }

func (*boolTracker) IsBoolFlag() bool { return true }

// Apply gives every flag of fset that the command line did not set
// its value from the environment (EnvName) or else from the TOML file,
// whose keys are the flags' names. It returns every flag's Setting, sorted
// by name. A key the flag set does not know is an error naming the key and
// the file, so that a misspelt key is not silently ignored. Call it after
// fset.Parse; with TrackValues before parsing, the settings list the values
// of repeatable and function flags as well.
func Apply(fset *flag.FlagSet, src Sources) ([]Setting, error) {
	skip := map[string]bool{}
	for _, n := range src.Skip {
		skip[n] = true
	}
	noEnv := map[string]bool{}
	for _, n := range src.NoEnv {
		noEnv[n] = true
	}
	file, err := readConfigFile(src.File, src.Required)
	if err != nil {
		return nil, err
	}
	for _, key := range file.order {
		switch {
		case fset.Lookup(key) == nil:
			return nil, fmt.Errorf("%s: unknown key %q: hearth up has no --%s flag", src.File, key, key)
		case skip[key]:
			return nil, fmt.Errorf("%s: unknown key %q: --%s is only for the command line", src.File, key, key)
		}
	}
	onCommandLine := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })

	var settings []Setting
	var firstErr error
	fset.VisitAll(func(f *flag.Flag) {
		if skip[f.Name] || firstErr != nil {
			return
		}
		s := Setting{Name: f.Name, Source: SourceDefault}
		env := ""
		if src.Getenv != nil && !noEnv[f.Name] {
			env = src.Getenv(EnvName(f.Name))
		}
		raw, inFile := file.values[f.Name]
		if inFile && raw == "" && getterOf(f) == nil {
			// A function flag takes no empty value; "" is the template's
			// placeholder for "no value", as an empty variable is.
			inFile = false
		}
		switch {
		case onCommandLine[f.Name]:
			s.Source = SourceFlag
		case env != "":
			s.Source, s.Origin = SourceEnv, EnvName(f.Name)
			if err := f.Value.Set(env); err != nil {
				firstErr = fmt.Errorf("$%s: %w", EnvName(f.Name), err)
				return
			}
		case inFile:
			s.Source, s.Origin = SourceFile, src.File
			texts, err := tomlTexts(f, raw)
			if err == nil {
				for _, t := range texts {
					if err = f.Value.Set(t); err != nil {
						break
					}
				}
			}
			if err != nil {
				firstErr = fmt.Errorf("%s: %s: %w", src.File, f.Name, err)
				return
			}
		}
		s.Values = effectiveTexts(f)
		settings = append(settings, s)
	})
	if firstErr != nil {
		return nil, firstErr
	}
	sort.Slice(settings, func(i, j int) bool { return settings[i].Name < settings[j].Name })
	return settings, nil
}

// effectiveTexts is what a flag holds now: a typed flag's String; the
// texts a function flag was set with, when TrackValues kept them; else its
// default.
func effectiveTexts(f *flag.Flag) []string {
	if getterOf(f) != nil {
		return []string{f.Value.String()}
	}
	if t, ok := f.Value.(trackedValue); ok {
		if texts := t.setTexts(); len(texts) > 0 {
			if repeatable(f) {
				return slices.Clone(texts)
			}
			return texts[len(texts)-1:]
		}
	}
	if f.DefValue == "" {
		return nil
	}
	return []string{f.DefValue}
}

type configFile struct {
	values map[string]any
	order  []string // keys in the file's order, for the first unknown one
}

func readConfigFile(path string, required bool) (configFile, error) {
	out := configFile{values: map[string]any{}}
	if path == "" {
		return out, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !required {
			return out, nil
		}
		return out, fmt.Errorf("config: %w", err)
	}
	md, err := toml.Decode(string(data), &out.values)
	if err != nil {
		return out, fmt.Errorf("%s: %w", path, err)
	}
	for _, k := range md.Keys() {
		if len(k) == 1 {
			out.order = append(out.order, k[0])
		}
	}
	return out, nil
}

// tomlTexts turns a file's value into the texts the flag is set with: an
// array sets a repeatable flag once per element; scalars are formatted as
// the flag package parses them.
func tomlTexts(f *flag.Flag, v any) ([]string, error) {
	if arr, ok := v.([]any); ok {
		if !repeatable(f) {
			return nil, errors.New("an array is only for a repeatable flag")
		}
		out := make([]string, 0, len(arr))
		for _, e := range arr {
			s, err := tomlScalar(e)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	s, err := tomlScalar(v)
	if err != nil {
		return nil, err
	}
	return []string{s}, nil
}

func tomlScalar(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	}
	return "", fmt.Errorf("want a string, number or boolean, got %T", v)
}

// repeatable reports whether a flag may be given more than once: its value
// says so (Repeatable), under TrackValues' wrapper or not.
func repeatable(f *flag.Flag) bool {
	v := f.Value
	if t, ok := v.(trackedValue); ok {
		v = t.inner()
	}
	r, ok := v.(interface{ IsRepeatable() bool })
	return ok && r.IsRepeatable()
}

// getterOf is the flag's typed value, or nil for flags defined with
// flag.Func, whose type the flag package does not know.
func getterOf(f *flag.Flag) flag.Getter {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return nil
	}
	switch g.Get().(type) {
	case bool, int, int64, uint, uint64, float64, string, time.Duration:
		return g
	}
	return nil
}

// Template writes the commented configuration file of a flag set:
// every flag (but those in skip) as a key, its usage as a comment, its
// default commented out. Values set a flag in the file instead (texts as
// on the command line; several for a repeatable flag). Being generated
// from the flag set itself, the file cannot drift from the flags.
func Template(fset *flag.FlagSet, values map[string][]string, skip ...string) ([]byte, error) {
	var b strings.Builder
	b.WriteString(configHeader)
	var err error
	fset.VisitAll(func(f *flag.Flag) {
		if slices.Contains(skip, f.Name) || err != nil {
			return
		}
		b.WriteString("\n")
		for _, line := range wrapWords(f.Usage, 76) {
			b.WriteString("# " + line + "\n")
		}
		if texts, ok := values[f.Name]; ok {
			var lit string
			if lit, err = tomlLiteral(f, texts); err != nil {
				err = fmt.Errorf("config template: %s: %w", f.Name, err)
				return
			}
			fmt.Fprintf(&b, "%s = %s\n", f.Name, lit)
			return
		}
		var def []string
		if f.DefValue != "" {
			def = []string{f.DefValue}
		}
		lit, lerr := tomlLiteral(f, def)
		if lerr != nil {
			err = fmt.Errorf("config template: %s: %w", f.Name, lerr)
			return
		}
		fmt.Fprintf(&b, "# %s = %s\n", f.Name, lit)
	})
	if err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

const configHeader = `# Hearth's configuration: each key is a flag of "hearth up".
#
# A flag on the command line wins over a HEARTH_* variable, which wins over
# this file (the variable of kv-store-dir is HEARTH_KV_STORE_DIR).
# "hearth config" prints the value each flag ends up with and where it came
# from. A commented key shows the default; remove the # to change it. A key
# hearth up does not know is an error.
`

// tomlLiteral writes a flag's value as TOML: numbers and booleans bare for
// typed flags, an array for a repeatable one, a string otherwise
// (durations such as "30s" included).
func tomlLiteral(f *flag.Flag, texts []string) (string, error) {
	if repeatable(f) {
		quoted := make([]string, len(texts))
		for i, t := range texts {
			quoted[i] = tomlString(t)
		}
		return "[" + strings.Join(quoted, ", ") + "]", nil
	}
	text := ""
	if len(texts) > 0 {
		text = texts[len(texts)-1]
	}
	g := getterOf(f)
	if g == nil {
		return tomlString(text), nil
	}
	switch g.Get().(type) {
	case bool:
		v, err := strconv.ParseBool(text)
		return strconv.FormatBool(v), err
	case int, int64, uint, uint64:
		if _, err := strconv.ParseFloat(text, 64); err != nil {
			return "", err
		}
		return text, nil
	case float64:
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return "", err
		}
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0" // a TOML float, though an integer also parses
		}
		return s, nil
	}
	return tomlString(text), nil
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// wrapWords breaks text into lines of at most width bytes at spaces (a
// longer word gets a line of its own).
func wrapWords(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// Line writes one key of the configuration file: the flag's name and
// values as a TOML assignment, `listen = "127.0.0.1:8000"`.
func Line(f *flag.Flag, values []string) (string, error) {
	lit, err := tomlLiteral(f, values)
	if err != nil {
		return "", fmt.Errorf("%s: %w", f.Name, err)
	}
	return f.Name + " = " + lit, nil
}
