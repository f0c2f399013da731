package bench

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// startSimServer runs runtime/sim's vLLM server on loopback, its engine
// modelled time running speedup times faster than real time, and returns
// its OpenAI base URL.
func startSimServer(t *testing.T, speedup float64) string {
	t.Helper()
	tok, err := tokenizer.Qwen3()
	if err != nil {
		t.Fatal(err)
	}
	core, err := sim.NewCore(sim.Config{GPU: "rtx4090", Model: DefaultSimModel}, nil)
	if err != nil {
		t.Fatal(err)
	}
	eff := core.Config()
	runner := sim.NewRunner(core, sim.RunnerOptions{Speedup: speedup})
	srv, err := sim.NewServer(sim.ServerOptions{
		Engine: runner, Tokenizer: tok, ServedModelName: "sim-model", ModelName: eff.Model,
		MaxModelLen: eff.MaxModelLen, NumGPUBlocks: eff.NumGPUBlocks, BlockSize: eff.BlockSize, Speedup: speedup,
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	return "http://" + ln.Addr().String() + "/v1"
}

func TestLiveAgainstSimulatedServer(t *testing.T) {
	target := startSimServer(t, 200)
	l, err := NewLive(LiveConfig{Target: target})
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewAgentic(AgenticConfig{
		Seed: 5, PrefixTokens: 600, Steps: 3, TaskTokens: IntRange{Min: 50, Max: 100},
		AnswerTokens: IntRange{Min: 8, Max: 16}, ResultTokens: IntRange{Min: 50, Max: 150},
		ToolPause: Constant{Value: 10 * time.Millisecond}, Sessions: 2, TotalSessions: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var updates int
	results, err := l.Run(ctx, w, "", func(ProgressState) { updates++ })
	if err != nil {
		t.Fatal(err)
	}
	if model, _ := l.ResolveModel(ctx); model != "sim-model" {
		t.Errorf("model %q, want the server's sim-model", model)
	}
	if len(results) != 9 || updates != 9 {
		t.Fatalf("%d results, %d progress updates; want 3 sessions x 3 turns", len(results), updates)
	}
	laterTurnsCached := 0
	for _, r := range results {
		if r.Err != nil {
			t.Errorf("%s/%d: %v", r.Session, r.Turn, r.Err)
			continue
		}
		if !(r.Sent <= r.FirstToken && r.FirstToken <= r.Done) || r.FirstToken == 0 {
			t.Errorf("%s/%d: sent %v, first token %v, done %v: out of order", r.Session, r.Turn, r.Sent, r.FirstToken, r.Done)
		}
		if r.PromptTokens < 600 || r.OutputTokens < 1 {
			t.Errorf("%s/%d: %d prompt, %d output tokens", r.Session, r.Turn, r.PromptTokens, r.OutputTokens)
		}
		if r.Turn > 0 && r.CachedTokens >= 600 {
			laterTurnsCached++
		}
	}
	if laterTurnsCached == 0 {
		t.Error("no later turn reported cached tokens: usage.prompt_tokens_details was not read")
	}
	// Each session's task time spans its three turns and two 10 ms pauses.
	if sum := Summarize("target", 2, results); sum.FinishedSessions != 3 || !(sum.Session.P50 >= 20) ||
		!(sum.SlowestTurnTTFT.P50 > 0) || sum.Session.P50 < sum.E2E.P50 {
		t.Errorf("sessions: %d finished, task %+v, slowest TTFT %+v", sum.FinishedSessions, sum.Session, sum.SlowestTurnTTFT)
	}
	sum := Summarize("target", 2, results)
	if sum.EngineHitRate <= 0 || sum.TTFT.P50 <= 0 || sum.OutputTokS <= 0 {
		t.Errorf("summary %+v: want a hit rate, a TTFT and a throughput", sum)
	}
}

func TestLiveStopsWhenContextEnds(t *testing.T) {
	// A server that accepts and then never answers.
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hold)
	l, err := NewLive(LiveConfig{Target: srv.URL + "/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewAgentic(AgenticConfig{Seed: 1, PrefixTokens: 16, Steps: 2, Sessions: 2, TotalSessions: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan struct{})
	go func() {
		<-first
		cancel()
	}()
	var calls atomic.Int32
	l.cfg.Client = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if calls.Add(1) == 2 {
			close(first) // both sessions' first turns are on their way
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	results, err := l.Run(ctx, w, "", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if len(results) != 0 {
		t.Errorf("%d results from requests that never finished", len(results))
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestLiveReadsHearthHeaders checks the request a live run sends and what
// it reads back from a Hearth gateway: the policy header goes out, the
// predicted cached blocks come back.
func TestLiveReadsHearthHeaders(t *testing.T) {
	var gotPolicy, gotSession string
	var gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPolicy, gotSession = r.Header.Get(PolicyHeader), r.Header.Get("x-session-id")
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		w.Header().Set("x-hearth-cached-blocks", "3")
		w.Header().Set("x-hearth-tier-blocks", "gpu=3,ram=1,ssd=1")
		w.Header().Set("x-hearth-prompt-blocks", "5")
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"+
			"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"+
			"data: {\"choices\":[{\"delta\":{\"content\":\" there\"}}]}\n\n"+
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":80,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":48}}}\n\n"+
			"data: [DONE]\n\n")
	}))
	defer srv.Close()
	l, err := NewLive(LiveConfig{Target: srv.URL + "/v1/", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	req := &Request{Session: "s00001", Turn: 1, Prompt: promptOf(24), OutputTokens: 2,
		Segments: []Segment{{RoleSystem, 0, 8}, {RoleAssistant, 8, 16}, {RoleTool, 16, 24}}}
	res := l.send(context.Background(), req, "kv", time.Now())
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if gotPolicy != "kv" || gotSession != "s00001" {
		t.Errorf("headers: policy %q, session %q", gotPolicy, gotSession)
	}
	for _, want := range []string{`"max_tokens":2`, `"stream":true`, `"include_usage":true`, `"role":"tool"`, `"tool_call_id":"call_s00001_2"`} {
		if !strings.Contains(gotBody, want) {
			t.Errorf("body lacks %s: %s", want, gotBody)
		}
	}
	// The engine's cached tokens count every tier; so does the prediction.
	if res.PromptTokens != 80 || res.OutputTokens != 2 || res.CachedTokens != 48 ||
		res.PredictedCachedTokens != 80 || res.PredictedRAMTokens != 16 || res.PredictedSSDTokens != 16 {
		t.Errorf("result %+v: want 80 prompt, 2 output, 48 cached and (3+1+1)x16 predicted tokens, 16 of them in RAM and 16 on SSD", res)
	}
}

func TestParseTierBlocks(t *testing.T) {
	for _, tc := range []struct {
		in            string
		gpu, ram, ssd int
		ok            bool
	}{
		{"gpu=12,ram=4,ssd=0", 12, 4, 0, true},
		{"gpu=0,ram=0,ssd=7", 0, 0, 7, true},
		{"ssd=1,gpu=2", 2, 0, 1, true}, // any order, a missing tier is 0
		{" gpu=3 , ram=2 ", 3, 2, 0, true},
		{"gpu=3,vram=2", 3, 0, 0, true}, // a tier of a later gateway is left out
		{"", 0, 0, 0, false},
		{"gpu=x", 0, 0, 0, false},
		{"gpu=-1", 0, 0, 0, false},
		{"gpu", 0, 0, 0, false},
		{"gpu=99999999999999999999", 0, 0, 0, false},
	} {
		gpu, ram, ssd, ok := parseTierBlocks(tc.in)
		if gpu != tc.gpu || ram != tc.ram || ssd != tc.ssd || ok != tc.ok {
			t.Errorf("parseTierBlocks(%q) = %d, %d, %d, %v; want %d, %d, %d, %v", tc.in, gpu, ram, ssd, ok, tc.gpu, tc.ram, tc.ssd, tc.ok)
		}
	}
}

func FuzzParseTierBlocks(f *testing.F) {
	for _, s := range []string{"gpu=12,ram=4,ssd=0", "", "gpu=,ram", "ssd=1,gpu=2,,", "gpu=-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		gpu, ram, ssd, ok := parseTierBlocks(s)
		if !ok && gpu+ram+ssd != 0 {
			t.Fatalf("%q: not ok but %d, %d, %d", s, gpu, ram, ssd)
		}
		if gpu < 0 || ram < 0 || ssd < 0 {
			t.Fatalf("%q: negative count %d, %d, %d", s, gpu, ram, ssd)
		}
	})
}

func TestReadStream(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stream     string
		wantChunks int
		wantCached int
		wantErr    bool
	}{
		{"content and usage", "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":2}}}\n\ndata: [DONE]\n", 1, 2, false},
		{"reasoning counts as output", "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"x\"}}]}\ndata:[DONE]\n", 1, 0, false},
		{"tool call counts as output", "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0}]}}]}\ndata: [DONE]\n", 1, 0, false},
		{"comments and events skipped", ": ping\nevent: x\ndata: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n", 1, 0, false},
		{"role only is no output", "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\ndata: [DONE]\n", 0, 0, false},
		{"no done", "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n", 1, 0, true},
		{"bad json", "data: {nope\n", 0, 0, true},
		{"error object", "data: {\"error\":{\"message\":\"overloaded\"}}\n", 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			firsts := 0
			chunks, usage, err := readStream(strings.NewReader(tc.stream), func() { firsts++ })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error: %v", err, tc.wantErr)
			}
			if chunks != tc.wantChunks || firsts != tc.wantChunks {
				t.Errorf("%d chunks, %d output callbacks; want %d", chunks, firsts, tc.wantChunks)
			}
			cached := 0
			if usage != nil && usage.PromptTokensDetails != nil {
				cached = usage.PromptTokensDetails.CachedTokens
			}
			if cached != tc.wantCached {
				t.Errorf("cached %d, want %d", cached, tc.wantCached)
			}
		})
	}
}

func FuzzReadStream(f *testing.F) {
	f.Add("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n")
	f.Add("data: {\"usage\":{\"prompt_tokens\":1}}\ndata: [DONE]\n")
	f.Add(": comment\ndata: {\"error\":{\"message\":\"x\"}}\n")
	f.Fuzz(func(t *testing.T, s string) {
		chunks, _, _ := readStream(strings.NewReader(s), func() {})
		if chunks < 0 || chunks > strings.Count(s, "data:") {
			t.Errorf("%d output chunks from %d data lines", chunks, strings.Count(s, "data:"))
		}
	})
}

func TestNewLiveRejectsBadTargets(t *testing.T) {
	for _, target := range []string{"", "127.0.0.1:8000/v1", "ftp://x/v1"} {
		if _, err := NewLive(LiveConfig{Target: target}); !errors.Is(err, ErrBadLive) {
			t.Errorf("%q: got %v, want ErrBadLive", target, err)
		}
	}
}
