package console

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/apikey"
)

func TestOpenConsoleOnlyOnLoopback(t *testing.T) {
	tests := []struct {
		name   string
		peer   net.IP
		host   string
		path   string
		status int
	}{
		{"loopback v4", net.IPv4(127, 0, 0, 1), "127.0.0.1:8080", "/console/", http.StatusOK},
		{"loopback v6", net.IPv6loopback, "[::1]:8080", "/console/sessions", http.StatusOK},
		{"localhost name", net.IPv4(127, 0, 0, 1), "localhost:8080", "/console/requests", http.StatusOK},
		{"LAN peer", net.IPv4(192, 168, 1, 20), "192.168.1.5:8080", "/console/", http.StatusForbidden},
		{"LAN peer, settings", net.IPv4(192, 168, 1, 20), "192.168.1.5:8080", "/console/settings", http.StatusForbidden},
		{"LAN peer, events", net.IPv4(10, 0, 0, 7), "10.0.0.1:8080", "/console/events/overview", http.StatusForbidden},
		// DNS rebinding: a page on evil.example whose name resolves to
		// 127.0.0.1 reaches the console from loopback with a foreign Host.
		{"rebinding", net.IPv4(127, 0, 0, 1), "evil.example:8080", "/console/", http.StatusForbidden},
		{"static files stay open", net.IPv4(192, 168, 1, 20), "192.168.1.5:8080", "/console/static/console.css", http.StatusOK},
		{"login page redirects when open", net.IPv4(127, 0, 0, 1), "127.0.0.1:8080", "/console/login", http.StatusSeeOther},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil, withKeyRequired(false))
			h.peer = tc.peer
			resp, _ := h.do(t, request{path: tc.path, header: map[string]string{"Host": tc.host}})
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
}

func TestLoginWithKey(t *testing.T) {
	h := newHarness(t, nil, withKeyRequired(true))
	h.peer = net.IPv4(192, 168, 1, 20) // logins work from the network
	_, secret, err := h.store.CreateScopedKey(t.Context(), "laptop", apikey.ScopeAdmin)
	if err != nil {
		t.Fatal(err)
	}
	lan := map[string]string{"Host": "192.168.1.5:8080"}

	resp, _ := h.do(t, request{path: "/console/", header: lan})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/login" {
		t.Fatalf("without login: status %d location %q, want a redirect to the login page", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body := h.do(t, request{path: "/console/", header: map[string]string{"Host": "192.168.1.5:8080", "HX-Request": "true"}})
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `href="/console/login"`) {
		t.Errorf("htmx request without login: status %d, want 401 with a login link\n%s", resp.StatusCode, body)
	}

	resp, _ = h.do(t, request{method: "POST", path: "/console/login", form: url.Values{"key": {"sk-hearth-wrong"}}, header: lan})
	if resp.StatusCode != http.StatusUnauthorized || sessionCookie(resp) != nil {
		t.Fatalf("wrong key: status %d, cookie %v", resp.StatusCode, sessionCookie(resp))
	}

	resp, _ = h.do(t, request{method: "POST", path: "/console/login", form: url.Values{"key": {secret}}, header: lan})
	cookie := sessionCookie(resp)
	if resp.StatusCode != http.StatusSeeOther || cookie == nil {
		t.Fatalf("right key: status %d, cookie %v", resp.StatusCode, cookie)
	}
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/console" {
		t.Errorf("cookie %+v should be HttpOnly, SameSite=Strict, Path=/console", cookie)
	}
	if strings.Contains(cookie.Value, secret) {
		t.Error("the cookie carries the key itself")
	}

	for _, path := range []string{"/console/", "/console/sessions", "/console/requests", "/console/connect", "/console/settings"} {
		resp, body := h.do(t, request{path: path, cookie: cookie, header: lan})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s with login: status %d", path, resp.StatusCode)
		}
		if !strings.Contains(body, "Log out") {
			t.Errorf("%s with login shows no log out button", path)
		}
	}

	// A forged cookie is no login.
	resp, _ = h.do(t, request{path: "/console/", cookie: &http.Cookie{Name: cookieName, Value: "forged"}, header: lan})
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("forged cookie: status %d, want 303", resp.StatusCode)
	}

	// Logging out ends the session on the server, not just in the browser.
	resp, _ = h.do(t, request{method: "POST", path: "/console/logout", cookie: cookie, header: lan})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: status %d", resp.StatusCode)
	}
	resp, _ = h.do(t, request{path: "/console/", cookie: cookie, header: lan})
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after logout: status %d, want 303", resp.StatusCode)
	}
}

func TestLoginExpires(t *testing.T) {
	login := func(t *testing.T, h *harness) *http.Cookie {
		t.Helper()
		_, secret, _ := h.store.CreateScopedKey(t.Context(), "laptop", apikey.ScopeAdmin)
		resp, _ := h.do(t, request{method: "POST", path: "/console/login", form: url.Values{"key": {secret}}})
		cookie := sessionCookie(resp)
		if cookie == nil {
			t.Fatal("no cookie")
		}
		return cookie
	}
	t.Run("absolute", func(t *testing.T) {
		h := newHarness(t, nil, withKeyRequired(true))
		cookie := login(t, h)
		// Used every hour, the login still ends after LoginTTL.
		for elapsed := time.Duration(0); elapsed+time.Hour < h.c.cfg.LoginTTL; elapsed += time.Hour {
			h.clock.Advance(time.Hour)
			if resp, _ := h.do(t, request{path: "/console/", cookie: cookie}); resp.StatusCode != http.StatusOK {
				t.Fatalf("after %v in use: status %d", elapsed+time.Hour, resp.StatusCode)
			}
		}
		h.clock.Advance(time.Hour)
		if resp, _ := h.do(t, request{path: "/console/", cookie: cookie}); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("after LoginTTL: status %d, want 303", resp.StatusCode)
		}
	})
	t.Run("idle", func(t *testing.T) {
		h := newHarness(t, nil, withKeyRequired(true))
		cookie := login(t, h)
		h.clock.Advance(h.c.cfg.LoginIdle - time.Second)
		if resp, _ := h.do(t, request{path: "/console/", cookie: cookie}); resp.StatusCode != http.StatusOK {
			t.Fatalf("just before idle expiry: status %d", resp.StatusCode)
		}
		h.clock.Advance(h.c.cfg.LoginIdle - time.Second) // the request above renewed it
		if resp, _ := h.do(t, request{path: "/console/", cookie: cookie}); resp.StatusCode != http.StatusOK {
			t.Fatalf("renewed by use: status %d", resp.StatusCode)
		}
		h.clock.Advance(h.c.cfg.LoginIdle)
		if resp, _ := h.do(t, request{path: "/console/", cookie: cookie}); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("idle for LoginIdle: status %d, want 303", resp.StatusCode)
		}
	})
}

func TestRevokingKeyEndsItsLogins(t *testing.T) {
	h := newHarness(t, nil, withKeyRequired(true))
	laptop, laptopSecret, _ := h.store.CreateScopedKey(t.Context(), "laptop", apikey.ScopeAdmin)
	_, desktopSecret, _ := h.store.CreateScopedKey(t.Context(), "desktop", apikey.ScopeAdmin)
	login := func(secret string) *http.Cookie {
		resp, _ := h.do(t, request{method: "POST", path: "/console/login", form: url.Values{"key": {secret}}})
		return sessionCookie(resp)
	}
	laptopCookie, desktopCookie := login(laptopSecret), login(desktopSecret)

	resp, _ := h.do(t, request{method: "POST", path: "/console/keys/" + laptop.ID + "/revoke", cookie: desktopCookie})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: status %d", resp.StatusCode)
	}
	if resp, _ := h.do(t, request{path: "/console/", cookie: laptopCookie}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("login of the revoked key: status %d, want 303", resp.StatusCode)
	}
	if resp, _ := h.do(t, request{path: "/console/", cookie: desktopCookie}); resp.StatusCode != http.StatusOK {
		t.Errorf("login of another key: status %d, want 200", resp.StatusCode)
	}
	if _, err := h.store.CheckKey(t.Context(), laptopSecret); err == nil {
		t.Error("revoked key still checks")
	}
	resp, body := h.do(t, request{method: "POST", path: "/console/keys/nope/revoke", cookie: desktopCookie})
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "No such key") {
		t.Errorf("unknown key: status %d", resp.StatusCode)
	}
}

// With the default rule (a key is required once one exists), creating the
// first key on an open console closes it; the browser that created it is
// logged in with it rather than locked out.
func TestFirstKeyLogsCreatorIn(t *testing.T) {
	h := newHarness(t, nil, withKeyless([]KeylessClient{{Client: "codex", LastSeen: t0.Add(-time.Minute)}, {Client: "curl", LastSeen: t0.Add(-2 * time.Hour)}}))
	if resp, _ := h.do(t, request{path: "/console/"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("open console: status %d", resp.StatusCode)
	}
	// The first post only asks for a confirmation; nothing changes yet.
	resp, body := h.do(t, request{method: "POST", path: "/console/keys", form: url.Values{"name": {"claude-code"}, "client": {"claude-code"}},
		header: map[string]string{"HX-Request": "true"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Create the first API key?") || secretRE.MatchString(body) {
		t.Fatalf("first post: status %d, want a confirmation without a key\n%s", resp.StatusCode, body)
	}
	if !strings.Contains(body, "codex") || strings.Contains(body, "curl") {
		t.Errorf("confirmation should list codex (seen a minute ago) and not curl (two hours ago):\n%s", body)
	}
	if keys, err := h.store.Keys(t.Context()); err != nil || len(keys) != 0 {
		t.Fatalf("keys before the confirmation: %v %v", keys, err)
	}
	if resp, _ := h.do(t, request{path: "/console/"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("console before the confirmation: status %d, want still open", resp.StatusCode)
	}
	resp, body = h.do(t, request{method: "POST", path: "/console/keys", form: url.Values{"name": {"claude-code"}, "client": {"claude-code"}, "confirm": {"yes"}},
		header: map[string]string{"HX-Request": "true"}})
	if resp.StatusCode != http.StatusOK || !secretRE.MatchString(body) {
		t.Fatalf("create key: status %d", resp.StatusCode)
	}
	cookie := sessionCookie(resp)
	if cookie == nil {
		t.Fatal("creator not logged in")
	}
	if resp, _ := h.do(t, request{path: "/console/"}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("without cookie after the first key: status %d, want 303", resp.StatusCode)
	}
	if resp, _ := h.do(t, request{path: "/console/", cookie: cookie}); resp.StatusCode != http.StatusOK {
		t.Errorf("creator: status %d, want 200", resp.StatusCode)
	}
	// The secret is shown once: the settings page lists only its hint.
	_, settings := h.do(t, request{path: "/console/settings", cookie: cookie})
	if secretRE.MatchString(settings) {
		t.Error("settings page shows a secret")
	}
	if !strings.Contains(settings, "claude-code") {
		t.Error("settings page does not list the key")
	}
}

func TestCrossSiteWritesRefused(t *testing.T) {
	tests := []struct {
		name   string
		header map[string]string
		status int
	}{
		{"same origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:8080"}, http.StatusOK},
		{"htmx request", map[string]string{"HX-Request": "true"}, http.StatusOK},
		{"cross site", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"same site, other port", map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"foreign origin", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"bad origin", map[string]string{"Origin": "::"}, http.StatusForbidden},
		// A form another page submits without Origin (an old browser, a
		// privacy extension) proves nothing.
		{"no origin, no htmx header", nil, http.StatusForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil, withKeyRequired(false))
			resp, _ := h.do(t, request{method: "POST", path: "/console/settings",
				form: url.Values{"policy": {"kv"}, "aliases": {""}}, header: tc.header, noOrigin: true})
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
}

func TestSecurityHeaders(t *testing.T) {
	h := newHarness(t, nil, withKeyRequired(false))
	resp, _ := h.do(t, request{path: "/console/"})
	for k, want := range map[string]string{
		"X-Frame-Options":        "DENY",
		"X-Content-Type-Options": "nosniff",
		"Cache-Control":          "no-store",
		"Referrer-Policy":        "same-origin",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
}

func TestLoopbackHost(t *testing.T) {
	tests := []struct {
		host string
		want bool
	}{
		{"127.0.0.1", true}, {"127.0.0.1:8080", true}, {"127.1.2.3:1", true},
		{"[::1]:8080", true}, {"::1", true}, {"localhost", true}, {"LOCALHOST:80", true},
		{"hearth.localhost:8080", true},
		{"192.168.1.5:8080", false}, {"evil.example", false}, {"localhost.evil.example", false},
		{"", false}, {"[::ffff:127.0.0.1]:80", true}, {"0.0.0.0:8080", false},
	}
	for _, tc := range tests {
		if got := loopbackHost(tc.host); got != tc.want {
			t.Errorf("loopbackHost(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}
