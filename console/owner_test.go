package console

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hearth-llm/hearth/apikey"
)

// withOwner gives the console the harness's store as its owner store.
func withOwner() harnessOption {
	return func(_ *Config, d *Deps) { d.Owner = d.Keys.(*MemoryStore) }
}

// setUpOwner sets the owner's password through the setup page and returns
// the session cookie it hands out.
func setUpOwner(t *testing.T, h *harness, password string) *http.Cookie {
	t.Helper()
	resp, body := h.do(t, request{method: "POST", path: "/console/setup",
		form: url.Values{"token": {h.c.SetupToken()}, "password": {password}, "confirm": {password}}})
	cookie := sessionCookie(resp)
	if resp.StatusCode != http.StatusSeeOther || cookie == nil {
		t.Fatalf("setup: status %d, cookie %v\n%s", resp.StatusCode, cookie, body)
	}
	return cookie
}

func TestOwnerSetupAndLogin(t *testing.T) {
	h := newHarness(t, nil, withKeyRequired(false), withOwner())
	token := h.c.SetupToken()
	if len(token) < 32 {
		t.Fatalf("setup token %q is too short to resist guessing", token)
	}
	// Before setup, loopback is open and the network sees a pointer to setup.
	if resp, _ := h.do(t, request{path: "/console/"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("loopback before setup: status %d", resp.StatusCode)
	}
	h.peer = net.IPv4(192, 168, 1, 20)
	lan := map[string]string{"Host": "192.168.1.5:8080"}
	if resp, body := h.do(t, request{path: "/console/", header: lan}); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "/console/setup") {
		t.Fatalf("LAN before setup: status %d, want 403 pointing to setup\n%s", resp.StatusCode, body)
	}
	if resp, body := h.do(t, request{path: "/console/setup", header: lan}); resp.StatusCode != http.StatusOK || !strings.Contains(body, `name="token"`) {
		t.Fatalf("setup page: status %d\n%s", resp.StatusCode, body)
	}

	setup := func(token, password, confirm string) (*http.Response, string) {
		return h.do(t, request{method: "POST", path: "/console/setup", header: lan,
			form: url.Values{"token": {token}, "password": {password}, "confirm": {confirm}}})
	}
	if resp, _ := setup("wrong-token", "correct horse battery", "correct horse battery"); resp.StatusCode != http.StatusUnauthorized || sessionCookie(resp) != nil {
		t.Fatalf("wrong token: status %d", resp.StatusCode)
	}
	if resp, body := setup(token, "short", "short"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "at least") {
		t.Fatalf("short password: status %d\n%s", resp.StatusCode, body)
	}
	if resp, body := setup(token, "correct horse battery", "correct horse batterY"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "differ") {
		t.Fatalf("passwords that differ: status %d\n%s", resp.StatusCode, body)
	}
	resp, _ := setup(token, "correct horse battery", "correct horse battery")
	owner := sessionCookie(resp)
	if resp.StatusCode != http.StatusSeeOther || owner == nil {
		t.Fatalf("setup: status %d, cookie %v", resp.StatusCode, owner)
	}
	if !owner.HttpOnly || owner.SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie %+v should be HttpOnly and SameSite=Strict", owner)
	}
	if h.c.SetupToken() != "" {
		t.Error("the setup token outlived the setup")
	}
	if resp, _ := setup(token, "another password!", "another password!"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/login" || sessionCookie(resp) != nil {
		t.Fatalf("second setup with the old token: status %d location %q, want a redirect to login", resp.StatusCode, resp.Header.Get("Location"))
	}
	if digest, ok, _ := h.store.OwnerPassword(t.Context()); !ok || strings.Contains(digest, "correct horse") {
		t.Fatalf("stored digest %q", digest)
	}
	if resp, _ := h.do(t, request{path: "/console/settings", header: lan, cookie: owner}); resp.StatusCode != http.StatusOK {
		t.Fatalf("owner session from the LAN: status %d", resp.StatusCode)
	}

	// Once an owner exists, loopback needs a login too.
	h.peer = net.IPv4(127, 0, 0, 1)
	if resp, _ := h.do(t, request{path: "/console/"}); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/login" {
		t.Fatalf("loopback after setup without login: status %d, want a redirect to login", resp.StatusCode)
	}
	if _, body := h.do(t, request{path: "/console/login"}); !strings.Contains(body, `name="password"`) {
		t.Fatalf("login page asks for no password\n%s", body)
	}
	login := func(password string) *http.Response {
		resp, _ := h.do(t, request{method: "POST", path: "/console/login", form: url.Values{"password": {password}}})
		return resp
	}
	if resp := login("correct horse batter"); resp.StatusCode != http.StatusUnauthorized || sessionCookie(resp) != nil {
		t.Fatalf("wrong password: status %d", resp.StatusCode)
	}
	resp = login("correct horse battery")
	cookie := sessionCookie(resp)
	if resp.StatusCode != http.StatusSeeOther || cookie == nil {
		t.Fatalf("right password: status %d", resp.StatusCode)
	}
	if resp, _ := h.do(t, request{path: "/console/", cookie: cookie}); resp.StatusCode != http.StatusOK {
		t.Fatalf("logged in: status %d", resp.StatusCode)
	}
	resp, _ = h.do(t, request{method: "POST", path: "/console/logout", cookie: cookie})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: status %d", resp.StatusCode)
	}
	if resp, _ := h.do(t, request{path: "/console/", cookie: cookie}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the cookie still works after logout: status %d", resp.StatusCode)
	}
}

func TestOwnerSetupEndsKeyLogins(t *testing.T) {
	h := newHarness(t, nil, withKeyRequired(true), withOwner())
	_, secret, _ := h.store.CreateScopedKey(t.Context(), "laptop", apikey.ScopeAdmin)
	resp, _ := h.do(t, request{method: "POST", path: "/console/login", form: url.Values{"key": {secret}}})
	keyLogin := sessionCookie(resp)
	if keyLogin == nil {
		t.Fatal("key login before setup failed")
	}
	setUpOwner(t, h, "correct horse battery")
	if resp, _ := h.do(t, request{path: "/console/", cookie: keyLogin}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a key login outlived the owner's setup: status %d", resp.StatusCode)
	}
	// An API key no longer opens the console.
	resp, _ = h.do(t, request{method: "POST", path: "/console/login", form: url.Values{"key": {secret}}})
	if sessionCookie(resp) != nil {
		t.Fatal("an API key logged in after the owner's password was set")
	}
}

func TestLoginBackoff(t *testing.T) {
	h := newHarness(t, nil, withKeyRequired(false), withOwner())
	setUpOwner(t, h, "correct horse battery")
	try := func(password string) *http.Response {
		t.Helper()
		resp, _ := h.do(t, request{method: "POST", path: "/console/login", form: url.Values{"password": {password}}})
		return resp
	}
	free := h.c.limiter.freeFailures
	for i := range free {
		if resp := try("guess"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: status %d, want 401", i+1, resp.StatusCode)
		}
	}
	// Each further failure doubles the wait.
	wait := h.c.limiter.baseDelay
	for round := range 4 {
		if resp := try("guess"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("round %d: the attempt after the wait: status %d, want 401", round, resp.StatusCode)
		}
		resp := try("correct horse battery") // even the right password waits
		if resp.StatusCode != http.StatusTooManyRequests || sessionCookie(resp) != nil {
			t.Fatalf("round %d: an attempt within the wait: status %d, want 429", round, resp.StatusCode)
		}
		if got, want := resp.Header.Get("Retry-After"), strings.TrimSuffix(wait.String(), "s"); got != want {
			t.Errorf("round %d: Retry-After %q, want %q", round, got, want)
		}
		h.clock.Advance(wait - time.Millisecond)
		if resp := try("guess"); resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("round %d: just before the wait ends: status %d, want 429", round, resp.StatusCode)
		}
		h.clock.Advance(time.Millisecond)
		wait *= 2
	}
	// Another address is not held back by this one's failures, and a
	// success clears the record.
	h.peer = net.IPv4(127, 0, 0, 2)
	if resp := try("correct horse battery"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("another client: status %d", resp.StatusCode)
	}
}

func TestLoginLimiterGlobalCap(t *testing.T) {
	clk := newFakeClock(t0)
	l := newLoginLimiter(clk)
	// Many addresses, one failure each: the global cap stops them all.
	for i := range l.globalFailures {
		client := net.IPv4(10, 0, byte(i/256), byte(i%256)).String()
		end, d := l.begin(client)
		if end == nil {
			t.Fatalf("failure %d waited %v before the cap", i, d)
		}
		end(loginFailed)
	}
	if end, d := l.begin("10.9.9.9"); end != nil || d != l.globalWindow {
		t.Fatalf("a fresh client at the cap waits %v, want %v", d, l.globalWindow)
	}
	clk.Advance(l.globalWindow)
	if end, d := l.begin("10.9.9.9"); end == nil {
		t.Fatalf("after the window: wait %v", d)
	}
}

// TestLoginWaitRunsFromTheAnswer: an attempt is counted when it begins,
// but the wait its failure earns starts when it is answered, so a check
// slower than the wait does not use the wait up; while it runs, the
// client's other attempts are refused as in flight.
func TestLoginWaitRunsFromTheAnswer(t *testing.T) {
	clk := newFakeClock(t0)
	l := newLoginLimiter(clk)
	const client = "10.0.0.9"
	for i := range l.freeFailures {
		end, d := l.begin(client)
		if end == nil {
			t.Fatalf("free failure %d waited %v", i+1, d)
		}
		end(loginFailed)
	}
	end, d := l.begin(client)
	if end == nil {
		t.Fatalf("the first failure past the free ones waited %v before it began", d)
	}
	if again, _ := l.begin(client); again != nil {
		t.Fatal("a second attempt began while the first was being checked")
	}
	slowCheck := 3 * l.baseDelay
	clk.Advance(slowCheck)
	end(loginFailed)
	if again, d := l.begin(client); again != nil || d != l.baseDelay {
		t.Fatalf("right after the answer of a check that took %v: began %v, wait %v; want no attempt and %v", slowCheck, again != nil, d, l.baseDelay)
	}
	clk.Advance(l.baseDelay)
	if again, d := l.begin(client); again == nil {
		t.Fatalf("once the wait from the answer passed: wait %v", d)
	}
}

// TestLoginParallelGuessesFromOneAddress: 101 wrong passwords sent at
// once from one address are counted before they are checked and checked
// one at a time, so only the free failures' worth are checked at all,
// and the owner's password from another address then logs in. Before,
// all 101 were checked and their failures passed the global cap: the
// owner got 429.
func TestLoginParallelGuessesFromOneAddress(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, withKeyRequired(false), withOwner())
	// The real count (about 0.2 s a check): the guesses overlap as they
	// do against the daemon. Before, all 101 were checked and the owner
	// got 429; now at most the free failures and one more are.
	h.c.passwordIterations = passwordIterations
	setUpOwner(t, h, "correct horse battery")
	h.c.peerIP = func(fc *fiber.Ctx) net.IP { return net.ParseIP(fc.Get("X-Test-Peer")) }
	const guesses = 101
	statuses := make(chan int, guesses)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range guesses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, _ := h.do(t, request{method: "POST", path: "/console/login", form: url.Values{"password": {"guess"}},
				header: map[string]string{"X-Test-Peer": "10.0.0.66"}})
			statuses <- resp.StatusCode
		}()
	}
	close(start)
	wg.Wait()
	close(statuses)
	checked := 0
	for s := range statuses {
		switch s {
		case http.StatusUnauthorized:
			checked++
		case http.StatusTooManyRequests:
		default:
			t.Errorf("a guess got status %d", s)
		}
	}
	if checked > h.c.limiter.freeFailures+1 {
		t.Errorf("%d of %d parallel guesses from one address were checked, want at most %d", checked, guesses, h.c.limiter.freeFailures+1)
	}
	resp, _ := h.do(t, request{method: "POST", path: "/console/login", form: url.Values{"password": {"correct horse battery"}},
		header: map[string]string{"X-Test-Peer": "10.0.0.7"}})
	if resp.StatusCode != http.StatusSeeOther || sessionCookie(resp) == nil {
		t.Fatalf("the owner from another address after the guesses: status %d, want 303 and a session", resp.StatusCode)
	}
}

func TestCheckPassword(t *testing.T) {
	digest, err := hashPassword("correct horse battery", 1000)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := hashPassword("correct horse battery", 1000)
	if digest == other {
		t.Error("two digests of one password are equal: no salt")
	}
	for _, tc := range []struct {
		password string
		ok       bool
	}{
		{"correct horse battery", true},
		{"correct horse batterY", false},
		{"", false},
		{strings.Repeat("x", maxPasswordLength+1), false},
	} {
		ok, err := checkPassword(digest, tc.password)
		if err != nil || ok != tc.ok {
			t.Errorf("checkPassword(%q) = %v, %v; want %v", tc.password, ok, err, tc.ok)
		}
	}
	for _, bad := range []string{"", "pbkdf2-sha256$0$AAAAAAAAAAA$" + strings.Repeat("A", 43), "bcrypt$1$2$3", "pbkdf2-sha256$99999999$AAAAAAAAAAA$" + strings.Repeat("A", 43), "pbkdf2-sha256$0100$AAAAAAAAAAA$" + strings.Repeat("A", 43)} {
		if _, err := checkPassword(bad, "x"); err == nil {
			t.Errorf("digest %q accepted", bad)
		}
	}
}

func FuzzParsePasswordDigest(f *testing.F) {
	good, _ := hashPassword("pw", 1000)
	for _, s := range []string{good, "", "$$$", "pbkdf2-sha256$1$$", "pbkdf2-sha256$+1$AAAAAAAAAAA$A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parsePasswordDigest(s)
		if err != nil {
			return
		}
		if d.iterations < 1 || d.iterations > maxIterations || len(d.sum) != passwordHashLen || len(d.salt) < 8 {
			t.Fatalf("parsed %q into %+v", s, d)
		}
	})
}

// FuzzLoginForm posts arbitrary bodies to the login and setup forms: no
// body may crash them, log anyone in with a wrong password, or take the
// owner's place.
func FuzzLoginForm(f *testing.F) {
	const password = "correct horse battery"
	for _, s := range []string{"password=guess", "password=" + url.QueryEscape(password) + "x", "password=%zz", "key=sk-hearth-x&password=", "password=a&password=b", "token=x&password=aaaaaaaaaaaa&confirm=aaaaaaaaaaaa", strings.Repeat("a=b&", 100)} {
		f.Add(s)
	}
	h := newHarness(f, nil, withKeyRequired(false), withOwner())
	resp, _ := h.do(f, request{method: "POST", path: "/console/setup",
		form: url.Values{"token": {h.c.SetupToken()}, "password": {password}, "confirm": {password}}})
	if resp.StatusCode != http.StatusSeeOther {
		f.Fatalf("setup: %d", resp.StatusCode)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if v, err := url.ParseQuery(body); err == nil && v.Get("password") == password {
			return // the right password may log in
		}
		for _, path := range []string{"/console/login", "/console/setup"} {
			req := request{method: "POST", path: path, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}
			resp, _ := h.doRaw(t, req, body)
			if resp.StatusCode >= 500 || sessionCookie(resp) != nil {
				t.Fatalf("POST %s %q: status %d, cookie %v", path, body, resp.StatusCode, sessionCookie(resp))
			}
		}
		// Keep the limiter from turning every later input into a 429
		// that would test nothing.
		h.c.limiter.forget(h.peer.String())
	})
}

// doRaw posts body as it is, where do would encode a form.
func (h *harness) doRaw(t testing.TB, r request, body string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(r.method, "http://127.0.0.1:8080"+r.path, strings.NewReader(body))
	req.RequestURI = ""
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	req.Header.Set("Origin", "http://127.0.0.1:8080")
	resp, err := h.app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestKeyScopes(t *testing.T) {
	h := newHarness(t, nil, withKeyRequired(true))
	_, inference, _ := h.store.CreateKey(t.Context(), "codex on laptop")
	_, admin, _ := h.store.CreateScopedKey(t.Context(), "scripts", apikey.ScopeAdmin)
	h.app.Get("/api/v1/engines", h.c.Guard, func(fc *fiber.Ctx) error { return fc.SendString("engines") })
	for _, tc := range []struct {
		name   string
		header map[string]string
		status int
	}{
		{"admin key", map[string]string{"Authorization": "Bearer " + admin}, http.StatusOK},
		{"admin key, x-api-key", map[string]string{"x-api-key": admin}, http.StatusOK},
		{"admin key, lower-case scheme", map[string]string{"Authorization": "bearer " + admin}, http.StatusOK},
		{"inference key", map[string]string{"Authorization": "Bearer " + inference}, http.StatusForbidden},
		{"unknown key", map[string]string{"Authorization": "Bearer sk-hearth-nope"}, http.StatusUnauthorized},
		{"no key", nil, http.StatusUnauthorized},
		{"basic auth", map[string]string{"Authorization": "Basic " + admin}, http.StatusUnauthorized},
	} {
		t.Run("/api/v1 with "+tc.name, func(t *testing.T) {
			if resp, body := h.do(t, request{path: "/api/v1/engines", header: tc.header}); resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
		})
	}
	t.Run("console login with an inference key", func(t *testing.T) {
		resp, body := h.do(t, request{method: "POST", path: "/console/login", form: url.Values{"key": {inference}}})
		if resp.StatusCode != http.StatusForbidden || sessionCookie(resp) != nil || !strings.Contains(body, "admin key") {
			t.Errorf("status %d, cookie %v", resp.StatusCode, sessionCookie(resp))
		}
	})
	t.Run("settings create an admin key", func(t *testing.T) {
		resp, _ := h.do(t, request{method: "POST", path: "/console/login", form: url.Values{"key": {admin}}})
		cookie := sessionCookie(resp)
		resp, body := h.do(t, request{method: "POST", path: "/console/keys", cookie: cookie, form: url.Values{"name": {"ops"}, "scope": {"admin"}}})
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "<td>ops</td>") {
			t.Fatalf("create: status %d\n%s", resp.StatusCode, body)
		}
		keys, _ := h.store.Keys(t.Context())
		if k := keys[len(keys)-1]; k.Name != "ops" || k.Scope != apikey.ScopeAdmin {
			t.Errorf("created %+v", k)
		}
		if resp, _ := h.do(t, request{method: "POST", path: "/console/keys", cookie: cookie, form: url.Values{"name": {"x"}, "scope": {"root"}}}); resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("unknown scope: status %d", resp.StatusCode)
		}
	})
}

// FuzzBearerToken: any Authorization header parses without panic, and a
// token comes back only from a Bearer header, trimmed and non-empty.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer sk-hearth-x", "bearer  x ", "Bearer", "Bearer ", "Basic abc", "", "BEARER\tx", "Bearer\u00a0x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, ok := bearerToken(h)
		if !ok {
			if tok != "" {
				t.Fatalf("%q: token %q without ok", h, tok)
			}
			return
		}
		if tok == "" || tok != strings.TrimSpace(tok) || !strings.EqualFold(h[:7], "bearer ") || !strings.HasSuffix(strings.TrimSpace(h), tok) {
			t.Fatalf("%q gave token %q", h, tok)
		}
	})
}
