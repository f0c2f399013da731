package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hearth-llm/hearth/bench"
)

// findChromium returns the path of Debian's chromium, or "".
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// screenshotDir is where the browser test leaves its screenshots:
// $HEARTH_SCREENSHOTS when set, else a folder under the test's temporary
// directory.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("HEARTH_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("console screenshots: %s", dir)
	return dir
}

// TestConsoleInBrowser drives the console in headless Chromium against
// hearth up --sim 2x4090 while the benchmark's live mode runs agent
// sessions against it: the overview shows both GPUs with cache bars that
// fill and move, the hit-rate chart has points, a session lists its turns,
// a routing decision lists its candidates, and a key made on the Connect
// page opens the API. Each page is saved as a screenshot for review.
func TestConsoleInBrowser(t *testing.T) {
	chromium := findChromium()
	if chromium == "" {
		t.Skip("console browser test: chromium not installed; scripts/test installs it")
	}
	if testing.Short() {
		t.Skip("console browser test: runs live agent sessions for about half a minute; skipped with -short")
	}
	shots := screenshotDir(t)
	// 30 chart points over 30 s: a point a second, so that the chart
	// fills within the test.
	baseURL := startUpWithConsole(t, 500*time.Millisecond, 30*time.Second)

	// Load: a few agent sessions with short tool pauses, in real time.
	live, err := bench.NewLive(bench.LiveConfig{Target: baseURL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	plan := bench.Plan{
		Policies: []string{"target"},
		Levels:   []int{6},
		Workload: func(sessions int) (bench.Workload, error) {
			return bench.NewAgentic(bench.AgenticConfig{
				Seed: 11, Sessions: sessions, Steps: 10, PrefixTokens: 3000,
				TaskTokens:   bench.IntRange{Min: 200, Max: 400},
				AnswerTokens: bench.IntRange{Min: 30, Max: 80},
				ResultTokens: bench.IntRange{Min: 200, Max: 900},
				ToolPause:    bench.Uniform{Min: 200 * time.Millisecond, Max: 900 * time.Millisecond},
				Duration:     5 * time.Minute,
			})
		},
	}
	loadCtx, stopLoad := context.WithCancel(context.Background())
	loadDone := make(chan error, 1)
	go func() {
		_, err := bench.RunPlan(loadCtx, plan, live)
		loadDone <- err
	}()
	stop := func() {
		if stopLoad == nil {
			return
		}
		stopLoad()
		stopLoad = nil
		if err := <-loadDone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("load: %v", err)
		}
	}
	defer stop()

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	// The first Run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(browser, chromedp.Navigate(baseURL+"/")); err != nil {
		t.Fatalf("open %s/: %v", baseURL, err)
	}
	// Every later step gets its own deadline.
	step := func(d time.Duration) (context.Context, context.CancelFunc) { return context.WithTimeout(browser, d) }
	screenshot := func(t *testing.T, name string) {
		t.Helper()
		ctx, cancel := step(30 * time.Second)
		defer cancel()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	poll := func(t *testing.T, what, expr string, d time.Duration) string {
		t.Helper()
		ctx, cancel := step(d + 5*time.Second)
		defer cancel()
		for {
			v, err := chromedp.Run(ctx, chromedp.Poll[string](expr, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(d)))
			// A page that is still loading can drop the JavaScript context
			// the poll runs in; poll again in the new one.
			if err != nil && strings.Contains(err.Error(), "Cannot find context with specified id") && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return v
		}
	}

	t.Run("overview", func(t *testing.T) {
		ctx, cancel := step(10 * time.Second)
		defer cancel()
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil || !strings.HasSuffix(loc, "/console/") {
			t.Fatalf("/ led to %q (%v), want the console", loc, err)
		}
		// Both GPUs, each with cache in use or kept for reuse.
		const barsJS = `(() => {
			const cards = [...document.querySelectorAll('#gpus article.card')];
			if (cards.length !== 2 || !cards.every(c => c.querySelector('h2').textContent.includes('4090'))) return '';
			const w = (b, c) => parseFloat(b.querySelector('rect.' + c).getAttribute('width'));
			const bars = cards.map(c => c.querySelector('svg.kvbar'));
			if (!bars.every(b => b && w(b, 'kv-used') + w(b, 'kv-cached') > 0)) return '';
			return bars.map(b => w(b, 'kv-used') + '/' + w(b, 'kv-cached')).join(' ') + ' ' +
				[...document.querySelectorAll('#gpus .legend')].map(l => l.textContent).join(' ');
		})()`
		first := poll(t, "both GPU cards with non-empty cache bars", barsJS, 60*time.Second)
		t.Logf("cache bars: %s", first)
		// The page is live: the bars move as the sessions run.
		changed := poll(t, "cache bars changing over time",
			fmt.Sprintf(`(() => { const now = %s; return now !== '' && now !== %q ? now : ''; })()`, barsJS, first), 30*time.Second)
		t.Logf("cache bars later: %s", changed)
		points := poll(t, "hit-rate chart with a line of measured points on each GPU",
			`(() => { const ls = [...document.querySelectorAll('#gpus svg.chart')].map(c => [...c.querySelectorAll('polyline.line-measured')].map(p => p.getAttribute('points').trim()).join(' ')); return ls.length === 2 && ls.every(l => l.split(/\s+/).length >= 3) ? ls.join(' | ') : ''; })()`,
			60*time.Second)
		t.Logf("measured hit-rate line: %s", points)
		screenshot(t, "overview.png")
	})

	t.Run("sessions", func(t *testing.T) {
		ctx, cancel := step(10 * time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(baseURL+"/console/sessions")); err != nil {
			t.Fatal(err)
		}
		// A session that has run a few turns.
		id := poll(t, "a session with turns",
			`(() => { const s = [...document.querySelectorAll('details.session')].find(d => parseInt(d.querySelector('[data-label=turns]').textContent) >= 2); return s ? s.id : ''; })()`,
			60*time.Second)
		ctx, cancel = step(10 * time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#"+id+" > summary"))); err != nil {
			t.Fatalf("open session %s: %v", id, err)
		}
		rows := poll(t, "the session's turns",
			fmt.Sprintf(`(() => { const d = document.getElementById(%q); if (!d || !d.open) return ''; const n = d.querySelectorAll('table.turns tbody tr').length; return n >= 2 ? String(n) : ''; })()`, id),
			10*time.Second)
		t.Logf("session %s shows %s turns", id, rows)
		screenshot(t, "sessions.png")
	})

	t.Run("requests", func(t *testing.T) {
		ctx, cancel := step(10 * time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(baseURL+"/console/requests")); err != nil {
			t.Fatal(err)
		}
		cands := poll(t, "a decision with both candidates",
			`(() => { const d = document.querySelector('section.decision'); if (!d) return ''; const rows = [...d.querySelectorAll('table.candidates tbody tr')]; return rows.length === 2 && d.querySelector('tr.winner') ? rows.map(r => r.textContent.replace(/\s+/g, ' ').trim()).join(' | ') : ''; })()`,
			30*time.Second)
		t.Logf("candidates: %s", cands)
		screenshot(t, "requests.png")
	})

	// A key makes the API require one, which would fail the load: stop it.
	stop()

	t.Run("connect", func(t *testing.T) {
		ctx, cancel := step(20 * time.Second)
		defer cancel()
		if err := chromedp.Do(ctx,
			chromedp.Navigate(baseURL+"/console/connect"),
			chromedp.Click(chromedp.CSS("#client-claude-code form button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS("#client-claude-code p.notice")),
		); err != nil {
			t.Fatalf("create a key on the Connect page: %v", err)
		}
		snippet, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#snippet-claude-code")))
		if err != nil {
			t.Fatal(err)
		}
		key := regexp.MustCompile(`sk-hearth-[A-Za-z0-9_-]+`).FindString(snippet)
		if key == "" || !strings.Contains(snippet, baseURL) {
			t.Fatalf("snippet has no key or the wrong base URL:\n%s", snippet)
		}
		screenshot(t, "connect.png")
		for _, tc := range []struct {
			name, key string
			want      int
		}{
			{"without a key", "", 401},
			{"with the Connect page's key", key, 200},
		} {
			if got := postMessages(t, baseURL, "browser-key", tc.key); got != tc.want {
				t.Errorf("API call %s: %d, want %d", tc.name, got, tc.want)
			}
		}
		// The browser that made the first key stays logged in.
		if err := chromedp.Do(ctx, chromedp.Navigate(baseURL+"/console/"), chromedp.WaitVisible(chromedp.CSS("#gpus"))); err != nil {
			t.Errorf("console after creating a key: %v", err)
		}
	})
}
