package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hearth-llm/hearth/catalog"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// hangGuard bounds every wait on an event: it only stops a hung test.
const hangGuard = 30 * time.Second

// byteTok is one token per byte with a ChatML-like template: enough for
// the server, and prompts whose tokens a test can predict.
type byteTok struct{}

func (byteTok) Encode(text string) []uint32 {
	ids := make([]uint32, len(text))
	for i := range len(text) {
		ids[i] = uint32(text[i])
	}
	return ids
}

func (byteTok) Decode(ids []uint32) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func (byteTok) ApplyChatTemplate(req tokenizer.ChatRequest) (string, error) {
	var msgs []struct{ Role, Content string }
	if err := json.Unmarshal(req.Messages, &msgs); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "<|im_start|>%s\n%s<|im_end|>\n", m.Role, m.Content)
	}
	if req.AddGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String(), nil
}

// lineConsole collects an engine's console lines and can hold the engine
// at the first line containing hold, until release is closed: the engine
// prints its start-up synchronously, so the test looks at it mid-start.
type lineConsole struct {
	t       *testing.T
	mu      sync.Mutex
	all     []string
	lines   chan string
	hold    string
	held    chan struct{}
	release chan struct{}
}

func newLineConsole(t *testing.T, hold string) *lineConsole {
	return &lineConsole{t: t, lines: make(chan string, 4096), hold: hold,
		held: make(chan struct{}), release: make(chan struct{})}
}

func (c *lineConsole) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSuffix(string(p), "\n"), "\n") {
		c.mu.Lock()
		c.all = append(c.all, line)
		c.mu.Unlock()
		c.lines <- line
		if c.hold != "" && strings.Contains(line, c.hold) {
			c.hold = ""
			close(c.held)
			<-c.release
		}
	}
	return len(p), nil
}

// waitLine returns the first line from now on containing substr.
func (c *lineConsole) waitLine(substr string) string {
	c.t.Helper()
	deadline := time.After(hangGuard)
	for {
		select {
		case line := <-c.lines:
			if strings.Contains(line, substr) {
				return line
			}
		case <-deadline:
			c.t.Fatalf("no console line with %q", substr)
		}
	}
}

func (c *lineConsole) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.all, "\n")
}

// runInstance runs inst until the test ends; the returned function waits
// for Run's result.
func runInstance(t *testing.T, inst *sim.Instance) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inst.Run(ctx) }()
	var once sync.Once
	var result error
	wait := func() error {
		once.Do(func() {
			select {
			case result = <-done:
			case <-time.After(hangGuard):
				t.Error("Run did not return")
			}
		})
		return result
	}
	t.Cleanup(func() {
		cancel()
		if err := wait(); err != nil && !errors.Is(err, sim.ErrStartupFailed) {
			t.Errorf("Run: %v", err)
		}
	})
	return wait
}

func engineConfig(flavor hruntime.Kind) sim.Config {
	return sim.Config{GPU: "rtx4090", Model: "qwen3-8b", NumGPUBlocks: 256, MaxModelLen: 2048, Kind: flavor}
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func post(t *testing.T, url string, body any) chatUsage {
	t.Helper()
	raw, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Usage chatUsage `json:"usage"`
	}
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return out.Usage
}

func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// labelled is the value of the sample of a family whose label has value.
func labelled(f *dto.MetricFamily, label, value string) float64 {
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestSGLangInstance: an SGLang-flavoured engine answers 503 while it
// starts, serves after its warm-up, and reports itself the way SGLang does,
// so that runtime's probes read it.
func TestSGLangInstance(t *testing.T) {
	con := newLineConsole(t, "Load weight begin")
	inst, err := sim.NewInstance(sim.InstanceOptions{
		Engine: engineConfig(hruntime.KindSGLang), Listen: "127.0.0.1:0", ServedModelName: "qwen3-sim",
		ModelPath: "Qwen/Qwen3-8B", Speedup: 1000, Console: con, Tokenizer: byteTok{},
		ServerArgs: map[string]any{"tool_call_parser": "qwen25"},
	})
	if err != nil {
		t.Fatal(err)
	}
	base := inst.BaseURL()
	runInstance(t, inst)

	<-con.held // loading its weights
	for _, path := range []string{"/health", "/health_generate", "/v1/models"} {
		if code, _ := get(t, base+path); code != http.StatusServiceUnavailable {
			t.Errorf("GET %s while loading: %d, want 503", path, code)
		}
	}
	close(con.release)
	con.waitLine("The server is fired up and ready to roll!")

	ctx := context.Background()
	if err := hruntime.WaitReady(ctx, http.DefaultClient, base, "qwen3-sim", nil); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	if code, _ := get(t, base+"/health_generate"); code != http.StatusOK {
		t.Errorf("/health_generate: %d", code)
	}

	_, body := get(t, base+"/get_server_info")
	var info map[string]any
	if err := json.Unmarshal(body, &info); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"max_total_num_tokens": 256.0 * 16, "page_size": 16.0, "context_length": 2048.0,
		"served_model_name": "qwen3-sim", "model_path": "Qwen/Qwen3-8B", "mem_fraction_static": 0.9,
		"tool_call_parser": "qwen25",
	} {
		if info[k] != want {
			t.Errorf("/get_server_info %s = %v, want %v", k, info[k], want)
		}
	}
	prof := hruntime.MeasureProfile(ctx, http.DefaultClient, base, hruntime.KindSGLang, catalog.Profile{})
	if !prof.Measured || prof.GPUBlocks != 256 || prof.BlockSize != 16 || prof.MaxModelLen != 2048 {
		t.Errorf("MeasureProfile = %+v", prof)
	}

	chat := map[string]any{"model": "qwen3-sim", "max_tokens": 5,
		"messages": []map[string]string{{"role": "user", "content": strings.Repeat("Tell me about caches. ", 8)}}}
	first := post(t, base+"/v1/chat/completions", chat)
	second := post(t, base+"/v1/chat/completions", chat)
	if second.PromptTokensDetails.CachedTokens == 0 {
		t.Fatalf("the repeated prompt hit nothing: %+v", second)
	}
	stats, err := hruntime.ScrapeStats(ctx, http.DefaultClient, base)
	if err != nil {
		t.Fatal(err)
	}
	want := hruntime.Stats{
		PrefixQueries:    int64(first.PromptTokens + second.PromptTokens),
		PrefixHits:       int64(second.PromptTokensDetails.CachedTokens),
		GenerationTokens: int64(first.CompletionTokens + second.CompletionTokens),
	}
	if stats != want {
		t.Errorf("ScrapeStats = %+v, want %+v", stats, want)
	}
	fams := scrape(t, base)
	for _, name := range []string{"sglang:token_usage", "sglang:cache_hit_rate", "sglang:num_running_reqs",
		"sglang:num_queue_reqs", "sglang:time_to_first_token_seconds", "sglang:prompt_tokens_total",
		"sglang:generation_tokens_total", "sglang:cached_tokens_total"} {
		if fams[name] == nil {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if h := fams["sglang:time_to_first_token_seconds"]; h != nil && h.GetMetric()[0].GetHistogram().GetSampleCount() != 2 {
		t.Errorf("TTFT histogram counts %d requests, want 2", h.GetMetric()[0].GetHistogram().GetSampleCount())
	}
	for name := range fams {
		if strings.HasPrefix(name, "vllm:") {
			t.Errorf("SGLang flavour exports %s", name)
		}
	}
}

// TestSGLangHostCacheSource: prompt tokens loaded from the host tier count
// under cache_source="host", and ScrapeStats counts only the GPU's hits,
// as vLLM's prefix-cache counter does.
func TestSGLangHostCacheSource(t *testing.T) {
	cfg := sim.Config{GPU: "rtx4090", Model: "qwen3-8b", NumGPUBlocks: 40, NumCPUBlocks: 400, MaxModelLen: 600,
		Kind: hruntime.KindSGLang}
	base, again := reloadEvicted(t, cfg, "fired up")
	fams := scrape(t, base)
	cached := fams["sglang:cached_tokens_total"]
	device, host := labelled(cached, "cache_source", "device"), labelled(cached, "cache_source", "host")
	if host == 0 || device+host != float64(again.PromptTokensDetails.CachedTokens) {
		t.Fatalf("cached_tokens_total device %v host %v, the request reported %d", device, host,
			again.PromptTokensDetails.CachedTokens)
	}
	stats, err := hruntime.ScrapeStats(context.Background(), http.DefaultClient, base)
	if err != nil {
		t.Fatal(err)
	}
	if stats.PrefixHits != int64(device) {
		t.Errorf("ScrapeStats.PrefixHits = %d, want the device's %v", stats.PrefixHits, device)
	}
	if stats.RAMHitTokens != int64(host) || stats.StoreHitTokens != 0 || stats.RAMBlocks <= 0 || stats.LoadedBlocks == 0 || stats.StoredBlocks < int64(stats.RAMBlocks) {
		t.Errorf("ScrapeStats tiers = %+v, want %v RAM hit tokens, RAM blocks held, blocks loaded and stored", stats, host)
	}
}

// reloadEvicted starts an engine of cfg (a small GPU cache with a tier
// below it), sends a prompt, evicts it from the GPU with two others and
// sends it again; it returns the engine's address and the last usage.
func reloadEvicted(t *testing.T, cfg sim.Config, readyLine string) (string, chatUsage) {
	t.Helper()
	con := newLineConsole(t, "")
	inst, err := sim.NewInstance(sim.InstanceOptions{Engine: cfg, Listen: "127.0.0.1:0", Speedup: 1000,
		Console: con, Tokenizer: byteTok{}})
	if err != nil {
		t.Fatal(err)
	}
	base := inst.BaseURL()
	runInstance(t, inst)
	con.waitLine(readyLine)
	prompt := func(start int) []int {
		out := make([]int, 300)
		for i := range out {
			out[i] = start + i
		}
		return out
	}
	complete := func(p []int) chatUsage {
		return post(t, base+"/v1/completions", map[string]any{"prompt": p, "max_tokens": 1})
	}
	complete(prompt(1000))
	complete(prompt(5000)) // fills the GPU
	complete(prompt(9000)) // evicts most of the first prompt's blocks
	again := complete(prompt(1000))
	if again.PromptTokensDetails.CachedTokens == 0 {
		t.Fatalf("the first prompt came back from nowhere: %+v", again)
	}
	return base, again
}

// mapStore is a node store in memory.
type mapStore map[uint64]bool

func (m mapStore) Has(p sim.Page) bool             { return m[p.Hash] }
func (m mapStore) Load(sim.Page, int64) error      { return nil }
func (m mapStore) Store(p sim.Page, _ int64) error { m[p.Hash] = true; return nil }

// TestNodeStoreMetrics: a vLLM-flavoured engine that reloads an evicted
// prompt from its node store counts the tokens as external hits, and
// ScrapeStats gives them to the store, not to host RAM, by the simulator's
// tier series.
func TestNodeStoreMetrics(t *testing.T) {
	cfg := sim.Config{GPU: "rtx4090", Model: "qwen3-8b", NumGPUBlocks: 40, MaxModelLen: 600, Store: mapStore{}}
	base, again := reloadEvicted(t, cfg, "Application startup complete")
	stats, err := hruntime.ScrapeStats(context.Background(), http.DefaultClient, base)
	if err != nil {
		t.Fatal(err)
	}
	loaded := again.PromptTokensDetails.CachedTokens - int(stats.PrefixHits)
	if loaded <= 0 || stats.StoreHitTokens != int64(loaded) || stats.RAMHitTokens != 0 || stats.StoredBlocks == 0 {
		t.Errorf("ScrapeStats = %+v; the request loaded %d tokens from the store", stats, loaded)
	}
}

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestVLLMInstanceRefusesUntilBuilt: a vLLM-flavoured engine on a fixed
// port refuses connections while it loads, then prints vLLM's lines and
// serves.
func TestVLLMInstanceRefusesUntilBuilt(t *testing.T) {
	port := freePort(t)
	con := newLineConsole(t, "Loading weights took")
	inst, err := sim.NewInstance(sim.InstanceOptions{
		Engine: engineConfig(hruntime.KindVLLM), Listen: fmt.Sprintf("127.0.0.1:%d", port), ServedModelName: "qwen3-sim",
		Speedup: 1000, Console: con, Tokenizer: byteTok{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("http://127.0.0.1:%d", port); inst.BaseURL() != want {
		t.Errorf("BaseURL = %s, want %s", inst.BaseURL(), want)
	}
	began := time.Now()
	runInstance(t, inst)
	<-con.held
	if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
		c.Close()
		t.Error("the HTTP port accepts connections while the weights load")
	}
	close(con.release)
	con.waitLine(fmt.Sprintf("GPU KV cache size: %s tokens", "4,096"))
	con.waitLine(fmt.Sprintf("Starting vLLM API server 0 on http://127.0.0.1:%d", port))
	con.waitLine("Application startup complete.")
	if err := hruntime.WaitReady(context.Background(), http.DefaultClient, inst.BaseURL(), "qwen3-sim", nil); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	t.Logf("ready %v after Run with no start-up delay", time.Since(began))
	for _, line := range []string{"Model loading took", "Capturing CUDA graphs", "% Completed |", ".safetensors:"} {
		if !strings.Contains(con.text(), line) {
			t.Errorf("no %q line in the start-up", line)
		}
	}
	fams := scrape(t, inst.BaseURL())
	if fams["vllm:cache_config_info"] == nil || fams["sglang:token_usage"] != nil {
		t.Error("the vLLM flavour does not export vLLM's metrics alone")
	}
}

// TestStartupFailures: an engine told to fail prints the real engine's
// error and Run fails with ErrStartupFailed, never serving.
func TestStartupFailures(t *testing.T) {
	tests := []struct {
		flavor  hruntime.Kind
		failure sim.Failure
		line    string
	}{
		{hruntime.KindVLLM, sim.FailureOOM, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"},
		{hruntime.KindVLLM, sim.FailureExit, "RuntimeError: Engine core initialization failed."},
		{hruntime.KindSGLang, sim.FailureOOM, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"},
		{hruntime.KindSGLang, sim.FailureExit, "Received sigquit from a child process."},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v %s", tc.flavor, tc.failure), func(t *testing.T) {
			con := newLineConsole(t, "")
			inst, err := sim.NewInstance(sim.InstanceOptions{
				Engine: engineConfig(tc.flavor), Listen: "127.0.0.1:0", Failure: tc.failure,
				StartupDelay: 20 * time.Millisecond, Console: con, Tokenizer: byteTok{},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := runInstance(t, inst)(); !errors.Is(err, sim.ErrStartupFailed) {
				t.Errorf("Run = %v, want ErrStartupFailed", err)
			}
			text := con.text()
			if !strings.Contains(text, tc.line) {
				t.Errorf("no %q in the output:\n%s", tc.line, text)
			}
			if strings.Contains(text, "Application startup complete") || strings.Contains(text, "fired up") {
				t.Error("a failed start-up announces it serves")
			}
		})
	}
	if _, err := sim.NewInstance(sim.InstanceOptions{Engine: engineConfig(hruntime.KindVLLM), Failure: "segfault",
		Tokenizer: byteTok{}}); err == nil {
		t.Error("an unknown failure mode is accepted")
	}
}
