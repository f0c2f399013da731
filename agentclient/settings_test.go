package agentclient

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// checkGolden compares got with testdata/name, or rewrites it with
// -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from its golden file:\n--- got\n%s--- want\n%s", name, got, want)
	}
}

// served is a daemon on two 4090s with one engine over both at 40,960
// tokens.
var served = Served{BaseURL: "http://127.0.0.1:8000", Key: "hearth", Models: []string{"Qwen/Qwen3-14B-FP8"}, ContextTokens: 40960}

// Every client's settings as hearth up prints them and the Connect page
// shows them, with the context known and unknown.
func TestSettingsGolden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		served Served
	}{
		{"context", served},
		{"nocontext", Served{BaseURL: served.BaseURL, Key: "it's", Models: served.Models}},
	} {
		var b strings.Builder
		for _, s := range Settings(tc.served) {
			b.WriteString("## " + s.Title + " (" + s.Where + ")\n" + s.Config)
			if s.Env != "" {
				b.WriteString("--\n" + s.Env)
			}
		}
		checkGolden(t, "settings-"+tc.name+".golden", b.String())
	}
}

func envValue(env []Var, name string) (string, bool) {
	for _, v := range env {
		if v.Name == name {
			return v.Value, true
		}
	}
	return "", false
}

// Claude Code is told the served context and an output cap, and every
// model tier it asks for names the served model.
func TestClaudeCodeEnvTellsContextAndTiers(t *testing.T) {
	env := ClaudeCodeEnv(served)
	for name, want := range map[string]string{
		"ANTHROPIC_BASE_URL":                       "http://127.0.0.1:8000",
		"ANTHROPIC_AUTH_TOKEN":                     "hearth",
		"ANTHROPIC_MODEL":                          "Qwen/Qwen3-14B-FP8",
		"ANTHROPIC_DEFAULT_OPUS_MODEL":             "Qwen/Qwen3-14B-FP8",
		"ANTHROPIC_DEFAULT_SONNET_MODEL":           "Qwen/Qwen3-14B-FP8",
		"ANTHROPIC_DEFAULT_HAIKU_MODEL":            "Qwen/Qwen3-14B-FP8",
		"ANTHROPIC_SMALL_FAST_MODEL":               "Qwen/Qwen3-14B-FP8",
		"CLAUDE_CODE_SUBAGENT_MODEL":               "Qwen/Qwen3-14B-FP8",
		"CLAUDE_CODE_AUTO_COMPACT_WINDOW":          "40960",
		"CLAUDE_CODE_MAX_OUTPUT_TOKENS":            "8192",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	} {
		if got, ok := envValue(env, name); got != want {
			t.Errorf("%s = %q (set %v), want %q", name, got, ok, want)
		}
	}
	unknown := ClaudeCodeEnv(Served{BaseURL: served.BaseURL, Key: "k", Models: served.Models})
	for _, name := range []string{"CLAUDE_CODE_AUTO_COMPACT_WINDOW", "CLAUDE_CODE_MAX_OUTPUT_TOKENS"} {
		if v, ok := envValue(unknown, name); ok {
			t.Errorf("with the context unknown %s = %q, want it unset", name, v)
		}
	}
}

// Claude Code compacts past the window less its output cap (at most the
// 20,000 of a summary) less its 13,000-token buffer.
func TestClaudeCodeCompactThreshold(t *testing.T) {
	for _, tc := range []struct{ context, want int }{
		{40960, 40960 - 8192 - 13000},
		{131072, 131072 - 8192 - 13000},
		{29856, 29856 - 7464 - 13000},
		{16000, 0},
	} {
		if got := ClaudeCodeCompactThreshold(tc.context); got != tc.want {
			t.Errorf("ClaudeCodeCompactThreshold(%d) = %d, want %d", tc.context, got, tc.want)
		}
	}
}

// The -c overrides hearth launch gives Codex set what the config.toml
// snippet does: applied as Codex applies them (a dotted key, a TOML value)
// over an empty configuration, they make the snippet's table.
func TestCodexOverridesMatchTheConfigFile(t *testing.T) {
	for _, s := range []Served{served, {BaseURL: "http://h:1", Key: "k", Models: []string{`we"ird\model`}}} {
		var fromFile map[string]any
		if _, err := toml.Decode(CodexConfig(s), &fromFile); err != nil {
			t.Fatalf("config.toml snippet: %v\n%s", err, CodexConfig(s))
		}
		args := CodexOverrides(s)
		fromArgs := map[string]any{}
		for i := 0; i < len(args); i += 2 {
			if args[i] != "-c" {
				t.Fatalf("argument %d is %q, want -c", i, args[i])
			}
			key, value, ok := strings.Cut(args[i+1], "=")
			if !ok {
				t.Fatalf("override %q has no =", args[i+1])
			}
			var wrapped map[string]any
			if _, err := toml.Decode("x = "+value, &wrapped); err != nil {
				t.Fatalf("override %q: the value is not TOML: %v", args[i+1], err)
			}
			at := fromArgs
			parts := strings.Split(key, ".")
			for _, p := range parts[:len(parts)-1] {
				next, ok := at[p].(map[string]any)
				if !ok {
					next = map[string]any{}
					at[p] = next
				}
				at = next
			}
			at[parts[len(parts)-1]] = wrapped["x"]
		}
		a, _ := json.Marshal(fromFile)
		b, _ := json.Marshal(fromArgs)
		if string(a) != string(b) {
			t.Errorf("overrides make\n%s\nthe file\n%s", b, a)
		}
	}
}

// OpenCode's inline configuration carries the key itself and the limits.
func TestOpenCodeInvocationCarriesKeyAndLimits(t *testing.T) {
	c, _ := ClientByCommand("opencode")
	inv := InvocationOf(c, served)
	content, _ := envValue(inv.Env, "OPENCODE_CONFIG_CONTENT")
	var cfg struct {
		Provider map[string]struct {
			Options struct{ BaseURL, APIKey string }
			Models  map[string]struct{ Limit struct{ Context, Output int } }
		}
		Model string
	}
	if err := json.Unmarshal([]byte(content), &cfg); err != nil {
		t.Fatal(err)
	}
	p := cfg.Provider["hearth"]
	if p.Options.APIKey != "hearth" || p.Options.BaseURL != "http://127.0.0.1:8000/v1" || cfg.Model != "hearth/Qwen/Qwen3-14B-FP8" {
		t.Errorf("provider %+v, model %q", p.Options, cfg.Model)
	}
	if l := p.Models["Qwen/Qwen3-14B-FP8"].Limit; l.Context != 40960 || l.Output != 8192 {
		t.Errorf("limit %+v, want 40960 and 8192", l)
	}
}

// Environ sets the invocation's variables over the user's and drops what
// it unsets, keeping the rest in order.
func TestEnvironSetsOverTheUsers(t *testing.T) {
	inv := Invocation{Env: []Var{{"A", "new"}, {"C", "3"}}, Unset: []string{"SECRET"}}
	got := inv.Environ([]string{"PATH=/bin", "A=old", "SECRET=x", "HOME=/h"})
	want := []string{"PATH=/bin", "HOME=/h", "A=new", "C=3"}
	if !slices.Equal(got, want) {
		t.Errorf("Environ = %q, want %q", got, want)
	}
}

// Over HTTPS each client is told to trust Hearth's CA in the variable it
// reads; over HTTP none is set.
func TestInvocationTrustsTheCA(t *testing.T) {
	tls := served
	tls.BaseURL, tls.CAFile = "https://hearth.local:8000", "/data/tls/ca.pem"
	for cmd, want := range map[string]string{"claude": "NODE_EXTRA_CA_CERTS", "opencode": "NODE_EXTRA_CA_CERTS", "codex": "CODEX_CA_CERTIFICATE"} {
		c, _ := ClientByCommand(cmd)
		if got, ok := envValue(InvocationOf(c, tls).Env, want); !ok || got != tls.CAFile {
			t.Errorf("%s over https: %s = %q (set %v), want %q", cmd, want, got, ok, tls.CAFile)
		}
		for _, v := range InvocationOf(c, served).Env {
			if v.Name == "NODE_EXTRA_CA_CERTS" || v.Name == "CODEX_CA_CERTIFICATE" || v.Name == "SSL_CERT_FILE" {
				t.Errorf("%s over http sets %s", cmd, v.Name)
			}
		}
	}
}
