package daemon_test

// The end-to-end tests of hearth up: a whole daemon on simulated GPUs,
// configured by hearth up's flags (upConfig), driven over HTTP as the
// clients drive it.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/daemon"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// clientFixture is one recorded-shape request of a coding agent, written
// for the gateway's tests in the structure the real clients use.
type clientFixture struct {
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
}

// streamedAnswer is what a client makes of a streamed answer.
type streamedAnswer struct {
	text, toolName, toolArgs, finish string
	promptTokens, cachedTokens       int
	worker                           string
}

// TestUpServesTheThreeClients drives hearth up --sim with each client's
// own request shapes: turn 1 must come back as a tool call, turn 2 carries
// the tool's result, lands on the same GPU and is served mostly from its
// prefix cache. The fixtures' clients look with a shell tool, so the
// simulated model may use it here, and one call per task keeps the
// two-turn shape.
func TestUpServesTheThreeClients(t *testing.T) {
	baseURL, _ := startUp(t, "--sim-allow-write-tools", "--sim-tool-calls", "1")
	cases := []struct {
		client, turn1, turn2 string
		finishTool           string
		decode               func(t *testing.T, events []sseEvent) streamedAnswer
	}{
		{"claude-code", "claude-turn1.json", "claude-turn2.json", "tool_use", decodeAnthropicStream},
		{"codex", "codex-turn1.json", "codex-turn2.json", "completed", decodeResponsesStream},
		{"opencode", "opencode-turn1.json", "opencode-turn2.json", "tool_calls", decodeChatStream},
	}
	for _, tc := range cases {
		t.Run(tc.client, func(t *testing.T) {
			a1 := sendFixture(t, baseURL, tc.turn1, tc.decode)
			if a1.toolName == "" || !json.Valid([]byte(a1.toolArgs)) || a1.finish != tc.finishTool {
				t.Fatalf("turn 1: want a tool call, got %+v", a1)
			}
			a2 := sendFixture(t, baseURL, tc.turn2, tc.decode)
			if a2.text == "" || a2.toolName != "" {
				t.Fatalf("turn 2: want a text answer to the tool result, got %+v", a2)
			}
			if a2.worker != a1.worker {
				t.Errorf("turn 2 went to %s, turn 1 to %s: the session moved away from its cache", a2.worker, a1.worker)
			}
			t.Logf("turn 1 on %s: tool %s%s; turn 2 on %s: %d prompt tokens from cache", a1.worker, a1.toolName, a1.toolArgs, a2.worker, a2.cachedTokens)
			if a2.cachedTokens < 256 {
				t.Errorf("turn 2 had %d prompt tokens served from cache; want the shared system prompt, tools and turn 1", a2.cachedTokens)
			}
		})
	}
}

// TestUpMetrics: /metrics carries the gateway's, the router's and the event
// ingest's figures.
func TestUpMetrics(t *testing.T) {
	baseURL, _ := startUp(t)
	sendFixture(t, baseURL, "opencode-turn1.json", decodeChatStream)
	resp, err := http.Get(baseURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, name := range []string{
		"hearth_router_predicted_hit_rate_count 1",
		"hearth_router_decisions_total{policy=\"hearth\"} 1",
		`hearth_router_kv_events_total{worker="sim/gpu0"}`,
		`hearth_router_kv_events_total{worker="sim/gpu1"}`,
		`hearth_router_active_blocks{worker="sim/gpu0"}`,
	} {
		if !strings.Contains(string(body), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// TestUpStopsCleanly: after Ctrl-C the gateway's port is free again and
// serveUp reported no error.
func TestUpStopsCleanly(t *testing.T) {
	baseURL, stop := startUp(t)
	if err := stop(); err != nil {
		t.Fatalf("hearth up: %v", err)
	}
	ln, err := net.Listen("tcp", strings.TrimPrefix(baseURL, "http://"))
	if err != nil {
		t.Fatalf("port still taken after stop: %v", err)
	}
	ln.Close()
}

func sendFixture(t *testing.T, baseURL, name string, decode func(*testing.T, []sseEvent) streamedAnswer) streamedAnswer {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "api", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var f clientFixture
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	req, err := http.NewRequest(http.MethodPost, baseURL+f.Path, strings.NewReader(string(f.Body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range f.Headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: status %d: %s", name, resp.StatusCode, b)
	}
	a := decode(t, readSSE(t, resp.Body))
	a.worker = resp.Header.Get("x-hearth-worker")
	if a.worker == "" {
		t.Errorf("%s: no x-hearth-worker header", name)
	}
	return a
}

type sseEvent struct{ name, data string }

func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur != (sseEvent{}) {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data += strings.TrimPrefix(line, "data: ")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("empty event stream")
	}
	return out
}

func decodeAnthropicStream(t *testing.T, events []sseEvent) streamedAnswer {
	var a streamedAnswer
	if events[0].name != "message_start" || events[len(events)-1].name != "message_stop" {
		t.Fatalf("stream from %s to %s, want message_start to message_stop", events[0].name, events[len(events)-1].name)
	}
	for _, ev := range events {
		var v struct {
			ContentBlock struct{ Type, Name string } `json:"content_block"`
			Delta        struct {
				Type, Text  string
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			}
			Usage struct {
				Input     int `json:"input_tokens"`
				CacheRead int `json:"cache_read_input_tokens"`
			}
		}
		if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
			t.Fatalf("event %s: %v", ev.name, err)
		}
		switch {
		case ev.name == "content_block_start" && v.ContentBlock.Type == "tool_use":
			a.toolName = v.ContentBlock.Name
		case v.Delta.Type == "text_delta":
			a.text += v.Delta.Text
		case v.Delta.Type == "input_json_delta":
			a.toolArgs += v.Delta.PartialJSON
		case ev.name == "message_delta":
			a.finish, a.cachedTokens = v.Delta.StopReason, v.Usage.CacheRead
			a.promptTokens = v.Usage.Input + v.Usage.CacheRead
		}
	}
	return a
}

func decodeResponsesStream(t *testing.T, events []sseEvent) streamedAnswer {
	var a streamedAnswer
	if events[0].name != "response.created" || events[len(events)-1].name != "response.completed" {
		t.Fatalf("stream from %s to %s, want response.created to response.completed", events[0].name, events[len(events)-1].name)
	}
	for _, ev := range events {
		var v struct {
			Type     string
			Delta    string
			Item     struct{ Type, Name, Arguments string }
			Response struct {
				Status string
				Usage  struct {
					InputTokens        int `json:"input_tokens"`
					InputTokensDetails struct {
						CachedTokens int `json:"cached_tokens"`
					} `json:"input_tokens_details"`
				}
			}
		}
		if err := json.Unmarshal([]byte(ev.data), &v); err != nil || v.Type != ev.name {
			t.Fatalf("event %s: type %q, %v", ev.name, v.Type, err)
		}
		switch v.Type {
		case "response.output_text.delta":
			a.text += v.Delta
		case "response.output_item.done":
			if v.Item.Type == "function_call" {
				a.toolName, a.toolArgs = v.Item.Name, v.Item.Arguments
			}
		case "response.completed":
			a.finish, a.cachedTokens = v.Response.Status, v.Response.Usage.InputTokensDetails.CachedTokens
			a.promptTokens = v.Response.Usage.InputTokens
		}
	}
	return a
}

func decodeChatStream(t *testing.T, events []sseEvent) streamedAnswer {
	var a streamedAnswer
	if events[len(events)-1].data != "[DONE]" {
		t.Fatal("chat stream does not end with [DONE]")
	}
	for _, ev := range events[:len(events)-1] {
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content   string
					ToolCalls []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
				FinishReason *string `json:"finish_reason"`
			}
			Usage *struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			}
		}
		if err := json.Unmarshal([]byte(ev.data), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", ev.data, err)
		}
		for _, c := range chunk.Choices {
			a.text += c.Delta.Content
			for _, tc := range c.Delta.ToolCalls {
				a.toolName += tc.Function.Name
				a.toolArgs += tc.Function.Arguments
			}
			if c.FinishReason != nil {
				a.finish = *c.FinishReason
			}
		}
		if chunk.Usage != nil {
			a.cachedTokens = chunk.Usage.PromptTokensDetails.CachedTokens
			a.promptTokens = chunk.Usage.PromptTokens
		}
	}
	return a
}

// TestUpServesTwoModels: with two models on two GPUs each request goes to
// an engine of its model; when the engines of one model are gone, its
// requests get 503 with Retry-After at once while the other model serves.
func TestUpServesTwoModels(t *testing.T) {
	ask := func(t *testing.T, baseURL, model string) (int, string, http.Header) {
		t.Helper()
		resp, err := http.Post(baseURL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"`+model+`","max_tokens":4,"messages":[{"role":"user","content":"Say hello."}]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), resp.Header
	}
	t.Run("both serve", func(t *testing.T) {
		baseURL, _ := startUp(t, "--model", "qwen3-14b-fp8,qwen3-8b")
		for range 3 {
			for model, worker := range map[string]string{"qwen3-14b-fp8": "sim/gpu0", "qwen3-8b": "sim/gpu1"} {
				status, body, h := ask(t, baseURL, model)
				if status != http.StatusOK || h.Get("x-hearth-worker") != worker {
					t.Fatalf("%s: %d from %q, want 200 from %s: %s", model, status, h.Get("x-hearth-worker"), worker, body)
				}
			}
		}
	})
	t.Run("one model's engine failed", func(t *testing.T) {
		baseURL, _ := serveTestUp(t, upConfig(t, "--model", "qwen3-14b-fp8,qwen3-8b"), daemon.WithBackoff(hruntime.Backoff{Initial: time.Millisecond}), daemon.WithSpecHook(func(s *hruntime.Spec) {
			if s.Model == "qwen3-8b" {
				s.GPUMemoryUtilization = 0.05 // the weights do not fit: the engine cannot start
			}
		}))
		status, body, h := ask(t, baseURL, "qwen3-8b")
		if status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !strings.Contains(body, "sim/gpu1 failed") {
			t.Errorf("qwen3-8b with its engine failed: %d, Retry-After %q: %s; want 503 saying why", status, h.Get("Retry-After"), body)
		}
		if status, body, _ := ask(t, baseURL, "qwen3-14b-fp8"); status != http.StatusOK {
			t.Errorf("qwen3-14b-fp8: %d: %s", status, body)
		}
	})
}

// TestUpSimAgentFlags: the simulated model's tool use reaches every
// engine's spec, and from there the sim-engine command line.
func TestUpSimAgentFlags(t *testing.T) {
	cfg := upConfig(t, "--sim-allow-write-tools", "--sim-tool-calls", "2-4")
	specs, _, err := daemon.Plan(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if !s.AllowWriteTools || s.MinToolCalls != 2 || s.MaxToolCalls != 4 {
			t.Errorf("spec %s: write tools %v, tool calls %d-%d", s.Name, s.AllowWriteTools, s.MinToolCalls, s.MaxToolCalls)
		}
		args := strings.Join(hruntime.SimEngineArgs(s, hruntime.Ports{}), " ")
		if !strings.Contains(args, "--tool-calls 2-4 --allow-write-tools") {
			t.Errorf("sim-engine args %s", args)
		}
	}
}

// TestUpSimModelOnlyReads: by default the simulated model never runs the
// clients' shell tools. After a listing it reads a file the listing named
// (or searches); offered only a shell, it answers in text and says it is
// simulated.
func TestUpSimModelOnlyReads(t *testing.T) {
	baseURL, _ := startUp(t)
	a := sendFixture(t, baseURL, "claude-turn2.json", decodeAnthropicStream)
	var args struct{ Path string }
	switch {
	case a.toolName == "Search":
	case a.toolName != "ReadFile" || json.Unmarshal([]byte(a.toolArgs), &args) != nil ||
		!slices.Contains([]string{"a.txt", "b.txt", "c.txt"}, args.Path):
		t.Errorf("claude-code after a listing: %+v, want ReadFile of a listed file or a Search", a)
	}
	a = sendFixture(t, baseURL, "codex-turn1.json", decodeResponsesStream)
	if a.toolName != "" || !strings.Contains(a.text, "simulated model") {
		t.Errorf("codex with only a shell tool: %+v, want a text answer", a)
	}
}

// TestUpTierBlocksShowHostRAM: a simulated vLLM with a small GPU cache and
// a host-RAM tier publishes its offloaded blocks as vLLM v0.20's offloading
// connector does (raw 32-byte hashes, no tokens), and the router indexes
// them under the GPU blocks they copy. A prompt that two later prompts
// pushed out of the GPU cache is then routed with its blocks in host RAM,
// as x-hearth-tier-blocks says.
func TestUpTierBlocksShowHostRAM(t *testing.T) {
	baseURL, _ := serveTestUp(t, upConfig(t, "--sim", "1x4090", "--model", "qwen3-8b", "--kvbm", "ram", "--kv-offloading-size", "1"), daemon.WithSpecHook(func(s *hruntime.Spec) {
		s.NumGPUBlocks, s.MaxModelLen = 64, 1024 // room for fewer than two of the prompts below
	}))
	ask := func(tag string) http.Header {
		t.Helper()
		var sb strings.Builder
		for i := range 90 {
			fmt.Fprintf(&sb, "%s note %d. ", tag, i)
		}
		body, _ := json.Marshal(map[string]any{"model": "qwen3-8b", "max_tokens": 1, "messages": []map[string]string{{"role": "user", "content": sb.String()}}})
		resp, err := http.Post(baseURL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", tag, resp.StatusCode, b)
		}
		return resp.Header
	}
	// x-hearth-prompt-blocks counts a partial last block: the full ones
	// the engine caches are that many or one fewer.
	promptBlocks := func(h http.Header) int {
		n, err := strconv.Atoi(h.Get("x-hearth-prompt-blocks"))
		if err != nil || n < 20 {
			t.Fatalf("x-hearth-prompt-blocks %q, want a prompt of 20 blocks or more", h.Get("x-hearth-prompt-blocks"))
		}
		return n
	}
	minFull := 0
	for _, tag := range []string{"Alpha", "Bravo", "Charlie"} {
		minFull += promptBlocks(ask(tag)) - 1
	}
	// Events travel asynchronously: wait until the router has applied the
	// blocks stored on the GPU and in host RAM (each prompt's full blocks,
	// twice). Without the offloaded blocks indexed this times out, and the
	// header below says why.
	deadline := time.Now().Add(20 * time.Second)
	for stored := 0; stored < 2*minFull && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		stored = metricValue(t, baseURL, `hearth_router_kv_blocks_stored_total{worker="sim/gpu0"}`)
	}
	h := ask("Alpha")
	var gpu, ram, ssd int
	if _, err := fmt.Sscanf(h.Get("x-hearth-tier-blocks"), "gpu=%d,ram=%d,ssd=%d", &gpu, &ram, &ssd); err != nil {
		t.Fatalf("x-hearth-tier-blocks %q: %v", h.Get("x-hearth-tier-blocks"), err)
	}
	if n := promptBlocks(h); gpu != 0 || ram < n-1 || ssd != 0 {
		t.Errorf("x-hearth-tier-blocks %q for a prompt of %d blocks pushed out of the GPU; want its full blocks in RAM", h.Get("x-hearth-tier-blocks"), n)
	}
}

// metricValue reads one sample of the daemon's /metrics, 0 when absent.
func metricValue(t *testing.T, baseURL, sample string) int {
	t.Helper()
	resp, err := http.Get(baseURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int(f)
		}
	}
	return 0
}
