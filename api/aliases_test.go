package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestSetAliasesAppliesToTheNextRequest: aliases changed while the
// gateway runs decide the very next request; invalid ones are refused and
// leave the current aliases in place.
func TestSetAliasesAppliesToTheNextRequest(t *testing.T) {
	h := startGateway(t, nil)
	ask := func(model string) int {
		t.Helper()
		resp, _ := h.post(t, "/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`)
		return resp.StatusCode
	}
	if got := ask("devstral"); got != http.StatusNotFound {
		t.Fatalf("before: devstral got %d, want 404", got)
	}
	for _, tc := range []struct {
		name    string
		aliases map[string]string
		wantErr string // "" = accepted
		// status of each model name after the call
		want map[string]int
	}{
		{"a new pattern", map[string]string{"dev*": servedModel}, "",
			map[string]int{"devstral": 200, "claude-opus-4": 404, servedModel: 200}},
		{"a malformed pattern is refused", map[string]string{"claude-[": servedModel}, "syntax error",
			map[string]int{"devstral": 200, "claude-opus-4": 404}},
		{"a target that is not served is refused", map[string]string{"claude-*": "gpt-oss-120b"}, "not served",
			map[string]int{"devstral": 200, "claude-opus-4": 404}},
		{"an exact name", map[string]string{"claude-opus-4": servedModel}, "",
			map[string]int{"devstral": 404, "claude-opus-4": 200}},
		{"none: only served names", nil, "",
			map[string]int{"claude-opus-4": 404, servedModel: 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := h.gw.SetAliases(tc.aliases)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("SetAliases: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("SetAliases: %v, want an error about %q", err, tc.wantErr)
			}
			for model, want := range tc.want {
				if got := ask(model); got != want {
					t.Errorf("%s: %d, want %d", model, got, want)
				}
			}
		})
	}
}

// TestSetAliasesCopiesTheMap: the caller may change its map afterwards.
func TestSetAliasesCopiesTheMap(t *testing.T) {
	r := newModelResolver(Config{Models: []string{servedModel}})
	aliases := map[string]string{"small": servedModel}
	if err := r.setAliases(aliases); err != nil {
		t.Fatal(err)
	}
	aliases["small"] = "elsewhere"
	delete(aliases, "small")
	if got, err := r.resolve("small"); err != nil || got != servedModel {
		t.Errorf("small -> %q, %v; want %q", got, err, servedModel)
	}
}
