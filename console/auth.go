package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"

	"github.com/hearth-llm/hearth/apikey"
	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/console/components"
)

// cookieName is the console's login cookie.
const cookieName = "hearth_console"

// The console's access rule:
//
//   - once the owner's password is set (Deps.Owner), every page needs a
//     login with it, a cookie session made by POST /login, from loopback
//     too;
//   - before that, while the API requires a key, every page needs a login
//     with one;
//   - otherwise the console answers only requests that come from loopback
//     and name a loopback host (the Host check stops DNS rebinding: a web
//     page whose name resolves to 127.0.0.1 must not drive the console),
//     and POST /setup with the token printed at start-up sets the owner's
//     password;
//   - state-changing requests must be provably the console's own
//     (sameOrigin).
func (c *Console) authorize(fc *fiber.Ctx) error {
	if c.owner.isSet() || c.keyReq(fc.UserContext()) {
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
	return c.render(fc, fiber.StatusForbidden, components.Forbidden(c.layout(fc, "Closed", "", ""), c.owner.enabled()))
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

// sameOrigin rejects state-changing requests that another site's page
// could have sent (CSRF): see pageProof.
func (c *Console) sameOrigin(fc *fiber.Ctx) error {
	if msg, ok := pageProof(fc); !ok {
		return plainError(fc, fiber.StatusForbidden, msg)
	}
	return fc.Next()
}

// pageProof reports whether a request says it comes from the console's
// own origin: Sec-Fetch-Site, when present, is same-origin (or none: typed
// by the user), and either its Origin names the console's host or it
// carries htmx's HX-Request header, which a cross-site page cannot add
// without a CORS preflight that the console never grants. A request with
// neither proof fails, whatever its cookies; msg says why.
func pageProof(fc *fiber.Ctx) (msg string, ok bool) {
	if crossSite(fc) {
		return "cross-site request refused", false
	}
	origin := fc.Get(fiber.HeaderOrigin)
	if origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !strings.EqualFold(u.Host, string(fc.Request().Host())) {
			return "cross-origin request refused", false
		}
		return "", true
	}
	if fc.Get("HX-Request") == "true" {
		return "", true
	}
	return "request refused: it carries neither an Origin header nor HX-Request: true", false
}

// crossSite reports a request a browser says another site made.
func crossSite(fc *fiber.Ctx) bool {
	switch fc.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return false
	}
	return true
}

func (c *Console) handleLoginPage(fc *fiber.Ctx) error {
	if !c.owner.isSet() && !c.keyReq(fc.UserContext()) {
		return fc.Redirect(c.cfg.BasePath+"/", fiber.StatusSeeOther)
	}
	return c.render(fc, fiber.StatusOK, c.loginPage(fc, ""))
}

func (c *Console) loginPage(fc *fiber.Ctx, msg string) templ.Component {
	return components.Login(c.layout(fc, "Log in", "", ""), components.LoginVM{Action: c.cfg.BasePath + "/login", Err: msg, Password: c.owner.isSet()})
}

// clientOf names the client a login attempt is counted against.
func (c *Console) clientOf(fc *fiber.Ctx) string {
	if ip := c.peerIP(fc); ip != nil {
		return ip.String()
	}
	return "unknown"
}

// beginAttempt counts a login or setup attempt of the request's client
// before its secret is checked (loginLimiter.begin). When the client must
// wait it answers 429 and returns a nil end.
func (c *Console) beginAttempt(fc *fiber.Ctx, page func(msg string) templ.Component) (end func(loginOutcome), client string, err error) {
	client = c.clientOf(fc)
	end, wait := c.limiter.begin(client)
	if end != nil {
		return end, client, nil
	}
	secs := int((wait + time.Second - 1) / time.Second)
	fc.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
	return nil, client, c.render(fc, fiber.StatusTooManyRequests, page(fmt.Sprintf("Too many failed attempts, or another attempt from your address in progress: try again in %d s.", secs)))
}

func (c *Console) handleLogin(fc *fiber.Ctx) error {
	ctx := fc.UserContext()
	if !c.owner.isSet() && !c.keyReq(ctx) {
		return fc.Redirect(c.cfg.BasePath+"/", fiber.StatusSeeOther)
	}
	page := func(msg string) templ.Component { return c.loginPage(fc, msg) }
	end, client, err := c.beginAttempt(fc, page)
	if end == nil {
		return err
	}
	if c.owner.isSet() {
		ok, err := checkPassword(c.owner.passwordDigest(), fc.FormValue("password"))
		if err != nil {
			end(loginUncounted)
			c.log.Error("checking the owner's password", "error", err)
			return c.render(fc, fiber.StatusInternalServerError, page("Cannot check the password: the stored one is damaged."))
		}
		if !ok {
			end(loginFailed)
			c.log.Warn("console login failed", "client", client)
			return c.render(fc, fiber.StatusUnauthorized, page("Wrong password."))
		}
		end(loginSucceeded)
		c.startLogin(fc, ownerLogin)
		return fc.Redirect(c.cfg.BasePath+"/", fiber.StatusSeeOther)
	}
	key, err := c.keys.CheckKey(ctx, strings.TrimSpace(fc.FormValue("key")))
	if err != nil {
		msg := "That key is not valid."
		status := fiber.StatusUnauthorized
		if !errors.Is(err, ErrNoSuchKey) {
			end(loginUncounted)
			c.log.Warn("checking a console login", "error", err)
			msg, status = "Cannot check keys right now.", fiber.StatusInternalServerError
		} else {
			end(loginFailed)
		}
		return c.render(fc, status, page(msg))
	}
	if key.Scope != apikey.ScopeAdmin {
		// A client's key sits in its configuration on some laptop; it
		// must not also open the console, which makes more keys.
		end(loginFailed)
		return c.render(fc, fiber.StatusForbidden, page("That is an inference key: the console opens with an admin key."))
	}
	end(loginSucceeded)
	c.startLogin(fc, key.ID)
	return fc.Redirect(c.cfg.BasePath+"/", fiber.StatusSeeOther)
}

func (c *Console) setupPage(fc *fiber.Ctx, msg string) templ.Component {
	return components.Setup(c.layout(fc, "Set up", "", ""), components.SetupVM{Action: c.cfg.BasePath + "/setup", Err: msg, MinLength: MinPasswordLength})
}

func (c *Console) handleSetupPage(fc *fiber.Ctx) error {
	if !c.owner.enabled() || c.owner.isSet() {
		return fc.Redirect(c.cfg.BasePath+"/login", fiber.StatusSeeOther)
	}
	return c.render(fc, fiber.StatusOK, c.setupPage(fc, ""))
}

// handleSetup sets the owner's password once, given the setup token, and
// logs the owner in; every earlier session (key logins) ends.
func (c *Console) handleSetup(fc *fiber.Ctx) error {
	if !c.owner.enabled() || c.owner.isSet() {
		return fc.Redirect(c.cfg.BasePath+"/login", fiber.StatusSeeOther)
	}
	page := func(msg string) templ.Component { return c.setupPage(fc, msg) }
	end, client, err := c.beginAttempt(fc, page)
	if end == nil {
		return err
	}
	if !c.owner.checkToken(strings.TrimSpace(fc.FormValue("token"))) {
		end(loginFailed)
		c.log.Warn("console setup with a wrong token", "client", client)
		return c.render(fc, fiber.StatusUnauthorized, page("That setup token is not the one hearth up printed."))
	}
	password := fc.FormValue("password")
	if msg := validNewPassword(password, fc.FormValue("confirm")); msg != "" {
		end(loginUncounted)
		return c.render(fc, fiber.StatusBadRequest, page(msg))
	}
	digest, err := hashPassword(password, c.passwordIterations)
	if err != nil {
		end(loginUncounted)
		return err
	}
	switch err := c.owner.set(fc.UserContext(), digest); {
	case errors.Is(err, errOwnerExists):
		end(loginUncounted)
		return fc.Redirect(c.cfg.BasePath+"/login", fiber.StatusSeeOther)
	case err != nil:
		end(loginUncounted)
		c.log.Error("saving the owner's password", "error", err)
		return c.render(fc, fiber.StatusInternalServerError, page("Cannot save the password."))
	}
	end(loginSucceeded)
	c.log.Info("console owner's password set", "client", client)
	c.logins.clear()
	c.startLogin(fc, ownerLogin)
	return fc.Redirect(c.cfg.BasePath+"/", fiber.StatusSeeOther)
}

// SetupToken is the first-run token that sets the owner's password, for
// hearth up to print on its terminal; "" once a password is set or
// without Deps.Owner.
func (c *Console) SetupToken() string { return c.owner.setupToken() }

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

// ownerLogin is the key id of a session made with the owner's password.
const ownerLogin = "owner"

// loginStore holds console sessions in memory: a restart logs everyone
// out, which for a homelab daemon is a fair price for keeping no session
// on disk. Sessions are found by the SHA-256 of their token, so that even
// a dump of the daemon's memory holds no cookie that works.
type loginStore struct {
	ttl, idle time.Duration
	clock     clock.Clock

	mu       sync.Mutex
	sessions map[[sha256.Size]byte]login
}

type login struct {
	keyID    string
	expires  time.Time // absolute end
	lastSeen time.Time
}

func newLoginStore(ttl, idle time.Duration, clk clock.Clock) *loginStore {
	return &loginStore{ttl: ttl, idle: idle, clock: clk, sessions: make(map[[sha256.Size]byte]login)}
}

func (s *loginStore) alive(l login, now time.Time) bool {
	return now.Before(l.expires) && now.Before(l.lastSeen.Add(s.idle))
}

func (s *loginStore) create(keyID string) string {
	var b [32]byte
	rand.Read(b[:]) // crypto/rand.Read never fails since Go 1.24
	token := base64.RawURLEncoding.EncodeToString(b[:])
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, l := range s.sessions {
		if !s.alive(l, now) {
			delete(s.sessions, t)
		}
	}
	s.sessions[sha256.Sum256([]byte(token))] = login{keyID: keyID, expires: now.Add(s.ttl), lastSeen: now}
	return token
}

// get returns the key a session token was made with, and counts the
// request as the session's use.
func (s *loginStore) get(token string) (string, bool) {
	if token == "" {
		return "", false
	}
	sum := sha256.Sum256([]byte(token))
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.sessions[sum]
	if !ok {
		return "", false
	}
	if !s.alive(l, now) {
		delete(s.sessions, sum)
		return "", false
	}
	l.lastSeen = now
	s.sessions[sum] = l
	return l.keyID, true
}

func (s *loginStore) delete(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sha256.Sum256([]byte(token)))
}

// clear ends every session.
func (s *loginStore) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.sessions)
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

// LocalTokenHeader carries Deps.LocalToken (see Guard).
const LocalTokenHeader = "Hearth-Local-Token"

// Guard protects the daemon's JSON API (/api/v1/…) for scripts and the
// hearth CLI as well as the browser. Refusals are JSON. A request passes
// with
//
//   - an admin API key as a bearer token (or x-api-key);
//   - the local token (LocalTokenHeader, Deps.LocalToken) from loopback:
//     what the hearth command on this machine sends, read from a file
//     only the daemon's user can read;
//   - a console login, and for a state-changing request also the
//     console's proof of origin (pageProof), since the browser sends the
//     cookie with any site's request;
//   - for reads only, from loopback to a loopback name while the API
//     needs no key. A state-changing request never passes on loopback
//     alone, owner's password set or not: another local user can send
//     the console's proof of origin as well as the console can.
//
// Loopback alone never proves a state-changing request: a page in the
// user's browser posts from loopback too, with an Origin of its own or,
// from old browsers, none; a request a browser marks cross-site is refused
// whatever it carries. A key or the local token rides in a header that no
// page of another origin can set without a CORS preflight, which Hearth
// never grants; DNS rebinding makes the page same-origin but not the
// Host loopback, and it can read neither the key nor the token's file.
func (c *Console) Guard(fc *fiber.Ctx) error {
	write := !isRead(fc.Method())
	if write && crossSite(fc) {
		return fc.Status(fiber.StatusForbidden).JSON(fiber.Map{"error": "cross-site request refused"})
	}
	if carried, ok, err := c.checkCredential(fc); carried {
		if !ok {
			return err
		}
		return fc.Next()
	}
	proofMsg, proved := "", true
	if write {
		proofMsg, proved = pageProof(fc)
		if !proved {
			proofMsg += ": a state-changing /api/v1 request needs an admin API key, the local token the hearth command reads from the data directory, or the console's own page"
		}
	}
	if _, ok := c.logins.get(fc.Cookies(cookieName)); ok {
		if !proved {
			return fc.Status(fiber.StatusForbidden).JSON(fiber.Map{"error": proofMsg})
		}
		return fc.Next()
	}
	if !c.keyReq(fc.UserContext()) {
		if !c.isLocal(fc) {
			return fc.Status(fiber.StatusForbidden).JSON(fiber.Map{"error": "the API is open only to this machine while no API key is set"})
		}
		switch {
		case !proved:
			return fc.Status(fiber.StatusForbidden).JSON(fiber.Map{"error": proofMsg})
		case write:
			// Any local user can add a page's proof: loopback proves
			// nothing about who sends a write.
			return fc.Status(fiber.StatusForbidden).JSON(fiber.Map{"error": "a state-changing /api/v1 request needs an admin API key, the local token the hearth command reads from the data directory, or a console login"})
		}
		return fc.Next()
	}
	return fc.Status(fiber.StatusUnauthorized).JSON(fiber.Map{"error": "missing API key: /api/v1 needs an admin key (Authorization: Bearer)"})
}

// checkCredential checks the admin credential a request carries: an API
// key (x-api-key, or Authorization, which must then be a bearer token) or
// the local token. carried is false when it carries none; ok when it is
// an admin key or the local token from this machine; otherwise the
// refusal is written and err is what writing it returned.
func (c *Console) checkCredential(fc *fiber.Ctx) (carried, ok bool, err error) {
	refuse := func(status int, msg string) (bool, bool, error) {
		return true, false, fc.Status(status).JSON(fiber.Map{"error": msg})
	}
	key := fc.Get("x-api-key")
	if a := fc.Get(fiber.HeaderAuthorization); key == "" && a != "" {
		var bearer bool
		if key, bearer = bearerToken(a); !bearer {
			return refuse(fiber.StatusUnauthorized, "the Authorization header must be Bearer and an admin API key")
		}
	}
	if key != "" {
		k, err := c.keys.CheckKey(fc.UserContext(), key)
		switch {
		case err == nil && k.Scope == apikey.ScopeAdmin:
			return true, true, nil
		case err == nil:
			return refuse(fiber.StatusForbidden, "this key opens the inference API only; /api/v1 needs an admin key")
		}
		return refuse(fiber.StatusUnauthorized, "invalid API key")
	}
	if token := fc.Get(LocalTokenHeader); token != "" {
		if c.localTokenOK(fc, token) {
			return true, true, nil
		}
		return refuse(fiber.StatusForbidden, "wrong local token, or not from this machine: the daemon writes a new one at each start")
	}
	return false, false, nil
}

// RequireAdminCredential passes only a request that carries an admin API
// key or the local token from this machine: no console session and no
// keyless loopback path, for what shows the daemon's memory (Go's runtime
// profiles). Refusals are JSON.
func (c *Console) RequireAdminCredential(fc *fiber.Ctx) error {
	carried, ok, err := c.checkCredential(fc)
	switch {
	case !carried:
		return fc.Status(fiber.StatusUnauthorized).JSON(fiber.Map{"error": "this needs an admin API key (Authorization: Bearer) or the local token (" +
			LocalTokenHeader + ", from the data directory's local-token file)"})
	case !ok:
		return err
	}
	return fc.Next()
}

// isRead reports the methods that change nothing.
func isRead(method string) bool {
	return method == fiber.MethodGet || method == fiber.MethodHead || method == fiber.MethodOptions
}

// localTokenOK reports the local token, sent from this machine.
func (c *Console) localTokenOK(fc *fiber.Ctx, token string) bool {
	want := c.localToken
	ip := c.peerIP(fc)
	return want != "" && ip != nil && ip.IsLoopback() &&
		subtle.ConstantTimeCompare([]byte(token), []byte(want)) == 1
}

// bearerToken reads "Bearer TOKEN" (the scheme in any case); ok is false
// for any other header.
func bearerToken(header string) (token string, ok bool) {
	const scheme = "bearer "
	if len(header) <= len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return "", false
	}
	token = strings.TrimSpace(header[len(scheme):])
	return token, token != ""
}
