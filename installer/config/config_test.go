package config

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// testFlags is a flag set shaped like hearth up's: every kind of flag it
// has, repeatable function flags included.
type testFlags struct {
	fs      *flag.FlagSet
	listen  *string
	kvbm    *string
	workers *int
	size    *float64
	keep    *bool
	stop    *time.Duration
	aliases []string
	tools   string
}

func newTestFlags() *testFlags {
	t := &testFlags{fs: flag.NewFlagSet("up", flag.ContinueOnError)}
	t.fs.SetOutput(io.Discard)
	t.listen = t.fs.String("listen", "127.0.0.1:8000", "address of the API")
	t.kvbm = t.fs.String("kvbm", "ram+ssd", "KV tiers below the GPU: off, ram or ram+ssd")
	t.workers = t.fs.Int("tp", 1, "GPUs per engine")
	t.size = t.fs.Float64("kv-offloading-size", 32, "host RAM per engine in GiB")
	t.keep = t.fs.Bool("keep-engines", false, "leave engine containers running when the daemon stops, so that the next start adopts them without reloading their weights")
	t.stop = t.fs.Duration("stop-timeout", 30*time.Second, "how long a stopping engine may take")
	t.fs.Var(Repeatable(func(s string) error {
		t.aliases = append(t.aliases, s)
		return nil
	}), "alias", `map a name to the served model, NAME=MODEL (repeatable; default "*")`)
	t.fs.Func("sim-tool-calls", "tool calls per task, N or N-M", func(s string) error {
		t.tools = s
		return nil
	})
	t.fs.String("config", "", "the configuration file")
	TrackValues(t.fs)
	return t
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func settingOf(t *testing.T, settings []Setting, name string) Setting {
	t.Helper()
	for _, s := range settings {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no setting %q in %v", name, settings)
	return Setting{}
}

func TestApplyConfigPrecedence(t *testing.T) {
	file := `
listen = "0.0.0.0:9000"
kvbm = "ram"
tp = 2
kv-offloading-size = 8
keep-engines = true
stop-timeout = "1m"
alias = ["claude-*=qwen3-8b", "gpt-*=qwen3-8b"]
sim-tool-calls = ""
`
	cases := []struct {
		name       string
		args       []string
		env        map[string]string
		noFile     bool
		flag       string
		want       []string
		wantSource Source
		wantOrigin string
	}{
		{"default without file", nil, nil, true, "listen", []string{"127.0.0.1:8000"}, SourceDefault, ""},
		{"file over default", nil, nil, false, "listen", []string{"0.0.0.0:9000"}, SourceFile, "FILE"},
		{"env over file", nil, map[string]string{"HEARTH_LISTEN": "127.0.0.1:7000"}, false, "listen", []string{"127.0.0.1:7000"}, SourceEnv, "HEARTH_LISTEN"},
		{"flag over env", []string{"--listen", "127.0.0.1:6000"}, map[string]string{"HEARTH_LISTEN": "127.0.0.1:7000"}, false, "listen", []string{"127.0.0.1:6000"}, SourceFlag, ""},
		{"dashes become underscores", nil, map[string]string{"HEARTH_KV_OFFLOADING_SIZE": "4"}, false, "kv-offloading-size", []string{"4"}, SourceEnv, "HEARTH_KV_OFFLOADING_SIZE"},
		{"an integer sets a float", nil, nil, false, "kv-offloading-size", []string{"8"}, SourceFile, "FILE"},
		{"a bool", nil, nil, false, "keep-engines", []string{"true"}, SourceFile, "FILE"},
		{"a duration", nil, nil, false, "stop-timeout", []string{"1m0s"}, SourceFile, "FILE"},
		{"an int", nil, nil, false, "tp", []string{"2"}, SourceFile, "FILE"},
		{"a repeatable flag from an array", nil, nil, false, "alias", []string{"claude-*=qwen3-8b", "gpt-*=qwen3-8b"}, SourceFile, "FILE"},
		{"the command line replaces the file's array", []string{"--alias", "a=b"}, nil, false, "alias", []string{"a=b"}, SourceFlag, ""},
		{"an empty variable is unset", nil, map[string]string{"HEARTH_KVBM": ""}, false, "kvbm", []string{"ram"}, SourceFile, "FILE"},
		{"a flag without a variable", nil, map[string]string{"HEARTH_ALIAS": "x=y"}, false, "alias", []string{"claude-*=qwen3-8b", "gpt-*=qwen3-8b"}, SourceFile, "FILE"},
		{"a function flag from the environment", nil, map[string]string{"HEARTH_SIM_TOOL_CALLS": "2-4"}, false, "sim-tool-calls", []string{"2-4"}, SourceEnv, "HEARTH_SIM_TOOL_CALLS"},
		{"a function flag unset", nil, nil, false, "sim-tool-calls", nil, SourceDefault, ""},
		{"an empty function flag in the file is unset", nil, nil, false, "sim-tool-calls", nil, SourceDefault, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFlags()
			path := writeFile(t, "hearth.toml", file)
			if tc.noFile {
				path = filepath.Join(t.TempDir(), "absent.toml")
			}
			if err := f.fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			settings, err := Apply(f.fs, Sources{File: path, Getenv: envOf(tc.env), NoEnv: []string{"alias"}, Skip: []string{"config"}})
			if err != nil {
				t.Fatal(err)
			}
			s := settingOf(t, settings, tc.flag)
			if !reflect.DeepEqual(s.Values, tc.want) || s.Source != tc.wantSource {
				t.Errorf("%s = %q from %s, want %q from %s", tc.flag, s.Values, s.Source, tc.want, tc.wantSource)
			}
			origin := strings.ReplaceAll(tc.wantOrigin, "FILE", path)
			if s.Origin != origin {
				t.Errorf("origin %q, want %q", s.Origin, origin)
			}
			if _, ok := findSetting(settings, "config"); ok {
				t.Error("the skipped flag config has a setting")
			}
		})
	}
	// The values reach the variables the flags were defined with.
	f := newTestFlags()
	path := writeFile(t, "hearth.toml", file)
	f.fs.Parse(nil)
	if _, err := Apply(f.fs, Sources{File: path, Getenv: envOf(map[string]string{"HEARTH_TP": "4"})}); err != nil {
		t.Fatal(err)
	}
	if *f.listen != "0.0.0.0:9000" || *f.kvbm != "ram" || *f.workers != 4 || *f.size != 8 || !*f.keep || *f.stop != time.Minute || len(f.aliases) != 2 {
		t.Errorf("flags hold listen %q kvbm %q tp %d size %v keep %v stop %v aliases %q",
			*f.listen, *f.kvbm, *f.workers, *f.size, *f.keep, *f.stop, f.aliases)
	}
}

func findSetting(settings []Setting, name string) (Setting, bool) {
	for _, s := range settings {
		if s.Name == name {
			return s, true
		}
	}
	return Setting{}, false
}

func TestApplyConfigErrors(t *testing.T) {
	cases := []struct {
		name, file string
		required   bool
		env        map[string]string
		want       []string // every one in the error
	}{
		{"unknown key", "listen = \"x:1\"\nlisten-addr = \"x:2\"\n", false, nil, []string{`unknown key "listen-addr"`, "hearth.toml"}},
		{"the skipped flag is not a key", `config = "/etc/other.toml"`, false, nil, []string{`unknown key "config"`}},
		{"a table", "[listen]\nx = 1\n", false, nil, []string{"listen"}},
		{"bad syntax", `listen = `, false, nil, []string{"hearth.toml"}},
		{"an array for a plain flag", `kvbm = ["ram"]`, false, nil, []string{"kvbm", "repeatable"}},
		{"a value the flag refuses", `tp = "two"`, false, nil, []string{"tp", "hearth.toml"}},
		{"a variable the flag refuses", ``, false, map[string]string{"HEARTH_TP": "two"}, []string{"$HEARTH_TP"}},
		{"a named file that is missing", "", true, nil, []string{"no such file"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFlags()
			f.fs.Parse(nil)
			path := writeFile(t, "hearth.toml", tc.file)
			if tc.required {
				path += ".absent"
			}
			_, err := Apply(f.fs, Sources{File: path, Required: tc.required, Getenv: envOf(tc.env), Skip: []string{"config"}})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TrackValues must not change what --help prints.
func TestTrackValuesKeepsHelp(t *testing.T) {
	help := func(track bool) string {
		fs := flag.NewFlagSet("up", flag.ContinueOnError)
		fs.Int("tp", 1, "GPUs per engine")
		fs.Bool("v", false, "debug")
		fs.Var(Repeatable(func(string) error { return nil }), "alias", "an alias (repeatable)")
		fs.BoolFunc("quiet", "say less", func(string) error { return nil })
		if track {
			TrackValues(fs)
		}
		var b bytes.Buffer
		fs.SetOutput(&b)
		fs.PrintDefaults()
		return b.String()
	}
	if plain, tracked := help(false), help(true); plain != tracked {
		t.Errorf("help changed:\n%s\nwant\n%s", tracked, plain)
	}
	// A tracked boolean function flag still takes no value.
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	quiet := false
	fs.BoolFunc("quiet", "say less", func(string) error { quiet = true; return nil })
	TrackValues(fs)
	if err := fs.Parse([]string{"--quiet", "rest"}); err != nil || !quiet || fs.NArg() != 1 {
		t.Errorf("--quiet rest: err %v, quiet %v, args %q", err, quiet, fs.Args())
	}
}

func TestConfigTemplateGolden(t *testing.T) {
	f := newTestFlags()
	got, err := Template(f.fs, map[string][]string{"keep-engines": {"true"}, "alias": {`say "hi"=m`}}, "config")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "hearth.toml.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("template differs from %s (go test ./installer -run Golden -update):\n%s", golden, got)
	}
}

// Uncommenting every default of the template sets every flag to its
// default, from the file: the template is valid TOML that ApplyConfig
// reads back, and it lists every flag.
func TestConfigTemplateRoundTrip(t *testing.T) {
	f := newTestFlags()
	text, err := Template(f.fs, map[string][]string{"alias": {"a=b", "c=d"}}, "config")
	if err != nil {
		t.Fatal(err)
	}
	var uncommented strings.Builder
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, "# ") && strings.Contains(line, " = ") {
			line = strings.TrimPrefix(line, "# ")
		}
		uncommented.WriteString(line + "\n")
	}
	path := writeFile(t, "hearth.toml", uncommented.String())
	g := newTestFlags()
	g.fs.Parse(nil)
	settings, err := Apply(g.fs, Sources{File: path, Skip: []string{"config"}})
	if err != nil {
		t.Fatalf("%v\n%s", err, uncommented.String())
	}
	for _, s := range settings {
		// A function flag without a default is written `= ""`, which
		// leaves it unset.
		if s.Source != SourceFile && s.Name != "sim-tool-calls" {
			t.Errorf("%s: source %s, want file: the template lacks it", s.Name, s.Source)
		}
	}
	if *g.listen != "127.0.0.1:8000" || *g.size != 32 || *g.stop != 30*time.Second || !reflect.DeepEqual(g.aliases, []string{"a=b", "c=d"}) {
		t.Errorf("read back listen %q size %v stop %v aliases %q", *g.listen, *g.size, *g.stop, g.aliases)
	}
}

func FuzzApply(f *testing.F) {
	f.Add("listen = \"127.0.0.1:1\"\nalias = [\"a=b\"]\n")
	f.Add("tp = 3\nkeep-engines = true\nstop-timeout = \"5s\"\n")
	f.Add("[x]\ny = 1")
	// One file, rewritten by each input: a directory per input makes the
	// fuzzer spend its time creating and removing them.
	path := filepath.Join(f.TempDir(), "hearth.toml")
	f.Fuzz(func(t *testing.T, text string) {
		flags := newTestFlags()
		flags.fs.Parse(nil)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		settings, err := Apply(flags.fs, Sources{File: path, Skip: []string{"config"}})
		if err == nil && len(settings) != 8 {
			t.Errorf("%d settings, want one per flag but config", len(settings))
		}
	})
}

// A flag is repeatable because its value is a Repeatable, not because of
// what its usage says, and a Repeatable prints the help flag.Func would.
func TestRepeatableIsTheValueNotTheUsage(t *testing.T) {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	var got []string
	fs.Var(Repeatable(func(s string) error { got = append(got, s); return nil }), "tag", "a tag")
	fs.Func("note", "a note (repeatable, says the usage)", func(string) error { return nil })
	TrackValues(fs)
	path := writeFile(t, "hearth.toml", "tag = [\"a\", \"b\"]\n")
	settings, err := Apply(fs, Sources{File: path})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"a", "b"}) || !slices.Equal(settings[1].Values, []string{"a", "b"}) {
		t.Fatalf("tag set with %q, setting %+v", got, settings[1])
	}
	if _, err := Apply(fs, Sources{File: writeFile(t, "hearth.toml", "note = [\"a\"]\n")}); err == nil {
		t.Fatal("an array set a flag whose usage only says it repeats")
	}

	help := func(define func(fs *flag.FlagSet)) string {
		fs := flag.NewFlagSet("up", flag.ContinueOnError)
		define(fs)
		var b bytes.Buffer
		fs.SetOutput(&b)
		fs.PrintDefaults()
		return b.String()
	}
	fn := func(string) error { return nil }
	asFunc := help(func(fs *flag.FlagSet) { fs.Func("alias", "an alias (repeatable)", fn) })
	asRepeatable := help(func(fs *flag.FlagSet) { fs.Var(Repeatable(fn), "alias", "an alias (repeatable)") })
	if asFunc != asRepeatable {
		t.Fatalf("help differs:\nflag.Func:\n%s\nRepeatable:\n%s", asFunc, asRepeatable)
	}
}
