package sim

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/catalog"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// sleepOpts are short modelled transitions (the server runs 1000x fast).
func sleepOpts(reset func()) *SleepOptions {
	return &SleepOptions{
		Times: catalog.SwapTimes{SleepLevel1: 500 * time.Millisecond, SleepLevel2: 100 * time.Millisecond,
			WakeLevel1: time.Second, WakeLevel2: 3 * time.Second},
		AwakeBytes: 21 << 30, ResidualBytes: 1 << 29, Reset: reset,
	}
}

func gaugeOf(t *testing.T, ts *testServer) string {
	t.Helper()
	_, body := ts.get(t, "/metrics")
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "hearth_sim_gpu_memory_used_bytes ") {
			return strings.TrimPrefix(line, "hearth_sim_gpu_memory_used_bytes ")
		}
	}
	t.Fatalf("no memory gauge in /metrics:\n%s", body)
	return ""
}

func TestVLLMSleepAndWake(t *testing.T) {
	t.Parallel()
	engine := newTestEngine(t, 1000)
	var resets atomic.Int32 // the handler's goroutine counts, the test reads
	ts := startServer(t, engine, func(o *ServerOptions) { o.Sleep = sleepOpts(func() { resets.Add(1); engine.Reset() }) })
	chat := map[string]any{"model": "qwen3-test", "max_tokens": 4, "messages": []map[string]string{{"role": "user", "content": "hello"}}}

	if resp, body := ts.post(t, "/v1/chat/completions", chat); resp.StatusCode != http.StatusOK {
		t.Fatalf("awake: %d %s", resp.StatusCode, body)
	}
	if g := gaugeOf(t, ts); g != "2.2548578304e+10" {
		t.Errorf("awake memory %s, want 21 GiB", g)
	}
	if resp, body := ts.post(t, "/sleep?level=3", ""); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("level 3: %d %s, want 400", resp.StatusCode, body)
	}
	resp, body := ts.post(t, "/sleep?level=1&mode=wait", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"status":"sleeping"`) {
		t.Fatalf("sleep: %d %s", resp.StatusCode, body)
	}
	if n := resets.Load(); n != 1 {
		t.Errorf("%d prefix-cache resets, want 1 (a sleep discards the KV cache)", n)
	}
	if _, body := ts.get(t, "/is_sleeping"); !strings.Contains(string(body), `"is_sleeping":true`) {
		t.Errorf("is_sleeping: %s", body)
	}
	if g := gaugeOf(t, ts); g != "5.36870912e+08" {
		t.Errorf("asleep memory %s, want the residual 512 MiB", g)
	}
	if resp, body := ts.post(t, "/v1/chat/completions", chat); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("asleep: %d %s, want 503", resp.StatusCode, body)
	}
	if resp, _ := ts.post(t, "/tokenize", map[string]any{"prompt": "hi"}); resp.StatusCode != http.StatusOK {
		t.Errorf("tokenize while asleep: %d, want 200 (it needs no weights)", resp.StatusCode)
	}
	resp, body = ts.post(t, "/wake_up", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"status":"awake"`) {
		t.Fatalf("wake: %d %s", resp.StatusCode, body)
	}
	if resp, body := ts.post(t, "/v1/chat/completions", chat); resp.StatusCode != http.StatusOK {
		t.Fatalf("woken: %d %s", resp.StatusCode, body)
	}
}

func TestSleepEndpointsNeedSleepMode(t *testing.T) {
	t.Parallel()
	ts := startServer(t, newTestEngine(t, 1000), nil)
	if resp, _ := ts.post(t, "/sleep?level=1", ""); resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("/sleep without sleep mode: %d, want 404", resp.StatusCode)
	}
}

func TestSGLangReleaseAndResume(t *testing.T) {
	t.Parallel()
	engine := newTestEngine(t, 1000)
	ts := startServer(t, engine, func(o *ServerOptions) {
		o.Kind = hruntime.KindSGLang
		o.Sleep = sleepOpts(engine.Reset)
	})
	if resp, body := ts.post(t, "/release_memory_occupation", `{"tags":["bogus"]}`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bogus tag: %d %s", resp.StatusCode, body)
	}
	if resp, body := ts.post(t, "/release_memory_occupation", `{}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("release: %d %s", resp.StatusCode, body)
	}
	if g := gaugeOf(t, ts); g != "5.36870912e+08" {
		t.Errorf("released memory %s, want the residual", g)
	}
	if resp, body := ts.post(t, "/resume_memory_occupation", `{"tags":["weights","kv_cache"]}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("resume: %d %s", resp.StatusCode, body)
	}
	if g := gaugeOf(t, ts); g != "2.2548578304e+10" {
		t.Errorf("resumed memory %s, want 21 GiB", g)
	}
}

// TestDescriptorSleepAndWake drives both simulated kinds through the
// runtime's descriptors, as the daemon does.
func TestDescriptorSleepAndWake(t *testing.T) {
	t.Parallel()
	for _, kind := range []hruntime.Kind{hruntime.KindVLLM, hruntime.KindSGLang} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			engine := newTestEngine(t, 1000)
			ts := startServer(t, engine, func(o *ServerOptions) { o.Kind = kind; o.Sleep = sleepOpts(engine.Reset) })
			d, client := kind.Descriptor(), hruntime.NewProbeClient()
			if err := d.Sleep(t.Context(), client, ts.url, 1); err != nil {
				t.Fatal(err)
			}
			if g := gaugeOf(t, ts); g != "5.36870912e+08" {
				t.Errorf("asleep memory %s, want the residual", g)
			}
			if err := d.Wake(t.Context(), client, ts.url); err != nil {
				t.Fatal(err)
			}
			if g := gaugeOf(t, ts); g != "2.2548578304e+10" {
				t.Errorf("awake memory %s, want 21 GiB", g)
			}
		})
	}
}
