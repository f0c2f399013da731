package console

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium, or "".
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browserStep bounds each step of a browser test. It only stops a test
// that hangs: what a step waits for takes a push or two.
const browserStep = 60 * time.Second

// TestClusterPageInBrowser drives the Cluster page in headless Chromium
// against a console on real HTTP with a fake cluster of three nodes, one
// down, and a machine asking to join: the owner sets the password, sees
// the topology and the join token, revokes a peer and accepts the joiner
// through the confirmation dialogs, and the page shows both through its
// live stream, without a reload.
func TestClusterPageInBrowser(t *testing.T) {
	chromium := chromiumPath()
	if chromium == "" {
		t.Skip("cluster browser test: chromium not installed; scripts/test installs it")
	}
	src := threeNodes(time.Now())
	src.clock = realNow{}
	h := newHarness(t, nil, withKeyRequired(false), withOwner(), withCluster(src),
		withConfig(func(c *Config) { c.Interval = 200 * time.Millisecond }),
		func(_ *Config, d *Deps) { d.Clock = nil }) // real time: the hub's pushes are what the test waits for
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go h.app.Listener(ln)
	ctx, cancel := context.WithCancel(context.Background())
	hubDone := make(chan error, 1)
	go func() { hubDone <- h.c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-hubDone
		h.app.Shutdown()
	})
	base := "http://" + ln.Addr().String() + "/console"

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1000),
		// Chromium leaves its singleton socket's directory in $TMPDIR.
		chromedp.Env("TMPDIR="+t.TempDir()),
	)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	// The first Run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(browser, chromedp.Navigate(base+"/setup")); err != nil {
		t.Fatalf("open the setup page: %v", err)
	}
	// Every confirmation is read and accepted, as the owner would.
	var dialogsMu sync.Mutex
	var dialogs []string
	opening := chromedp.Events(browser, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range opening {
			if err != nil {
				return
			}
			dialogsMu.Lock()
			dialogs = append(dialogs, ev.Message)
			dialogsMu.Unlock()
			chromedp.Call(browser, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	do := func(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, browserStep)
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// wait evaluates expr until it returns a non-empty string.
	wait := func(t *testing.T, what, expr string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, browserStep)
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
	screenshot := func(t *testing.T, name string) {
		t.Helper()
		dir := os.Getenv("HEARTH_SCREENSHOTS")
		if dir == "" {
			dir = t.TempDir()
		}
		ctx, cancel := context.WithTimeout(browser, browserStep)
		defer cancel()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", filepath.Join(dir, name))
	}
	const password = "a long owner password"
	wait(t, "the setup form", `document.querySelector("form[action$='/setup']") ? 'yes' : ''`)
	wait(t, "the setup submitted", fmt.Sprintf(`(() => { const f = document.querySelector("form[action$='/setup']");
		f.querySelector('[name=token]').value = %q; f.querySelector('[name=password]').value = %q; f.querySelector('[name=confirm]').value = %q;
		f.requestSubmit(); return 'ok'; })()`, h.c.SetupToken(), password, password))
	wait(t, "the overview, logged in as the owner", `(location.pathname === '/console/' && document.querySelector('form.logout')) ? 'yes' : ''`)

	// nodeStates is "name:state" of every node card, in order.
	const nodeStates = `[...document.querySelectorAll('#cluster-live article.node')].map(a => a.querySelector('h2').firstChild.textContent.trim() + ':' + a.dataset.state).join(' ')`

	t.Run("topology", func(t *testing.T) {
		do(t, "open the Cluster page from the nav", chromedp.Click(chromedp.CSS(`nav a[href$="/cluster"]`)))
		got := wait(t, "three nodes, one down", `(() => { const s = `+nodeStates+`; return s === 'rig0:up rig1:up rig2:down' ? s : ''; })()`)
		t.Logf("nodes: %s", got)
		links := wait(t, "a link to each peer", `[...document.querySelectorAll('svg.cluster-map line.link')].map(l => l.getAttribute('class')).join(',')`)
		if links != "link link-up,link link-down" {
			t.Errorf("map links %q, want one up and one down", links)
		}
		token := wait(t, "the join token", `document.querySelector('#join-command')?.innerText ?? ''`)
		if !strings.Contains(token, "hearth up --join "+testJoinToken) {
			t.Errorf("join command %q", token)
		}
		// The owner's buttons are shown; this node has none.
		visible := wait(t, "the revoke buttons", `[...document.querySelectorAll('button.revoke')].filter(b => b.offsetParent !== null).length + ''`)
		if visible != "2" {
			t.Errorf("%s revoke buttons visible, want 2 (the peers)", visible)
		}
		// The page is live: a peer that goes quiet turns suspect on a push.
		src.mu.Lock()
		src.cluster.Nodes[2].State = NodeSuspect // rig1
		src.mu.Unlock()
		wait(t, "rig1 suspect without a reload", `(() => { const s = `+nodeStates+`; return s.includes('rig1:suspect') ? s : ''; })()`)
		src.mu.Lock()
		src.cluster.Nodes[2].State = NodeUp
		src.mu.Unlock()
		wait(t, "rig1 up again", `(() => { const s = `+nodeStates+`; return s.includes('rig1:up') ? s : ''; })()`)
		screenshot(t, "cluster.png")
	})

	t.Run("revoke", func(t *testing.T) {
		do(t, "click Revoke on rig1", chromedp.Click(chromedp.CSS(`article[data-node="n-up"] button.revoke`)))
		msg := wait(t, "the answer", `document.querySelector('#cluster-result .notice, #cluster-result .problem')?.textContent ?? ''`)
		if !strings.Contains(msg, "Revoked node rig1") {
			t.Fatalf("answer %q", msg)
		}
		wait(t, "rig1 revoked on a push", `(() => { const s = `+nodeStates+`; return s.includes('rig1:revoked') && !document.querySelector('article[data-node="n-up"] button.revoke') ? s : ''; })()`)
	})

	t.Run("accept", func(t *testing.T) {
		code := wait(t, "the join request's code", `document.querySelector('#join-requests .join-code')?.textContent ?? ''`)
		if code != "482-193" {
			t.Errorf("code %q", code)
		}
		do(t, "click Accept", chromedp.Click(chromedp.CSS(`#join-requests tr[data-request="jr-1"] button.accept`)))
		msg := wait(t, "the answer", `(() => { const m = document.querySelector('#cluster-result .notice, #cluster-result .problem')?.textContent ?? ''; return m.includes('Revoked') ? '' : m; })()`)
		if !strings.Contains(msg, "Accepted laptop") {
			t.Fatalf("answer %q", msg)
		}
		got := wait(t, "laptop joined and no request left, on a push",
			`(() => { const s = `+nodeStates+`; return s.includes('laptop:up') && !document.querySelector('#join-requests') ? s : ''; })()`)
		t.Logf("nodes: %s", got)
		screenshot(t, "cluster-after.png")
	})

	if got, want := src.actions(), []string{"revoke:n-up", "accept:jr-1"}; !slices.Equal(got, want) {
		t.Errorf("the source was asked %v, want %v", got, want)
	}
	dialogsMu.Lock()
	defer dialogsMu.Unlock()
	if len(dialogs) != 2 || !strings.HasPrefix(dialogs[0], "Revoke node rig1?") || !strings.Contains(dialogs[1], "482-193") {
		t.Errorf("confirmations asked: %q", dialogs)
	}
}

type realNow struct{}

func (realNow) Now() time.Time { return time.Now() }
