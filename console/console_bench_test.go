package console

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/a-h/templ"

	"github.com/hearth-llm/hearth/console/components"
)

// benchHarness is the load: 4 GPUs, 200 agent sessions and 1,000
// requests a minute over the 5-minute window (5,000 requests, the router's
// latest 1,000 decisions), with ten minutes of chart history.
func benchHarness(b *testing.B) *harness {
	b.Helper()
	h := newHarness(b, loadedSources(t0, 4, 200, 1000), withKeyRequired(false))
	for range 300 {
		h.src.update(func(f *fakeSources) {
			for j := range f.engines {
				f.engines[j].PrefixQueries += 20_000
				f.engines[j].PrefixHits += 15_000
				f.engines[j].GenerationTokens += 300
			}
		})
		h.tick(2 * time.Second)
	}
	return h
}

// BenchmarkRenderPage measures what one page load costs the daemon once
// the snapshot exists: computing the view model and rendering the HTML.
func BenchmarkRenderPage(b *testing.B) {
	h := benchHarness(b)
	snap := h.c.snapshot(context.Background())
	l := components.Layout{Base: "/console", Static: "/console/static"}
	pages := []struct {
		name string
		page func() templ.Component
	}{
		{"overview", func() templ.Component { return components.Overview(l, overviewVM(h.c.cfg, snap)) }},
		{"sessions", func() templ.Component { return components.Sessions(l, sessionsVM(h.c.cfg, snap)) }},
		{"requests", func() templ.Component { return components.Requests(l, requestsVM(h.c.cfg, snap)) }},
		{"settings", func() templ.Component { return components.Settings(l, h.c.settingsVM(context.Background())) }},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if err := p.page().Render(context.Background(), &buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len()), "bytes/page")
		})
	}
}

// BenchmarkPageHandler is a whole GET through fiber (app.Test's in-memory
// connection), snapshot included.
func BenchmarkPageHandler(b *testing.B) {
	h := benchHarness(b)
	for _, path := range []string{"/console/", "/console/sessions", "/console/requests", "/console/connect", "/console/settings"} {
		b.Run(path, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("GET", "http://127.0.0.1:8080"+path, nil)
				req.RequestURI = ""
				resp, err := h.app.Test(req, -1)
				if err != nil || resp.StatusCode != 200 {
					b.Fatal(err, resp.StatusCode)
				}
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkTick is one hub tick with every live page watched: sample the
// sources, fold them into the history, render the three fragments.
func BenchmarkTick(b *testing.B) {
	h := benchHarness(b)
	now := h.clock.Now()
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(2 * time.Second)
		h.c.produce(context.Background(), now, topics, func(Topic, []byte) {})
	}
}

// BenchmarkPublish is the producer's side of pushing one update: offering
// an encoded frame to every subscriber. Subscribers here never read, so
// after their buffers fill every offer is a drop, the slow-browser case.
func BenchmarkPublish(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("broadcast/%d-subscribers", n), func(b *testing.B) {
			h := newHub(Config{SubscriberBuffer: 4, MaxSubscribers: n}, newFakeClock(t0), nil)
			for range n {
				if _, err := h.Subscribe(TopicOverview); err != nil {
					b.Fatal(err)
				}
			}
			frame := encodeEvent(1, bytes.Repeat([]byte("<div>x</div>"), 2000))
			b.ReportAllocs()
			for b.Loop() {
				h.broadcast(frame)
			}
		})
	}
	// Publish encodes the fragment once, whatever the number of subscribers.
	b.Run("publish-24KiB/10-subscribers", func(b *testing.B) {
		h := newHub(Config{SubscriberBuffer: 4, MaxSubscribers: 10}, newFakeClock(t0), nil)
		for range 10 {
			h.Subscribe(TopicOverview)
		}
		fragments := [2][]byte{bytes.Repeat([]byte("<div>a</div>"), 2000), bytes.Repeat([]byte("<div>b</div>"), 2000)}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			h.Publish(TopicOverview, fragments[i&1]) // alternate, so none is skipped as unchanged
			i++
		}
	})
}
