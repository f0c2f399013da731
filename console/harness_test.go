package console

import (
	"bytes"
	"context"
	"flag"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/golden")

// harness is a console mounted on a fiber app, with fake sources, an
// in-memory store and a fake clock.
type harness struct {
	c     *Console
	app   *fiber.App
	src   *fakeSources
	store *MemoryStore
	clock *fakeClock
	peer  net.IP // the address requests appear to come from
}

type harnessOption func(*Config, *Deps)

func withKeyRequired(required bool) harnessOption {
	return func(_ *Config, d *Deps) {
		d.KeyRequired = func(context.Context) bool { return required }
	}
}

// fakeKeyless lists fixed clients as seen without a key.
type fakeKeyless []KeylessClient

func (f fakeKeyless) ClientsWithoutKey(_ context.Context, since time.Time) ([]KeylessClient, error) {
	var out []KeylessClient
	for _, c := range f {
		if !c.LastSeen.Before(since) {
			out = append(out, c)
		}
	}
	return out, nil
}

func withKeyless(clients []KeylessClient) harnessOption {
	return func(_ *Config, d *Deps) { d.Keyless = fakeKeyless(clients) }
}

func withConfig(fn func(*Config)) harnessOption {
	return func(c *Config, _ *Deps) { fn(c) }
}

func newHarness(t testing.TB, src *fakeSources, opts ...harnessOption) *harness {
	t.Helper()
	if src == nil {
		src = &fakeSources{}
	}
	h := &harness{
		src:   src,
		clock: newFakeClock(t0),
		peer:  net.IPv4(127, 0, 0, 1),
	}
	h.store = NewMemoryStore(Settings{
		Policy:   "kv",
		Policies: []string{"round_robin", "random", "least_loaded", "kv", "hearth"},
		Models:   []string{"qwen3-14b"},
		Aliases:  []Alias{{From: "claude-*", To: "qwen3-14b"}, {From: "gpt-5", To: "qwen3-14b"}},
	}, h.clock)
	cfg := Config{Location: time.UTC, APIBaseURL: "http://hearth.lan:8080"}
	deps := Deps{
		Engines: src, Router: src, Traffic: src, KVStores: src, Models: src,
		Keys: h.store, Settings: h.store,
		Clock:  h.clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, o := range opts {
		o(&cfg, &deps)
	}
	c, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	c.peerIP = func(*fiber.Ctx) net.IP { return h.peer }
	c.passwordIterations = 1000 // the real count costs ~0.2 s a login
	h.c = c
	h.app = fiber.New(fiber.Config{DisableStartupMessage: true})
	c.Register(h.app)
	return h
}

// tick runs one hub step at the current fake time, advancing it by d
// first; it records history the way the running hub does.
func (h *harness) tick(d time.Duration) {
	h.clock.Advance(d)
	h.c.produce(context.Background(), h.clock.Now(), nil, func(Topic, []byte) {})
}

type request struct {
	method string
	path   string
	form   url.Values
	header map[string]string
	cookie *http.Cookie
	// noOrigin sends a POST without the Origin header a browser adds.
	noOrigin bool
}

func (h *harness) do(t testing.TB, r request) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if r.form != nil {
		body = strings.NewReader(r.form.Encode())
	}
	if r.method == "" {
		r.method = http.MethodGet
	}
	req := httptest.NewRequest(r.method, "http://127.0.0.1:8080"+r.path, body)
	req.RequestURI = "" // origin-form request line, as browsers send it
	if r.form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range r.header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	if r.method == http.MethodPost && req.Header.Get("Origin") == "" && !r.noOrigin {
		req.Header.Set("Origin", "http://"+req.Host) // what browsers send with every form
	}
	if r.cookie != nil {
		req.AddCookie(r.cookie)
	}
	resp, err := h.app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func sessionCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == cookieName && c.Value != "" {
			return c
		}
	}
	return nil
}

// checkPage checks a page's text (entities unescaped) holds every want and
// none of lacks, then compares the page with its golden file name.
func checkPage(t *testing.T, name, body string, want, lacks []string) {
	t.Helper()
	text := html.UnescapeString(body)
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("page lacks %q", w)
		}
	}
	for _, l := range lacks {
		if strings.Contains(text, l) {
			t.Errorf("page holds %q", l)
		}
	}
	checkGolden(t, name, []byte(body))
}

// checkGolden compares got with testdata/golden/name, or rewrites the file
// with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; run with -update if the change is intended\n%s", name, firstDifference(want, got))
	}
}

func firstDifference(want, got []byte) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	lo := max(i-80, 0)
	return "at byte " + strconv.Itoa(i) + ":\nwant …" + string(want[lo:min(i+80, len(want))]) + "\ngot  …" + string(got[lo:min(i+80, len(got))])
}
