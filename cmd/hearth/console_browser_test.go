package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/hearth-llm/hearth/bench"
	hruntime "github.com/hearth-llm/hearth/runtime"
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

// chromiumTempDir gives the browser the test's own temporary directory:
// Chromium puts its singleton socket in a directory of $TMPDIR
// (org.chromium.Chromium.*) and leaves it there when it is stopped.
func chromiumTempDir(t *testing.T) chromedp.ExecAllocatorOption {
	return chromedp.Env("TMPDIR=" + t.TempDir())
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

// browserHang bounds each step of the browser test and each of its
// requests. It only stops a test that hangs: what a step waits for takes a
// push or two (half a second each) on an idle machine.
const browserHang = 90 * time.Second

// TestConsoleInBrowser drives the console in headless Chromium against
// hearth up --sim 2x4090. Every wait is for something the test's own
// requests make true, so that a busy machine only makes it slower: a
// prompt of known size shows up, without a reload, as cached blocks on the
// GPU that served it; a session's second turn shows up in its open row;
// a routing decision lists both GPUs. The benchmark's live mode runs agent
// sessions meanwhile, so that the hit-rate charts fill and the
// screenshots, saved for review, show a busy cluster.
func TestConsoleInBrowser(t *testing.T) {
	chromium := findChromium()
	if chromium == "" {
		t.Skip("console browser test: chromium not installed; scripts/test installs it")
	}
	t.Parallel()
	if testing.Short() {
		t.Skip("console browser test: runs live agent sessions; skipped with -short")
	}
	shots := screenshotDir(t)
	// 30 chart points over 30 s: a point a second, so that the chart
	// fills within the test.
	baseURL := startUpWithConsole(t, 500*time.Millisecond, 30*time.Second)

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
		chromiumTempDir(t),
		chromedp.WindowSize(1280, 1000),
	)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	// The first Run starts the browser; it must not carry a timeout. The
	// first page gets its SSE extension late, the order a busy machine
	// can produce, which the overview below must survive.
	if err := chromedp.Do(browser, lateExtension(), chromedp.Navigate(baseURL+"/")); err != nil {
		t.Fatalf("open %s/: %v", baseURL, err)
	}
	// Every later step gets its own deadline, browserHang.
	step := func() (context.Context, context.CancelFunc) { return context.WithTimeout(browser, browserHang) }
	do := func(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := step()
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	screenshot := func(t *testing.T, name string) {
		t.Helper()
		ctx, cancel := step()
		defer cancel()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// wait evaluates expr now and after every change to the page (a pushed
	// update morphs it) until it returns a non-empty string.
	wait := func(t *testing.T, what, expr string) string {
		t.Helper()
		ctx, cancel := step()
		defer cancel()
		for {
			v, err := chromedp.Run(ctx, chromedp.Poll[string](expr, chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0)))
			// A page that is still loading can drop the JavaScript context
			// the poll runs in; Poll waits for the new one.
			if err != nil && strings.Contains(err.Error(), "Cannot find context with specified id") && ctx.Err() == nil {
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return v
		}
	}

	var load *liveLoad
	defer func() { load.stop(t) }()

	t.Run("overview", func(t *testing.T) {
		ctx, cancel := step()
		defer cancel()
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil || !strings.HasSuffix(loc, "/console/") {
			t.Fatalf("/ led to %q (%v), want the console", loc, err)
		}
		// Both GPUs, as worker:running:cached blocks. A card caught while
		// the live update swaps it may lack a part: not yet, not an error.
		const cardsJS = `(() => { try {
			const cards = [...document.querySelectorAll('#gpus article.card')];
			if (cards.length !== 2 || !cards.every(c => c.querySelector('h2').textContent.includes('4090') && c.querySelector('svg.kvbar'))) return '';
			const n = (c, i) => parseInt(c.querySelector('.legend li:nth-child(' + i + ') .muted').textContent.replace(/[()]/g, ''));
			return cards.map(c => c.querySelector('.sub').textContent.split(' · ').pop().trim() + ':' + n(c, 1) + ':' + n(c, 2)).join(' ');
		} catch (e) { return ''; } })()`
		before := wait(t, "both GPU cards with cache bars", cardsJS)
		t.Logf("cache before any request: %s", before)
		// Before any request an engine holds only what its KV-event
		// self-check sent it: a one-block request, then the probe.
		for _, card := range strings.Fields(before) {
			parts := strings.Split(card, ":")
			running, _ := strconv.Atoi(parts[len(parts)-2])
			cached, _ := strconv.Atoi(parts[len(parts)-1])
			if running != 0 || cached > 1+hruntime.KVProbeBlocks {
				t.Fatalf("card %s shows cache in use before any request beyond the self-check's %d blocks", card, 1+hruntime.KVProbeBlocks)
			}
		}
		// A prompt of known size lands on one GPU. The page, loaded
		// before, can only show it through a pushed update.
		worker, blocks := ask(t, baseURL, "browser-overview", uniquePrompt(t, 400))
		t.Logf("prompt of %d blocks served by %s", blocks, worker)
		// Every full block of the prompt is held or kept for reuse on
		// that GPU; the other GPU still holds no more than the self-check's.
		after := wait(t, fmt.Sprintf("the cache of %s holding the prompt's %d blocks", worker, blocks),
			fmt.Sprintf(`(() => { const now = %s; if (now === '') return '';
				const ok = now.split(' ').every(c => { const [w, used, cached] = c.split(':'); const n = +used + +cached; return w === %q ? n >= %d : n <= %d; });
				return ok ? now : ''; })()`, cardsJS, worker, blocks-1, 1+hruntime.KVProbeBlocks))
		t.Logf("cache after: %s", after)
	})

	load = startLiveLoad(t, baseURL)

	t.Run("charts", func(t *testing.T) {
		// Each GPU's chart: one unbroken measured line, and the router's
		// prediction drawn as a line of its own.
		points := wait(t, "hit-rate chart with one measured line and a predicted line on each GPU",
			`(() => { const line = (c, cls) => [...c.querySelectorAll('polyline.' + cls)].map(p => p.getAttribute('points').trim());
				const charts = [...document.querySelectorAll('#gpus svg.chart')];
				const ok = charts.length === 2 && charts.every(c => { const m = line(c, 'line-measured'), p = line(c, 'line-predicted');
					return m.length === 1 && m[0].split(/\s+/).length >= 3 && p.length >= 1 && p.some(l => l.split(/\s+/).length >= 3); });
				return ok ? charts.map(c => line(c, 'line-measured')[0] + ' / ' + line(c, 'line-predicted').join(' ')).join(' | ') : ''; })()`)
		t.Logf("hit-rate lines, measured / predicted: %s", points)
		screenshot(t, "overview.png")
	})

	t.Run("tiers", func(t *testing.T) {
		// The engines have host RAM and share the node's SSD store (hearth
		// up's default --kvbm ram+ssd): each card has the three tier bars,
		// and the store's panel counts the blocks the live sessions wrote.
		got := wait(t, "GPU, RAM and SSD bars on each card and a store panel holding blocks",
			`(() => { const cards = [...document.querySelectorAll('#gpus article.card:not(.store)')];
				const bars = c => ['GPU', 'RAM', 'SSD'].every(n => c.querySelector('.tier[data-tier="' + n + '"] svg.tierbar'));
				const store = document.querySelector('article.card.store');
				if (cards.length !== 2 || !cards.every(bars) || !store) return '';
				const blocks = [...store.querySelectorAll('dt')].find(d => d.textContent === 'Blocks');
				const n = blocks ? parseInt(blocks.nextElementSibling.textContent.replace(/,/g, '')) : 0;
				return n > 0 ? 'store blocks ' + n : ''; })()`)
		t.Logf("tiers: %s", got)
	})

	t.Run("sessions", func(t *testing.T) {
		do(t, "open the sessions page", chromedp.Navigate(baseURL+"/console/sessions"))
		session := "browser-session-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		row := func(turns int) string {
			return fmt.Sprintf(`(() => { const d = [...document.querySelectorAll('details.session')].find(d => d.querySelector('summary [title]').title === %q); return d && d.querySelector('[data-label=turns]').textContent.trim() === '%d' ? d : null; })()`, session, turns)
		}
		first := uniquePrompt(t, 300)
		ask(t, baseURL, session, first)
		id := wait(t, "the session's first turn", fmt.Sprintf(`(() => { const d = %s; return d ? d.id : ''; })()`, row(1)))
		// Open the row by its id: the list reorders as the agent sessions
		// run, so a click at the row's position could open another.
		do(t, "open the session", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById(%q).querySelector('summary').click()`, id)))
		// The second turn extends the first; the open row shows both.
		ask(t, baseURL, session, first, "Done.", uniquePrompt(t, 100))
		rows := wait(t, "the session's second turn in its open row",
			fmt.Sprintf(`(() => { const d = %s; if (!d || !d.open) return ''; const n = d.querySelectorAll('table.turns tbody tr').length; return n === 2 ? String(n) : ''; })()`, row(2)))
		t.Logf("session %s shows %s turns", session, rows)
		// A side request is listed apart: the row still counts two turns.
		askSide(t, baseURL, session)
		wait(t, "the side request apart from the turns",
			fmt.Sprintf(`(() => { const d = %s; if (!d || !d.open) return ''; const n = d.querySelectorAll('table.sides tbody tr').length; return n === 1 && d.querySelectorAll('table.turns tbody tr').length === 2 ? 'yes' : ''; })()`, row(2)))
		screenshot(t, "sessions.png")
	})

	t.Run("requests", func(t *testing.T) {
		do(t, "open the requests page", chromedp.Navigate(baseURL+"/console/requests"))
		ask(t, baseURL, "browser-requests", uniquePrompt(t, 200))
		cands := wait(t, "a decision with both candidates",
			`(() => { const d = document.querySelector('section.decision'); if (!d) return ''; const rows = [...d.querySelectorAll('table.candidates tbody tr')]; return rows.length === 2 && d.querySelector('tr.winner') ? rows.map(r => r.textContent.replace(/\s+/g, ' ').trim()).join(' | ') : ''; })()`)
		t.Logf("candidates: %s", cands)
		screenshot(t, "requests.png")
	})

	// A key makes the API require one, which would fail the load: stop it.
	load.stop(t)

	t.Run("connect", func(t *testing.T) {
		// A client uses the API without a key, as the page says it may.
		if got := postMessages(t, baseURL, "browser-keyless", ""); got != 200 {
			t.Fatalf("API without a key before any exists: %d, want 200", got)
		}
		do(t, "open the Connect page", chromedp.Navigate(baseURL+"/console/connect"))
		note := wait(t, "the key note", `document.querySelector('#key-note')?.textContent ?? ''`)
		if !strings.Contains(note, "any key value") {
			t.Errorf("key note %q does not say that any key works", note)
		}
		// The first key asks first, listing the client it will lock out.
		do(t, "ask for a key", chromedp.Click(chromedp.CSS("#client-claude-code form button[type=submit]")))
		warning := wait(t, "the first key's warning listing claude-code",
			`(() => { const s = document.querySelector('#client-claude-code.confirm'); return s && s.querySelector('.keyless-clients')?.textContent.includes('claude-code') ? s.textContent.replace(/\s+/g, ' ') : ''; })()`)
		for _, want := range []string{"401", "The console will ask for a key"} {
			if !strings.Contains(warning, want) {
				t.Errorf("warning lacks %q: %s", want, warning)
			}
		}
		screenshot(t, "connect-first-key.png")
		if got := postMessages(t, baseURL, "browser-keyless", ""); got != 200 {
			t.Fatalf("API without a key before the confirmation: %d, want 200", got)
		}
		do(t, "confirm the first key",
			chromedp.Click(chromedp.CSS("#confirm-first-key")),
			chromedp.WaitVisible(chromedp.CSS("#client-claude-code p.notice")),
		)
		ctx, cancel := step()
		defer cancel()
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

// liveLoad is the benchmark's live mode running agent sessions against
// the daemon: a few sessions with short tool pauses, in real time.
type liveLoad struct {
	cancel context.CancelFunc
	done   chan error
}

func startLiveLoad(t *testing.T, baseURL string) *liveLoad {
	t.Helper()
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
				Duration:     10 * time.Minute,
			})
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &liveLoad{cancel: cancel, done: make(chan error, 1)}
	go func() {
		_, err := bench.RunPlan(ctx, plan, live)
		l.done <- err
	}()
	return l
}

// stop ends the load and reports how it ended; it does nothing on a nil or
// stopped load.
func (l *liveLoad) stop(t *testing.T) {
	t.Helper()
	if l == nil || l.cancel == nil {
		return
	}
	l.cancel()
	l.cancel = nil
	if err := <-l.done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("load: %v", err)
	}
}

// uniquePrompt is about words words that no other prompt of the run
// starts with, so that none of its blocks is cached before it is sent.
func uniquePrompt(t *testing.T, words int) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d:", t.Name(), time.Now().UnixNano())
	for i := range words {
		fmt.Fprintf(&b, " w%d", i)
	}
	return b.String()
}

// ask sends a Claude Code turn of session, alternating user and assistant
// messages starting with the user, and returns the worker that served it
// and the prompt's size in blocks, from the x-hearth headers.
// browserTools is the one tool the test's turns carry.
const browserTools = `[{"name":"read_file","description":"Read a file of the workspace.","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}]`

func ask(t *testing.T, baseURL, session string, messages ...string) (worker string, promptBlocks int) {
	t.Helper()
	return askClaude(t, baseURL, session, browserTools, messages...)
}

// askSide sends a side request to a session: a Claude Code topic check,
// without tools.
func askSide(t *testing.T, baseURL, session string) {
	t.Helper()
	askClaude(t, baseURL, session, "", "Does this start a new subject? "+uniquePrompt(t, 20))
}

func askClaude(t *testing.T, baseURL, session, tools string, messages ...string) (worker string, promptBlocks int) {
	t.Helper()
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	// Claude Code sends its tools with every turn; a request without
	// them would be one of its side requests.
	req := struct {
		Model     string          `json:"model"`
		MaxTokens int             `json:"max_tokens"`
		Messages  []message       `json:"messages"`
		Tools     json.RawMessage `json:"tools,omitempty"`
	}{Model: "claude-sonnet-4-5", MaxTokens: 8}
	if tools != "" {
		req.Tools = json.RawMessage(tools)
	}
	for i, m := range messages {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		req.Messages = append(req.Messages, message{role, m})
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), browserHang)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("User-Agent", "claude-cli/2.1.197 (external, sdk-cli)")
	hreq.Header.Set("X-Claude-Code-Session-Id", session)
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("session %s: %s: %s", session, resp.Status, out)
	}
	worker = resp.Header.Get("x-hearth-worker")
	promptBlocks, err = strconv.Atoi(resp.Header.Get("x-hearth-prompt-blocks"))
	if worker == "" || err != nil || promptBlocks <= 0 {
		t.Fatalf("session %s: x-hearth-worker %q, x-hearth-prompt-blocks %q", session, worker, resp.Header.Get("x-hearth-prompt-blocks"))
	}
	return worker, promptBlocks
}

// lateExtension makes the next page's SSE extension (hx-sse.min.js) arrive
// only after htmx has run, as it can on a busy machine or over a slow link:
// the browser holds the request until the page has set window.htmx. A page
// that only goes live when the extension is registered before htmx
// processes the document then stays static.
func lateExtension() chromedp.Action[chromedp.Void] {
	ran := make(chan struct{})
	var once sync.Once
	// window.htmx is set once, by htmx.min.js's "var htmx = ...".
	const trap = `Object.defineProperty(window, 'htmx', {configurable: true, set(v) {
		Object.defineProperty(window, 'htmx', {value: v, writable: true, configurable: true});
		window.hearthHTMXRan();
	}});`
	return chromedp.Steps(
		chromedp.ExposeFunc("hearthHTMXRan", func(context.Context, struct{}) (chromedp.Void, error) {
			once.Do(func() { close(ran) })
			return chromedp.Void{}, nil
		}),
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: trap}); err != nil {
				return fmt.Errorf("add the htmx trap: %w", err)
			}
			paused := chromedp.Events(ctx, fetch.RequestPaused)
			go func() {
				for ev, err := range paused {
					if err != nil {
						return
					}
					select {
					case <-ran:
					case <-ctx.Done():
						return
					}
					// Errors end the page load, which the test reports.
					chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
					chromedp.Call(ctx, fetch.Disable, cdp.Empty{})
					return
				}
			}()
			_, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/hx-sse.min.js"}}})
			return err
		}),
	)
}
