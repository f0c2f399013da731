package console

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// smallCluster is the "loaded" state of the golden pages: small enough to
// read in a diff, with every feature present (a busted turn, a winner among
// candidates, a GPU without utilisation, an engine error).
func smallCluster() *fakeSources {
	f := loadedSources(t0, 2, 3, 2)
	f.decisions = f.decisions[:3]
	f.engines[1].UtilizationPct, f.engines[1].TemperatureC, f.engines[1].PowerDrawW = -1, -1, -1
	f.engines = append(f.engines, Engine{
		Worker: "rig2-gpu0", Node: "rig2", GPU: "NVIDIA GeForce RTX 3090",
		UtilizationPct: -1, TemperatureC: -1, PowerDrawW: -1, PowerLimitW: -1, Err: "metrics: connection refused",
	})
	return f
}

// withModels is smallCluster serving three models on demand from one
// 4090: two resident together, one asleep, and the moves that led there.
func withModels() *fakeSources {
	f := smallCluster()
	f.residency = Residency{
		Models: []ResidentModel{
			{Name: "qwen3-4b-fp8", GPU: "ws/gpu0", State: ModelResident, Share: 0.29},
			{Name: "qwen3-8b-fp8", GPU: "ws/gpu0", State: ModelResident, InFlight: 2, Pinned: true, Share: 0.61},
			{Name: "qwen3-14b-fp8", GPU: "ws/gpu0", State: ModelSleeping, Share: 0.9},
		},
		Transitions: []ModelTransition{
			{Model: "qwen3-14b-fp8", GPU: "ws/gpu0", Kind: TransitionLoad, At: t0.Add(-10 * time.Minute), Took: 35 * time.Second},
			{Model: "qwen3-14b-fp8", GPU: "ws/gpu0", Kind: TransitionSleep, At: t0.Add(-5 * time.Minute), Took: 1500 * time.Millisecond},
			{Model: "qwen3-8b-fp8", GPU: "ws/gpu0", Kind: TransitionWake, At: t0.Add(-5*time.Minute + 2*time.Second), Took: 900 * time.Millisecond},
			{Model: "qwen3-4b-fp8", GPU: "ws/gpu0", Kind: TransitionLoad, At: t0.Add(-time.Minute), Took: 20 * time.Second, Err: "engine ws/gpu0/qwen3-4b-fp8 failed: out of memory"},
		},
	}
	return f
}

// warm runs hub ticks over two minutes while the engines' counters grow,
// so that charts and rates have history, then moves the traffic forward by
// the same two minutes so that it is recent again.
func warm(h *harness) {
	const ticks, every = 60, 2 * time.Second
	for i := range ticks {
		h.src.update(func(f *fakeSources) {
			for j := range f.engines {
				e := &f.engines[j]
				if e.Err != "" {
					continue // an engine that cannot be read reports nothing new
				}
				e.PrefixQueries += 20_000
				e.PrefixHits += int64(10_000 + 100*i + 1000*j)
				e.GenerationTokens += int64(150 + 50*j)
				if e.RAMTotalBlocks > 0 {
					e.RAMHitTokens += 3000
				}
				e.DiskHitTokens += int64(1000 + 500*j)
				e.LoadedBytes += int64(400+100*j) << 20
				e.StoredBytes += int64(300+50*j) << 20
				if e.UtilizationPct >= 0 {
					e.UtilizationPct = 60 + (i*7+j*13)%40
					e.TemperatureC = 55 + (i*3)%20
				}
				if e.PowerDrawW >= 0 {
					e.PowerDrawW = float64(200 + (i*37)%250)
				}
			}
			for j := range f.stores {
				st := &f.stores[j]
				st.Hits += int64(60 + 10*j)
				st.Misses += 40
				st.EvictedBlocks += 5
				st.ReadBytes += 200 << 20
				st.WrittenBytes += 300 << 20
				if j == 1 && i == ticks-10 {
					st.CorruptDropped += 2 // a torn write found on reading
				}
			}
		})
		h.tick(every)
	}
	h.src.update(func(f *fakeSources) {
		shift := ticks * every
		for i := range f.requests {
			f.requests[i].At = f.requests[i].At.Add(shift)
		}
		for i := range f.decisions {
			f.decisions[i].At = f.decisions[i].At.Add(shift)
		}
	})
	h.tick(0)
}

var (
	secretRE = regexp.MustCompile(`sk-hearth-[A-Za-z0-9_-]{43}`)
	hintRE   = regexp.MustCompile(`sk-hearth-…[A-Za-z0-9_-]{4}`)
)

func TestPagesGolden(t *testing.T) {
	failing := func(f *fakeSources) {
		f.enginesErr = errors.New("nvml: driver not loaded")
		f.routerErr = errors.New("router stopped")
		f.trafficErr = errors.New("gateway not running")
		f.storesErr = errors.New("store index unreadable")
	}
	tests := []struct {
		name    string
		sources func() *fakeSources
		setup   func(t *testing.T, h *harness)
		req     request
		status  int
		want    []string // fragments the page must contain
		keyless []KeylessClient
	}{
		{name: "overview-empty", req: request{path: "/console/"}, status: 200,
			want: []string{"No GPUs yet", `hx-sse:connect="/console/events/overview"`}},
		{name: "overview-loaded", sources: smallCluster, setup: func(_ *testing.T, h *harness) { warm(h) },
			req: request{path: "/console/"}, status: 200,
			want: []string{"NVIDIA GeForce RTX 4090", "<polyline", `class="kv-cached"`, "metrics: connection refused", "Cache size not reported",
				`class="sparkline spark-util"`, `class="mem-other"`, "python3 (pid 4242) 6.0 GiB", "context cut to 16,384 tokens",
				"Utilisation, temperature and power not reported",
				`data-tier="RAM"`, `class="tier-ssd"`, "SSD KV store", "Loaded/s", `class="badge bad" data-label="corrupt">2<`}},
		{name: "overview-error", sources: func() *fakeSources { f := smallCluster(); failing(f); return f },
			req: request{path: "/console/"}, status: 200,
			want: []string{"nvml: driver not loaded", "router stopped", "gateway not running", "Cannot read the SSD stores: KV stores: store index unreadable"}},
		{name: "overview-models", sources: withModels, req: request{path: "/console/"}, status: 200,
			want: []string{"Models on demand", "qwen3-8b-fp8", "2 in flight, pinned, 61% of the GPU", `data-label="away"`, `data-kind="wake"`,
				"900 ms", "35.0 s", `title="engine ws/gpu0/qwen3-4b-fp8 failed: out of memory"`}},
		{name: "overview-models-error", sources: func() *fakeSources { f := smallCluster(); f.modelsErr = errors.New("manager gone"); return f },
			req: request{path: "/console/"}, status: 200, want: []string{"Cannot read the models: models: manager gone", "No loads, wakes or sleeps yet."}},
		{name: "sessions-empty", req: request{path: "/console/sessions"}, status: 200,
			want: []string{"No agent sessions yet"}},
		{name: "sessions-loaded", sources: smallCluster, req: request{path: "/console/sessions"}, status: 200,
			want: []string{"<details", "prompt changed at block 3", "side request", `class="busted"`, "claude-code"}},
		{name: "sessions-error", sources: func() *fakeSources { f := smallCluster(); failing(f); return f },
			req: request{path: "/console/sessions"}, status: 200, want: []string{"gateway not running"}},
		{name: "requests-empty", req: request{path: "/console/requests"}, status: 200,
			want: []string{"No requests routed yet"}},
		{name: "requests-loaded", sources: smallCluster, req: request{path: "/console/requests"}, status: 200,
			want: []string{`class="winner"`, "lowest cost", "req-000000"}},
		{name: "requests-error", sources: func() *fakeSources { f := smallCluster(); failing(f); return f },
			req: request{path: "/console/requests"}, status: 200, want: []string{"router stopped"}},
		{name: "connect", req: request{path: "/console/connect"}, status: 200,
			want: []string{"ANTHROPIC_BASE_URL='http://hearth.lan:8080'", `wire_api = "responses"`, `base_url = "http://hearth.lan:8080/v1"`,
				`"npm": "@ai-sdk/openai-compatible"`, `"baseURL": "http://hearth.lan:8080/v1"`, `env_key = "HEARTH_API_KEY"`,
				"No API key is set", "any key value", "export HEARTH_API_KEY='hearth'"}},
		{name: "connect-first-key-confirm", req: request{method: "POST", path: "/console/keys",
			form: url.Values{"name": {"codex"}, "client": {"codex"}}, header: map[string]string{"HX-Request": "true"}},
			keyless: []KeylessClient{{Client: "opencode", LastSeen: t0.Add(-10 * time.Minute)}, {Client: "claude-code", LastSeen: t0}},
			status:  200, want: []string{`id="client-codex"`, "Create the first API key?", "claude-code", "just now", "opencode", "10 min ago",
				"get 401", "The console will ask for a key", `name="confirm" value="yes"`}},
		{name: "connect-key-created", req: request{method: "POST", path: "/console/keys",
			form: url.Values{"name": {"codex"}, "client": {"codex"}, "confirm": {"yes"}}, header: map[string]string{"HX-Request": "true"}},
			status: 200, want: []string{`id="client-codex"`, "not shown again", "export HEARTH_API_KEY='SECRET'"}},
		{name: "connect-key-error", req: request{method: "POST", path: "/console/keys",
			form: url.Values{"name": {""}, "client": {"opencode"}}, header: map[string]string{"HX-Request": "true"}},
			status: 422, want: []string{"A key needs a name"}},
		{name: "settings-empty", req: request{path: "/console/settings"}, status: 200,
			want: []string{"No API keys", `<option value="kv" selected>`, "claude-* = qwen3-14b"}},
		{name: "settings-loaded", setup: func(t *testing.T, h *harness) {
			for _, n := range []string{"laptop", "desktop"} {
				if _, _, err := h.store.CreateKey(t.Context(), n); err != nil {
					t.Fatal(err)
				}
			}
		}, req: request{path: "/console/settings"}, status: 200, want: []string{"laptop", "desktop", "Revoke"}},
		{name: "settings-saved", req: request{method: "POST", path: "/console/settings",
			form: url.Values{"policy": {"hearth"}, "aliases": {"claude-* = qwen3-14b\n# comment\no3 = qwen3-14b\n"}}},
			status: 200, want: []string{"Saved.", `<option value="hearth" selected>`, "o3 = qwen3-14b"}},
		{name: "settings-error", req: request{method: "POST", path: "/console/settings",
			form: url.Values{"policy": {"kv"}, "aliases": {"claude-* qwen3-14b"}}},
			status: 422, want: []string{"Not saved", "line 1", "claude-* qwen3-14b"}},
		{name: "settings-key-created", req: request{method: "POST", path: "/console/keys",
			form: url.Values{"name": {"laptop"}, "confirm": {"yes"}}}, status: 200, want: []string{"not shown again", "SECRET", "laptop"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var src *fakeSources
			if tc.sources != nil {
				src = tc.sources()
			}
			h := newHarness(t, src, withKeyRequired(false), withKeyless(tc.keyless))
			if tc.setup != nil {
				tc.setup(t, h)
			}
			resp, body := h.do(t, tc.req)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d\n%s", resp.StatusCode, tc.status, body)
			}
			body = secretRE.ReplaceAllString(body, "SECRET")
			body = hintRE.ReplaceAllString(body, "sk-hearth-…HINT")
			checkPage(t, tc.name+".html", body, tc.want, nil)
		})
	}
}

func TestLoginPagesGolden(t *testing.T) {
	tests := []struct {
		name   string
		req    request
		status int
		want   string
	}{
		{"login", request{path: "/console/login"}, http.StatusOK, `type="password"`},
		{"login-bad-key", request{method: "POST", path: "/console/login", form: url.Values{"key": {"sk-wrong"}}}, http.StatusUnauthorized, "That key is not valid."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil, withKeyRequired(true))
			resp, body := h.do(t, tc.req)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if !strings.Contains(body, tc.want) {
				t.Errorf("page lacks %q", tc.want)
			}
			checkGolden(t, tc.name+".html", []byte(body))
		})
	}
	t.Run("forbidden", func(t *testing.T) {
		h := newHarness(t, nil, withKeyRequired(false))
		h.peer = []byte{192, 168, 1, 20}
		resp, body := h.do(t, request{path: "/console/"})
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("status %d, want 403", resp.StatusCode)
		}
		checkGolden(t, "forbidden.html", []byte(body))
	})
}
