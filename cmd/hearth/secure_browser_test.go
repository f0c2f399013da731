package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hearth-llm/hearth/clock"
	"github.com/hearth-llm/hearth/daemon"
)

// printedOutput records what hearth up prints and tells when the client
// settings, its last block, are out.
type printedOutput struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	once  sync.Once
}

func (p *printedOutput) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf.Write(b)
	if strings.Contains(p.buf.String(), "Press Ctrl-C") {
		p.once.Do(func() { close(p.ready) })
	}
	return len(b), nil
}

func (p *printedOutput) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.String()
}

// startUpPrinting runs hearth up on loopback and returns its base URL and
// what it printed once its engines are ready.
func startUpPrinting(t *testing.T, args []string, opts ...daemon.Option) (baseURL, printed string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env := &environment{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	cfg, err := parseUpFlags(env, append([]string{"--sim", "1x4090", "--speedup", "100", "--data-dir", t.TempDir()}, args...))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &printedOutput{ready: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- serveUp(ctx, out, slog.New(slog.DiscardHandler), cfg, ln, opts...) }()
	select {
	case <-out.ready:
	case err := <-done:
		cancel()
		t.Fatalf("hearth up ended early: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("hearth up: %v", err)
		}
	})
	return cfg.Scheme() + "://" + ln.Addr().String(), out.String()
}

var setupTokenLine = regexp.MustCompile(`setup token: (\S+)`)

// TestConsoleOwnerInBrowser drives the console's owner login in headless
// Chromium: the first-run setup with the printed token, logout, login, a
// cross-site form refused, and password guessing slowed down. The
// console's clock is a fake that moves only when the test moves it, so
// that a login wait lasts until the test ends it, however slow the
// browser.
func TestConsoleOwnerInBrowser(t *testing.T) {
	chromium := findChromium()
	if chromium == "" {
		t.Skip("console owner browser test: chromium not installed; scripts/test installs it")
	}
	t.Parallel()
	consoleClock := clock.NewFake(time.Now())
	baseURL, printed := startUpPrinting(t, nil, daemon.WithConsoleClock(consoleClock))
	m := setupTokenLine.FindStringSubmatch(printed)
	if m == nil {
		t.Fatalf("hearth up printed no setup token:\n%s", printed)
	}
	token := m[1]

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromiumTempDir(t),
	)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	if err := chromedp.Do(browser, chromedp.Navigate(baseURL+"/console/setup")); err != nil {
		t.Fatalf("open the setup page: %v", err)
	}
	// wait evaluates expr until it returns a non-empty string; a page in
	// the middle of a navigation has no context to evaluate in, which a
	// later try finds.
	wait := func(t *testing.T, what, expr string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, browserHang)
		defer cancel()
		for {
			v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
			if err == nil && v != "" {
				return v
			}
			select {
			case <-ctx.Done():
				page, _ := chromedp.Run(browser, chromedp.Evaluate[string](`location.href + "\n" + (document.body ? document.body.innerText : "")`))
				t.Fatalf("%s: %v (last error %v); the page:\n%s", what, ctx.Err(), err, page)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	do := func(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, browserHang)
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// fill sets a form's fields and submits it as a user's click does;
	// fresh (in an expression) is true on the page that answers.
	fill := func(t *testing.T, form string, fields map[string]string) {
		t.Helper()
		js := "(() => { const f = document.querySelector(" + jsString(form) + "); if (!f) return 'no form';"
		for name, v := range fields {
			js += " f.querySelector('[name=" + name + "]').value = " + jsString(v) + ";"
		}
		// The mark tells the page that answers from the one submitting.
		js += " document.body.dataset.submitted = '1'; f.requestSubmit(); return 'ok'; })()"
		ctx, cancel := context.WithTimeout(browser, browserHang)
		defer cancel()
		if v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js)); err != nil || v != "ok" {
			t.Fatalf("submit %s: %v %v", form, v, err)
		}
	}
	const password = "a long owner password"
	const fresh = `(document.body && !document.body.dataset.submitted)`
	onPage := func(path, text string) string {
		return fmt.Sprintf(`(%s && location.pathname === %s && document.body.innerText.includes(%s)) ? location.pathname : ''`, fresh, jsString(path), jsString(text))
	}

	t.Run("setup", func(t *testing.T) {
		fill(t, "form[action$='/setup']", map[string]string{"token": "not-the-token", "password": password, "confirm": password})
		wait(t, "a wrong token refused", onPage("/console/setup", "not the one hearth up printed"))
		fill(t, "form[action$='/setup']", map[string]string{"token": token, "password": password, "confirm": password})
		wait(t, "the overview, logged in", `(`+fresh+` && location.pathname === '/console/' && document.querySelector('form.logout')) ? 'yes' : ''`)
		if cookies := wait(t, "document.cookie", `document.cookie === '' ? 'hidden' : document.cookie`); cookies != "hidden" {
			t.Errorf("scripts can read the session cookie: %q", cookies)
		}
	})

	t.Run("cross-site POST refused", func(t *testing.T) {
		// Pages of other origins submit a form to the console while the
		// owner is logged in: one of another site (localhost against
		// 127.0.0.1), to which the browser withholds the SameSite=Strict
		// cookie, and one of the same site on another port, with which it
		// sends the cookie and only the origin check stands in the way.
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(baseURL, "http://"))
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="http://127.0.0.1:%s/console/settings">
				<input name="policy" value="round_robin"><input name="aliases" value=""></form>
				<script>document.getElementById('f').submit()</script>`, port)
		}))
		defer evil.Close()
		for _, tc := range []struct{ name, url, want string }{
			{"another site", strings.Replace(evil.URL, "127.0.0.1", "localhost", 1), "log in to the console"},
			{"the same site, another origin", evil.URL, "cross-site request refused"},
		} {
			do(t, "open the page of "+tc.name, chromedp.Navigate(tc.url))
			got := wait(t, "the console's answer to the form of "+tc.name, `(location.pathname === '/console/settings' && document.body) ? document.body.innerText : ''`)
			if !strings.Contains(got, tc.want) {
				t.Fatalf("the form of %s got %q, want %q", tc.name, got, tc.want)
			}
		}
		do(t, "back to the settings", chromedp.Navigate(baseURL+"/console/settings"))
		if v := wait(t, "the routing policy", `document.querySelector('select[name=policy]') ? document.querySelector('select[name=policy]').value : ''`); v == "round_robin" {
			t.Fatal("a forged form changed the routing policy")
		}
	})

	t.Run("logout and login", func(t *testing.T) {
		do(t, "open the overview", chromedp.Navigate(baseURL+"/console/"))
		fill(t, "form.logout", nil)
		wait(t, "the login page", onPage("/console/login", "owner's password"))
		do(t, "open the overview logged out", chromedp.Navigate(baseURL+"/console/"))
		wait(t, "a redirect to the login page", onPage("/console/login", "owner's password"))
		fill(t, "form[action$='/login']", map[string]string{"password": password})
		wait(t, "the overview, logged in again", `(`+fresh+` && location.pathname === '/console/' && document.querySelector('form.logout')) ? 'yes' : ''`)
		fill(t, "form.logout", nil)
		wait(t, "the login page", onPage("/console/login", "owner's password"))
	})

	t.Run("guessing slowed", func(t *testing.T) {
		for i := 1; ; i++ {
			fill(t, "form[action$='/login']", map[string]string{"password": fmt.Sprintf("guess %d", i)})
			msg := wait(t, "the answer to a guess", `(() => { const p = document.querySelector('.problem'); return (`+fresh+` && p) ? p.textContent + '#' : ''; })()`)
			if strings.Contains(msg, "Too many failed attempts") {
				t.Logf("guess %d: %s", i, msg[:strings.Index(msg, "#")])
				break
			}
			if i > 10 {
				t.Fatalf("10 wrong passwords in a row were all answered at once: %s", msg)
			}
		}
		// Even the right password waits now.
		fill(t, "form[action$='/login']", map[string]string{"password": password})
		wait(t, "the right password refused during the wait", `(() => { const p = document.querySelector('.problem'); return (`+fresh+` && p && p.textContent.includes('Too many')) ? 'yes' : ''; })()`)
		// Once the wait has passed, it opens the console.
		consoleClock.Advance(time.Minute)
		fill(t, "form[action$='/login']", map[string]string{"password": password})
		wait(t, "the overview, logged in after the wait", `(`+fresh+` && location.pathname === '/console/' && document.querySelector('form.logout')) ? 'yes' : ''`)
	})
}

// jsString quotes s for JavaScript.
func jsString(s string) string { return fmt.Sprintf("%q", s) }
