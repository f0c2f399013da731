package console

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/console/components"
)

// cookieName is the console's login cookie.
const cookieName = "hearth_console"

// The console's access rule:
//
//   - when the API requires a key, every page needs a login with one (a
//     cookie session made by POST /login);
//   - otherwise the console answers only requests that come from loopback
//     and name a loopback host (the Host check stops DNS rebinding: a web
//     page whose name resolves to 127.0.0.1 must not drive the console);
//   - state-changing requests must come from the console's own origin.
func (c *Console) authorize(fc *fiber.Ctx) error {
	if c.keyReq(fc.UserContext()) {
		if _, ok := c.logins.get(fc.Cookies(cookieName)); ok {
			return fc.Next()
		}
		if fc.Method() == fiber.MethodGet && fc.Get("HX-Request") == "" && !acceptsEventStream(fc) {
			return fc.Redirect(c.cfg.BasePath+"/login", fiber.StatusSeeOther)
		}
		if fc.Get("HX-Request") == "true" {
			// htmx swaps error responses too: give it something useful to show.
			return c.render(fc, fiber.StatusUnauthorized, components.LoginExpired(c.cfg.BasePath+"/login"))
		}
		return plainError(fc, fiber.StatusUnauthorized, "log in to the console")
	}
	if c.isLocal(fc) {
		return fc.Next()
	}
	return c.render(fc, fiber.StatusForbidden, components.Forbidden(c.layout(fc, "Closed", "", "")))
}

// isLocal reports a request from this machine to a loopback name.
func (c *Console) isLocal(fc *fiber.Ctx) bool {
	ip := c.peerIP(fc)
	return ip != nil && ip.IsLoopback() && loopbackHost(string(fc.Request().Host()))
}

// loopbackHost reports whether a Host header names this machine.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func acceptsEventStream(fc *fiber.Ctx) bool {
	return strings.Contains(fc.Get(fiber.HeaderAccept), "text/event-stream")
}

// sameOrigin rejects state-changing requests sent by another site's page.
// Browsers send Sec-Fetch-Site (modern) or Origin on such requests; a
// request with neither comes from a non-browser client, which cookies or
// the loopback rule already constrain.
func (c *Console) sameOrigin(fc *fiber.Ctx) error {
	switch fc.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return plainError(fc, fiber.StatusForbidden, "cross-site request refused")
	}
	if origin := fc.Get(fiber.HeaderOrigin); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !strings.EqualFold(u.Host, string(fc.Request().Host())) {
			return plainError(fc, fiber.StatusForbidden, "cross-origin request refused")
		}
	}
	return fc.Next()
}

func (c *Console) handleLoginPage(fc *fiber.Ctx) error {
	if !c.keyReq(fc.UserContext()) {
		return fc.Redirect(c.cfg.BasePath+"/", fiber.StatusSeeOther)
	}
	return c.render(fc, fiber.StatusOK, components.Login(c.layout(fc, "Log in", "", ""), components.LoginVM{Action: c.cfg.BasePath + "/login"}))
}

func (c *Console) handleLogin(fc *fiber.Ctx) error {
	ctx := fc.UserContext()
	if !c.keyReq(ctx) {
		return fc.Redirect(c.cfg.BasePath+"/", fiber.StatusSeeOther)
	}
	key, err := c.keys.CheckKey(ctx, strings.TrimSpace(fc.FormValue("key")))
	if err != nil {
		msg := "That key is not valid."
		status := fiber.StatusUnauthorized
		if !errors.Is(err, ErrNoSuchKey) {
			c.log.Warn("checking a console login", "error", err)
			msg, status = "Cannot check keys right now.", fiber.StatusInternalServerError
		}
		return c.render(fc, status, components.Login(c.layout(fc, "Log in", "", ""), components.LoginVM{Action: c.cfg.BasePath + "/login", Err: msg}))
	}
	c.startLogin(fc, key.ID)
	return fc.Redirect(c.cfg.BasePath+"/", fiber.StatusSeeOther)
}

func (c *Console) handleLogout(fc *fiber.Ctx) error {
	c.logins.delete(fc.Cookies(cookieName))
	fc.Cookie(&fiber.Cookie{
		Name: cookieName, Value: "", Path: c.cfg.BasePath,
		Expires: time.Unix(0, 0), MaxAge: -1, HTTPOnly: true, SameSite: fiber.CookieSameSiteStrictMode,
		Secure: c.cfg.SecureCookie,
	})
	return fc.Redirect(c.cfg.BasePath+"/login", fiber.StatusSeeOther)
}

// startLogin makes a session for keyID and hands the browser its cookie.
func (c *Console) startLogin(fc *fiber.Ctx, keyID string) {
	token := c.logins.create(keyID)
	fc.Cookie(&fiber.Cookie{
		Name: cookieName, Value: token, Path: c.cfg.BasePath,
		MaxAge: int(c.cfg.LoginTTL / time.Second), HTTPOnly: true, SameSite: fiber.CookieSameSiteStrictMode,
		Secure: c.cfg.SecureCookie,
	})
}

// loginStore holds console sessions in memory: a restart logs everyone
// out, which for a homelab daemon is a fair price for keeping no secret on
// disk.
type loginStore struct {
	ttl   time.Duration
	clock clock.Clock

	mu       sync.Mutex
	sessions map[string]login
}

type login struct {
	keyID   string
	expires time.Time
}

func newLoginStore(ttl time.Duration, clk clock.Clock) *loginStore {
	return &loginStore{ttl: ttl, clock: clk, sessions: make(map[string]login)}
}

func (s *loginStore) create(keyID string) string {
	var b [32]byte
	rand.Read(b[:]) // crypto/rand.Read never fails since Go 1.24
	token := base64.RawURLEncoding.EncodeToString(b[:])
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, l := range s.sessions {
		if now.After(l.expires) {
			delete(s.sessions, t)
		}
	}
	s.sessions[token] = login{keyID: keyID, expires: now.Add(s.ttl)}
	return token
}

// get returns the key a session token was made with.
func (s *loginStore) get(token string) (string, bool) {
	if token == "" {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.sessions[token]
	if !ok {
		return "", false
	}
	if s.clock.Now().After(l.expires) {
		delete(s.sessions, token)
		return "", false
	}
	return l.keyID, true
}

func (s *loginStore) delete(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, token)
}

// revokeKey ends every session made with a key.
func (s *loginStore) revokeKey(keyID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, l := range s.sessions {
		if l.keyID == keyID {
			delete(s.sessions, t)
		}
	}
}

// Guard protects the daemon's JSON API (/api/v1/…) with the console's
// rule, for scripts and the hearth CLI as well as the browser: a console
// login, or an API key as a bearer token (or x-api-key) while the API needs
// one; loopback only while it does not. Refusals are JSON.
func (c *Console) Guard(fc *fiber.Ctx) error {
	if !c.keyReq(fc.UserContext()) {
		if c.isLocal(fc) {
			return fc.Next()
		}
		return fc.Status(fiber.StatusForbidden).JSON(fiber.Map{"error": "the API is open only to this machine while no API key is set"})
	}
	if _, ok := c.logins.get(fc.Cookies(cookieName)); ok {
		return fc.Next()
	}
	key := fc.Get("x-api-key")
	if a := fc.Get(fiber.HeaderAuthorization); key == "" && len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		key = strings.TrimSpace(a[7:])
	}
	if key != "" {
		if _, err := c.keys.CheckKey(fc.UserContext(), key); err == nil {
			return fc.Next()
		}
	}
	return fc.Status(fiber.StatusUnauthorized).JSON(fiber.Map{"error": "missing or invalid API key"})
}
