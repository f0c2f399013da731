package daemon_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/daemon/daemontest"
	"github.com/hearth-llm/hearth/router"
)

// startUpWithConsole is startUp with the console sampling every interval
// and its charts reaching back chartWindow (0: the defaults).
func startUpWithConsole(t *testing.T, interval, chartWindow time.Duration) string {
	t.Helper()
	baseURL, _ := serveTestUp(t, upConfig(t, "--speedup", "20"), daemon.WithConsoleTiming(interval, chartWindow))
	return baseURL
}

// TestUpKeepsConsoleSettingsAcrossRestarts: a key created and the
// settings saved in the console are in force after hearth up restarts on
// the same --data-dir, over the command line's defaults and next to an
// --api-key; a key revoked after that stops working.
func TestUpKeepsConsoleSettingsAcrossRestarts(t *testing.T) {
	dataDir := t.TempDir()
	const served = "qwen3-14b-fp8"

	baseURL, stop := startUp(t, "--data-dir", dataDir)
	if status, _ := postForm(t, baseURL, "/console/settings", url.Values{
		"policy": {router.PolicyKV}, "aliases": {"devstral* = " + served},
	}); status != http.StatusOK {
		t.Fatalf("save settings: %d", status)
	}
	for _, tc := range []struct {
		model      string
		wantStatus int
	}{
		{"devstral-small-2", 200},  // the saved alias, applied at once
		{"claude-sonnet-4-5", 404}, // the default "*" went with the save
		{served, 200},
	} {
		if got, policy := askModel(t, baseURL, tc.model, ""); got != tc.wantStatus || (got == 200 && policy != router.PolicyKV) {
			t.Errorf("before the restart, %s: %d routed by %q; want %d by %s", tc.model, got, policy, tc.wantStatus, router.PolicyKV)
		}
	}
	status, b := postForm(t, baseURL, "/console/keys", url.Values{"name": {"homelab-laptop"}, "confirm": {"yes"}})
	key := regexp.MustCompile(`sk-hearth-[A-Za-z0-9_-]+`).FindString(b)
	if status != http.StatusOK || key == "" {
		t.Fatalf("create key: %d, no key in:\n%s", status, b)
	}
	if err := stop(); err != nil {
		t.Fatalf("first run: %v", err)
	}

	// The same data directory, the command line's default policy and
	// alias ("*"), and a key on the command line.
	const staticKey = "sk-from-the-command-line"
	baseURL, _ = startUp(t, "--data-dir", dataDir, "--api-key", staticKey)
	for _, tc := range []struct {
		name, model, key string
		wantStatus       int
	}{
		{"no key", "devstral-small-2", "", 401},
		{"a wrong key", "devstral-small-2", "sk-hearth-nope", 401},
		{"the saved alias with the stored key", "devstral-small-2", key, 200},
		{"the saved alias with --api-key", "devstral-small-2", staticKey, 200},
		{"a name only the flag's alias would map", "claude-sonnet-4-5", key, 404},
	} {
		if got, policy := askModel(t, baseURL, tc.model, tc.key); got != tc.wantStatus || (got == 200 && policy != router.PolicyKV) {
			t.Errorf("after the restart, %s: %d routed by %q; want %d by %s", tc.name, got, policy, tc.wantStatus, router.PolicyKV)
		}
	}

	// The console's Settings page shows what was saved. The stored key
	// is a client's (inference) key, which does not open the console; the
	// command line's key is an admin key, which does.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar}
	send := func(path string, form url.Values) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, baseURL+path, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", baseURL)
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	send("/console/login", url.Values{"key": {key}})
	if status, _, _ := get(t, noRedirects, baseURL+"/console/settings"); status != http.StatusSeeOther {
		t.Errorf("settings page with no login: %d, want a redirect to the login", status)
	}
	if len(jar.Cookies(mustParseURL(t, baseURL+"/console/"))) != 0 {
		t.Error("an inference key logged in to the console")
	}
	send("/console/login", url.Values{"key": {staticKey}})
	status, page, _ := get(t, browser, baseURL+"/console/settings")
	if status != http.StatusOK || !containsAll(page, []string{"devstral* = " + served, "homelab-laptop"}) {
		t.Fatalf("settings page after the restart: %d, want the saved alias and the key:\n%s", status, page)
	}
	keyID := regexp.MustCompile(`/console/keys/(key_[0-9a-f]+)/revoke`).FindStringSubmatch(page)
	if keyID == nil {
		t.Fatalf("no revoke form on the settings page:\n%s", page)
	}
	send("/console/keys/"+keyID[1]+"/revoke", nil)
	if got, _ := askModel(t, baseURL, "devstral-small-2", key); got != 401 {
		t.Errorf("the revoked key: %d, want 401", got)
	}
	if got, _ := askModel(t, baseURL, "devstral-small-2", staticKey); got != 200 {
		t.Errorf("--api-key after the revoke: %d, want 200", got)
	}
}

// TestUpServesTheConsole checks the wiring without a browser: the root
// sends browsers to the console, the overview lists both simulated GPUs,
// a request shows up as a session and a routing decision, and a key
// created on the Connect page closes the API to requests without it.
func TestUpServesTheConsole(t *testing.T) {
	baseURL := startUpWithConsole(t, 50*time.Millisecond, 0)

	status, _, h := get(t, noRedirects, baseURL+"/")
	if status != http.StatusFound || h.Get("Location") != "/console/" {
		t.Fatalf("GET /: %d to %q, want a redirect to /console/", status, h.Get("Location"))
	}
	resp, err := http.Head(baseURL + "/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD / (Claude Code's probe): %v %v", resp, err)
	}
	resp.Body.Close()

	status, page, _ := get(t, http.DefaultClient, baseURL+"/console/")
	if status != 200 || strings.Count(page, `class="card"`) != 2 || !strings.Contains(page, "4090") {
		t.Fatalf("overview: %d, want two GPU cards:\n%s", status, page)
	}

	if s := postMessages(t, baseURL, "sess-wiring", ""); s != 200 {
		t.Fatalf("request before any key: %d", s)
	}
	waitLive(t, baseURL, "sessions", "sess-wiring", "claude-code")
	if _, page, _ = get(t, http.DefaultClient, baseURL+"/console/sessions"); !strings.Contains(page, "sess-wiring") {
		t.Errorf("sessions page does not list the request's session:\n%s", page)
	}
	waitLive(t, baseURL, "requests", `class="candidates"`, "gpu0", "gpu1")

	// Settings: the policy applies to the next request; an alias to a
	// model that is not served is refused, policy and all.
	for _, tc := range []struct {
		name, policy, aliases string
		status                int
		routedBy              string
	}{
		{"policy kv", router.PolicyKV, "* = qwen3-14b-fp8", 200, router.PolicyKV},
		{"an alias to nothing", router.PolicyRoundRobin, "claude-* = gpt-oss-120b", 422, router.PolicyKV},
	} {
		status, _ := postForm(t, baseURL, "/console/settings", url.Values{"policy": {tc.policy}, "aliases": {tc.aliases}})
		if status != tc.status {
			t.Errorf("settings %s: %d, want %d", tc.name, status, tc.status)
		}
		if _, h := postMessagesHeader(t, baseURL, "sess-policy", ""); h.Get("x-hearth-policy") != tc.routedBy {
			t.Errorf("after settings %s the request was routed by %q, want %q", tc.name, h.Get("x-hearth-policy"), tc.routedBy)
		}
	}

	// The first key asks first, naming the client it will lock out, and
	// changes nothing until confirmed.
	status, b := postForm(t, baseURL, "/console/keys", url.Values{"name": {"claude-code"}, "client": {"claude-code"}})
	if status != 200 || !strings.Contains(b, "Create the first API key?") || !strings.Contains(b, "<strong>claude-code</strong>") {
		t.Fatalf("first key: %d, want a confirmation that lists claude-code:\n%s", status, b)
	}
	if got := postMessages(t, baseURL, "sess-unconfirmed", ""); got != 200 {
		t.Fatalf("API before the confirmation: %d, want 200", got)
	}
	status, b = postForm(t, baseURL, "/console/keys", url.Values{"name": {"claude-code"}, "client": {"claude-code"}, "confirm": {"yes"}})
	key := regexp.MustCompile(`sk-hearth-[A-Za-z0-9_-]+`).FindString(b)
	if status != 200 || key == "" {
		t.Fatalf("create key: %d, no key in:\n%s", status, b)
	}
	for _, tc := range []struct {
		name, key string
		want      int
	}{
		{"without the key", "", 401},
		{"with a wrong key", "sk-hearth-nope", 401},
		{"with the console's key", key, 200},
	} {
		if got := postMessages(t, baseURL, "sess-keyed", tc.key); got != tc.want {
			t.Errorf("API %s: %d, want %d", tc.name, got, tc.want)
		}
	}
	// The console now wants a login too.
	if status, _, h := get(t, noRedirects, baseURL+"/console/"); status != http.StatusSeeOther || !strings.HasSuffix(h.Get("Location"), "/login") {
		t.Errorf("console after the first key: %d to %q, want the login page", status, h.Get("Location"))
	}
}

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// postForm posts a console form as a same-origin browser does.
func postForm(t *testing.T, baseURL, path string, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, baseURL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", baseURL)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// askModel sends a short chat request for model and returns its status
// and the policy that routed it.
func askModel(t *testing.T, baseURL, model, key string) (int, string) {
	t.Helper()
	body := `{"model":"` + model + `","max_tokens":4,"messages":[{"role":"user","content":"Say hello."}]}`
	status, header := daemontest.PostJSON(t, baseURL+"/v1/chat/completions", body, key)
	return status, header.Get("x-hearth-policy")
}

func mustParseURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Shared with the other tests of a running daemon.
var (
	get                = daemontest.Get
	waitLive           = daemontest.WaitLive
	postMessages       = daemontest.PostMessages
	postMessagesHeader = daemontest.PostMessagesHeader
)
