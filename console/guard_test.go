package console

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/hearth-llm/hearth/apikey"
)

// TestGuardRefusesCrossSiteWrites: a state-changing /api/v1 request needs
// proof that no other site's page sent it: an admin key, the local token
// the command line reads from the data directory, or the console's own
// page (the same rule as the console's forms). Loopback alone is not
// proof: a page in the user's browser posts from loopback too.
func TestGuardRefusesCrossSiteWrites(t *testing.T) {
	const localToken = "local-token-0123456789abcdef0123456789abcdef"
	crossSite := map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}
	sameOrigin := map[string]string{"Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "same-origin"}
	withLocalToken := func(_ *Config, d *Deps) { d.LocalToken = localToken }
	mount := func(h *harness) {
		h.app.Post("/api/v1/cluster/leave", h.c.Guard, func(fc *fiber.Ctx) error { return fc.SendString("left") })
		h.app.Get("/api/v1/nodes", h.c.Guard, func(fc *fiber.Ctx) error { return fc.SendString("nodes") })
	}
	type step struct {
		name     string
		method   string
		header   map[string]string
		cookie   bool // send the owner's session cookie
		peer     string
		status   int
		contains string
	}
	run := func(t *testing.T, h *harness, cookie *http.Cookie, steps []step) {
		for _, s := range steps {
			t.Run(s.name, func(t *testing.T) {
				h.peer = net.IPv4(127, 0, 0, 1)
				if s.peer != "" {
					h.peer = net.ParseIP(s.peer)
				}
				r := request{method: s.method, path: "/api/v1/cluster/leave", header: s.header, noOrigin: true}
				if s.method == http.MethodGet {
					r.path = "/api/v1/nodes"
				}
				if s.cookie {
					r.cookie = cookie
				}
				resp, body := h.do(t, r)
				if resp.StatusCode != s.status || !strings.Contains(body, s.contains) {
					t.Errorf("status %d %q, want %d with %q", resp.StatusCode, body, s.status, s.contains)
				}
			})
		}
	}

	t.Run("no key, no owner", func(t *testing.T) {
		h := newHarness(t, nil, withKeyRequired(false), withLocalToken)
		mount(h)
		run(t, h, nil, []step{
			{"cross-site page", "POST", crossSite, false, "", http.StatusForbidden, "cross-site"},
			{"other origin", "POST", map[string]string{"Origin": "http://evil.example"}, false, "", http.StatusForbidden, "cross-origin"},
			{"no proof at all", "POST", nil, false, "", http.StatusForbidden, "local token"},
			// Another local user can send a page's proof as well as a page
			// can: without a login, a key or the local token, no write.
			{"a same-origin proof without a login", "POST", sameOrigin, false, "", http.StatusForbidden, "admin API key"},
			{"an htmx proof without a login", "POST", map[string]string{"HX-Request": "true"}, false, "", http.StatusForbidden, "admin API key"},
			{"the local token", "POST", map[string]string{LocalTokenHeader: localToken}, false, "", http.StatusOK, "left"},
			{"a wrong local token", "POST", map[string]string{LocalTokenHeader: localToken + "x"}, false, "", http.StatusForbidden, "local token"},
			{"the local token from another host", "POST", map[string]string{LocalTokenHeader: localToken, "Host": "192.168.1.5:8080"}, false, "192.168.1.20", http.StatusForbidden, ""},
			{"a cross-site page with the local token header", "POST", map[string]string{LocalTokenHeader: localToken, "Sec-Fetch-Site": "cross-site"}, false, "", http.StatusForbidden, "cross-site"},
			{"reads stay open on loopback", "GET", nil, false, "", http.StatusOK, "nodes"},
		})
	})

	t.Run("owner's password set", func(t *testing.T) {
		h := newHarness(t, nil, withKeyRequired(false), withOwner(), withLocalToken)
		mount(h)
		owner := setUpOwner(t, h, "correct horse battery")
		run(t, h, owner, []step{
			{"cross-site page with the owner's cookie", "POST", crossSite, true, "", http.StatusForbidden, "cross-site"},
			{"owner's cookie without proof of origin", "POST", nil, true, "", http.StatusForbidden, "local token"},
			{"owner's cookie on the console's page", "POST", sameOrigin, true, "", http.StatusOK, "left"},
			{"same origin without a login", "POST", sameOrigin, false, "", http.StatusForbidden, ""},
			{"the local token", "POST", map[string]string{LocalTokenHeader: localToken}, false, "", http.StatusOK, "left"},
		})
	})

	t.Run("keys required", func(t *testing.T) {
		h := newHarness(t, nil, withKeyRequired(true), withLocalToken)
		mount(h)
		_, admin, _ := h.store.CreateScopedKey(t.Context(), "scripts", apikey.ScopeAdmin)
		run(t, h, nil, []step{
			{"an admin key", "POST", map[string]string{"Authorization": "Bearer " + admin}, false, "", http.StatusOK, "left"},
			{"a cross-site page cannot send a key", "POST", crossSite, false, "", http.StatusForbidden, "cross-site"},
			{"the local token", "POST", map[string]string{LocalTokenHeader: localToken}, false, "", http.StatusOK, "left"},
			{"nothing", "POST", nil, false, "", http.StatusUnauthorized, "missing API key"},
		})
	})
}
