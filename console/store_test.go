package console

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseAliases(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Alias
		wantErr string
	}{
		{name: "empty", in: "", want: nil},
		{name: "lines, comments, CRLF", in: "# clients\r\nclaude-* = qwen3-14b\r\n\r\n  gpt-5=qwen3-14b  \n",
			want: []Alias{{"claude-*", "qwen3-14b"}, {"gpt-5", "qwen3-14b"}}},
		{name: "missing =", in: "claude-* qwen3", wantErr: "line 1"},
		{name: "empty side", in: "ok = m\n = m", wantErr: "line 2"},
		{name: "spaces in a name", in: "a b = m", wantErr: "no spaces"},
		{name: "duplicate", in: "a = m\nb = m\na = n", wantErr: `line 3: "a" already set on line 1`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseAliases(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, errAliasSyntax) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// FuzzParseAliases: the settings form is outside input. Parsing never
// panics, and what parses survives formatting and parsing again.
func FuzzParseAliases(f *testing.F) {
	for _, s := range []string{"", "a = b", "claude-* = qwen3\r\n# x\n\ngpt = q", "=", "a=b=c", "a = b\na = c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		aliases, err := parseAliases(text)
		if err != nil {
			return
		}
		again, err := parseAliases(formatAliases(aliases))
		if err != nil {
			t.Fatalf("formatted aliases do not parse: %v", err)
		}
		if len(again) != len(aliases) {
			t.Fatalf("round trip changed %d aliases into %d", len(aliases), len(again))
		}
		for i := range aliases {
			if aliases[i] != again[i] {
				t.Fatalf("round trip changed %+v into %+v", aliases[i], again[i])
			}
		}
	})
}

func TestMemoryStoreKeys(t *testing.T) {
	ctx := t.Context()
	m := NewMemoryStore(Settings{}, newFakeClock(t0))
	k1, s1, err := m.CreateKey(ctx, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	k2, s2, _ := m.CreateKey(ctx, "laptop") // names need not be unique
	if k1.ID == k2.ID || s1 == s2 {
		t.Fatal("two keys share an id or a secret")
	}
	if !strings.HasSuffix(k1.Hint, s1[len(s1)-4:]) || strings.Contains(k1.Hint, s1[10:30]) {
		t.Errorf("hint %q gives away too much or too little of %q", k1.Hint, s1)
	}
	if !k1.Created.Equal(t0) {
		t.Errorf("created %v", k1.Created)
	}
	if got, err := m.CheckKey(ctx, s2); err != nil || got.ID != k2.ID {
		t.Errorf("CheckKey = %v, %v", got, err)
	}
	for _, bad := range []string{"", "sk-hearth-", s1 + "x", s1[:len(s1)-1]} {
		if _, err := m.CheckKey(ctx, bad); !errors.Is(err, ErrNoSuchKey) {
			t.Errorf("CheckKey(%q) = %v, want ErrNoSuchKey", bad, err)
		}
	}
	if err := m.RevokeKey(ctx, k1.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.RevokeKey(ctx, k1.ID); !errors.Is(err, ErrNoSuchKey) {
		t.Errorf("second revoke = %v", err)
	}
	keys, _ := m.Keys(ctx)
	if len(keys) != 1 || keys[0].ID != k2.ID {
		t.Errorf("keys after revoke: %+v", keys)
	}
	if _, err := m.CheckKey(ctx, s1); !errors.Is(err, ErrNoSuchKey) {
		t.Error("revoked key still checks")
	}
}

func TestMemoryStoreSettings(t *testing.T) {
	ctx := t.Context()
	m := NewMemoryStore(Settings{Policy: "kv", Policies: []string{"kv", "hearth"}, Models: []string{"q"}}, nil)
	tests := []struct {
		name string
		s    Settings
		ok   bool
	}{
		{"valid", Settings{Policy: "hearth", Aliases: []Alias{{"claude-*", "q"}}}, true},
		{"unknown policy", Settings{Policy: "fastest"}, false},
		{"alias to an unserved model", Settings{Policy: "kv", Aliases: []Alias{{"a", "nope"}}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := m.SaveSettings(ctx, tc.s)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidSettings)) {
				t.Errorf("err = %v", err)
			}
		})
	}
	got, _ := m.Settings(ctx)
	if got.Policy != "hearth" || len(got.Aliases) != 1 || len(got.Policies) != 2 {
		t.Errorf("settings %+v", got)
	}
	// Returned settings are copies.
	got.Aliases[0].To = "changed"
	again, _ := m.Settings(ctx)
	if again.Aliases[0].To != "q" {
		t.Error("Settings returned shared state")
	}
}
