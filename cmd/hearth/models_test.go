//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/daemon"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// The tests of models on demand: hearth up with two models on one
// simulated RTX 4090, each engine a hearth sim-engine child process that
// reserves 90% of the board, so that only one of them is resident at a
// time.

const (
	coderModel = "qwen3-14b-fp8"
	sideModel  = "qwen3-8b"
)

// upTwoModels starts the daemon with both models on one 4090 and extra
// flags, and returns its URL and the node store's directory.
func upTwoModels(t *testing.T, extra ...string) (baseURL, store string) {
	t.Helper()
	baseURL, store, _ = upTwoModelsIn(t, t.TempDir(), extra...)
	return baseURL, store
}

// upTwoModelsIn is upTwoModels with the daemon's data directory.
func upTwoModelsIn(t *testing.T, dataDir string, extra ...string) (baseURL, store, data string) {
	t.Helper()
	exe := hearthBinary(t)
	store = filepath.Join(t.TempDir(), "kvstore")
	args := append([]string{"--sim", "1x4090", "--engine-runtime", "process", "--speedup", "20", "--model", coderModel + "," + sideModel,
		"--data-dir", dataDir, "--kv-store-dir", store, "--kv-store-size", "64", "--stop-timeout", "10s"}, extra...)
	baseURL, _ = serveTestUp(t, args, daemon.WithHearthBinary(exe), daemon.WithBackoff(hruntime.Backoff{Initial: 100 * time.Millisecond}),
		daemon.WithKeepAliveInterval(20*time.Millisecond), daemon.WithSpecHook(asHearthEngine))
	return baseURL, store, dataDir
}

// modelStates reads the models' states from /v1/models.
func modelStates(t *testing.T, baseURL string) map[string]string {
	t.Helper()
	resp, err := http.Get(baseURL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range list.Data {
		out[m.ID] = m.State
	}
	return out
}

// engineAsleep asks the model's engine itself whether it sleeps (vLLM's
// GET /is_sleeping, on its loopback port).
func engineAsleep(t *testing.T, baseURL, model string) bool {
	t.Helper()
	for _, e := range listEngines(t, baseURL) {
		if e.Model != model {
			continue
		}
		resp, err := http.Get(e.BaseURL + "/is_sleeping")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct {
			IsSleeping bool `json:"is_sleeping"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatalf("%s /is_sleeping: %v", e.Name, err)
		}
		return v.IsSleeping
	}
	t.Fatalf("no engine serves %s", model)
	return false
}

// streamed is a streamed answer as the client read it.
type streamed struct {
	status     int
	keepAlives int // keep-alive lines before the answer's first event
	body       string
	err        error
}

// streamModel sends a streaming request for model in the dialect of path
// and reads it to its end; started, when set, is closed at the first
// content.
func streamModel(ctx context.Context, baseURL, path, model string, maxTokens int, started chan<- struct{}) streamed {
	body := fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"Write out a long explanation of how a paged KV cache evicts blocks."}]}`, model, maxTokens)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+path, strings.NewReader(body))
	if err != nil {
		return streamed{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return streamed{err: err}
	}
	defer resp.Body.Close()
	out := streamed{status: resp.StatusCode}
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	answering := false
	for sc.Scan() {
		line := sc.Text()
		b.WriteString(line + "\n")
		switch {
		case answering || line == "":
		case line == ": keep-alive" || line == "event: ping":
			out.keepAlives++
		case strings.HasPrefix(line, "data:") && strings.Contains(line, `"type": "ping"`):
		default:
			answering = true
		}
		if started != nil && strings.Contains(line, `"content"`) || started != nil && strings.Contains(line, `"text_delta"`) {
			close(started)
			started = nil
		}
	}
	if started != nil {
		close(started)
	}
	out.body, out.err = b.String(), sc.Err()
	return out
}

// askModel sends a short non-streaming chat request for model.
func askModel(t *testing.T, baseURL, model string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Post(baseURL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"`+model+`","max_tokens":4,"messages":[{"role":"user","content":"Say hello."}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestModelSwapWaitsForInFlightThenSleeps: a request for the model that is
// not resident is answered, after the resident model has finished the
// stream it had in flight (whole, not cut off) and gone to sleep.
func TestModelSwapWaitsForInFlightThenSleeps(t *testing.T) {
	t.Parallel()
	baseURL, _, dataDir := upTwoModelsIn(t, t.TempDir())
	if got := modelStates(t, baseURL); got[coderModel] != "resident" || got[sideModel] != "on disk" {
		t.Fatalf("at start: %v, want %s resident and %s on disk", got, coderModel, sideModel)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // bounds a hang
	defer cancel()
	started := make(chan struct{})
	first := make(chan streamed, 1)
	go func() { first <- streamModel(ctx, baseURL, "/v1/chat/completions", coderModel, 1000, started) }()
	<-started
	status, h, body := askModel(t, baseURL, sideModel)
	if status != http.StatusOK || h.Get("x-hearth-worker") != "sim/gpu0/"+sideModel {
		t.Fatalf("%s while %s streamed: %d from %q: %s", sideModel, coderModel, status, h.Get("x-hearth-worker"), body)
	}
	a := <-first
	if a.err != nil || a.status != http.StatusOK || !strings.Contains(a.body, "[DONE]") || strings.Contains(a.body, `"error"`) {
		t.Errorf("the stream in flight on %s did not end whole: %d %v\n%s", coderModel, a.status, a.err, tail(a.body))
	}
	if !engineAsleep(t, baseURL, coderModel) {
		t.Errorf("%s's engine is not asleep after the swap", coderModel)
	}
	if got := modelStates(t, baseURL); got[coderModel] != "sleeping" || got[sideModel] != "resident" {
		t.Errorf("after the swap: %v, want %s sleeping and %s resident", got, coderModel, sideModel)
	}

	// hearth models shows the same, and unloads a model on request.
	var out strings.Builder
	env := &environment{stdout: &out, stderr: io.Discard, getenv: func(string) string { return "" }}
	if err := runModels(ctx, env, []string{"--addr", baseURL, "--data-dir", dataDir}); err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			listed[f[0]] = f[1]
		}
	}
	if listed[coderModel] != "sleeping" || listed[sideModel] != "resident" {
		t.Errorf("hearth models:\n%s\nwant %s sleeping and %s resident", out.String(), coderModel, sideModel)
	}
	if err := runModels(ctx, env, []string{"unload", sideModel, "--addr", baseURL, "--data-dir", dataDir}); err != nil {
		t.Fatal(err)
	}
	if got := modelStates(t, baseURL); got[sideModel] != "sleeping" {
		t.Errorf("after hearth models unload %s: %v", sideModel, got)
	}
}

// TestModelLoadKeepsStreamsAlive: a streaming client whose model waits for
// the other to finish and sleep gets keep-alives in its dialect, an SSE
// comment for OpenAI's, a ping event for Anthropic's, then its answer.
func TestModelLoadKeepsStreamsAlive(t *testing.T) {
	t.Parallel()
	baseURL, _ := upTwoModels(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		dialect, path, busy, wanted string
		answered                    string
	}{
		{"anthropic", "/v1/messages", coderModel, sideModel, "message_stop"},
		{"openai", "/v1/chat/completions", sideModel, coderModel, "[DONE]"},
	} {
		started := make(chan struct{})
		busy := make(chan streamed, 1)
		go func() { busy <- streamModel(ctx, baseURL, "/v1/chat/completions", tc.busy, 1000, started) }()
		<-started
		got := streamModel(ctx, baseURL, tc.path, tc.wanted, 8, nil)
		<-busy
		if got.err != nil || got.status != http.StatusOK || !strings.Contains(got.body, tc.answered) {
			t.Fatalf("%s: %s: %d %v\n%s", tc.dialect, tc.wanted, got.status, got.err, tail(got.body))
		}
		if got.keepAlives == 0 {
			t.Errorf("%s: no keep-alive while %s loaded:\n%s", tc.dialect, tc.wanted, tail(got.body))
		}
		t.Logf("%s: %d keep-alives before the answer", tc.dialect, got.keepAlives)
	}
}

// TestToolPauseKeepsModelThroughSideRequest: a session whose turn on the
// coder model ended in tool calls is in a tool pause; a side request for
// the other model does not evict the coder (it waits its bound and gets
// the overloaded error with Retry-After), and the session's next turn is
// served by the coder without a swap.
func TestToolPauseKeepsModelThroughSideRequest(t *testing.T) {
	t.Parallel()
	baseURL, _ := upTwoModels(t, "--model-wait", "500ms")
	const tools = `[{"type":"function","function":{"name":"read_file","description":"Read a file of the repository","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}]`
	turn := func(messages string) (int, string) {
		body := `{"model":"` + coderModel + `","max_tokens":200,"tools":` + tools + `,"messages":` + messages + `}`
		req, err := http.NewRequest(http.MethodPost, baseURL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-session-id", "tool-pause")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	user := `{"role":"user","content":"Read main.go and fix the failing test."}`
	status, body := turn("[" + user + "]")
	var answer struct {
		Choices []struct {
			Message      json.RawMessage `json:"message"`
			FinishReason string          `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(body), &answer); status != http.StatusOK || err != nil || len(answer.Choices) == 0 || answer.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("turn 1: %d: want a tool call: %s", status, body)
	}
	status, h, side := askModel(t, baseURL, sideModel)
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Errorf("side request during the tool pause: %d, Retry-After %q: %s; want 503 with Retry-After", status, h.Get("Retry-After"), side)
	}
	if got := modelStates(t, baseURL); got[coderModel] != "resident" {
		t.Fatalf("after the side request: %v: the coder was evicted in its tool pause", got)
	}
	var call struct {
		ToolCalls []struct {
			ID string `json:"id"`
		} `json:"tool_calls"`
	}
	_ = json.Unmarshal(answer.Choices[0].Message, &call)
	if len(call.ToolCalls) == 0 {
		t.Fatalf("turn 1's message has no tool call: %s", answer.Choices[0].Message)
	}
	next := "[" + user + "," + string(answer.Choices[0].Message) +
		`,{"role":"tool","tool_call_id":"` + call.ToolCalls[0].ID + `","content":"package main\n\nfunc main() {}\n"}]`
	if status, body := turn(next); status != http.StatusOK {
		t.Fatalf("turn 2: %d: %s", status, body)
	}
	if engineAsleep(t, baseURL, coderModel) {
		t.Error("the coder slept between its turns")
	}
}

// TestWokenModelFindsItsPrefixInTheStore: the coder's blocks stay in the
// node's SSD store while it sleeps for the other model; its session's next
// turn after the wake loads the prefix from the store
// (x-hearth-tier-blocks) instead of computing it.
func TestWokenModelFindsItsPrefixInTheStore(t *testing.T) {
	t.Parallel()
	// Without a host-RAM tier: the engine's RAM tier outlives a sleep too,
	// and would serve the prefix before the store.
	baseURL, store := upTwoModels(t, "--kv-offloading-size", "0")
	history := []string{strings.Repeat("You are a coding agent. Read the repository before you edit it. ", 300)}
	first := chatTurn(t, baseURL, history)
	if n := countBlocks(t, store); first.prompt < 3000 || n*16 < first.prompt*9/10 {
		t.Fatalf("turn 1: %d prompt tokens, %d blocks in the store; the test needs a long prefix written through", first.prompt, n)
	}
	if status, _, body := askModel(t, baseURL, sideModel); status != http.StatusOK {
		t.Fatalf("%s: %d: %s", sideModel, status, body)
	}
	if !engineAsleep(t, baseURL, coderModel) {
		t.Fatalf("%s is not asleep after the swap", coderModel)
	}
	history = append(history, "I read it.", "Now fix the failing test.")
	next, tiers := chatTurnTiers(t, baseURL, history)
	t.Logf("turn 1: %d prompt tokens; after the sleep and wake: %d of %d cached, tiers %s", first.prompt, next.cached, next.prompt, tiers)
	var gpu, ram, ssd int
	if _, err := fmt.Sscanf(tiers, "gpu=%d,ram=%d,ssd=%d", &gpu, &ram, &ssd); err != nil {
		t.Fatalf("x-hearth-tier-blocks %q: %v", tiers, err)
	}
	if ssd*16 < first.prompt*9/10 || next.cached < first.prompt*9/10 {
		t.Errorf("after the wake the turn found %d blocks in the SSD store (tiers %s) and %d of turn 1's %d tokens cached; want turn 1's prefix from the store",
			ssd, tiers, next.cached, first.prompt)
	}
}

// chatTurnTiers is chatTurn with the tiers the router expected the prompt's
// blocks from.
func chatTurnTiers(t *testing.T, baseURL string, turns []string) (turnUsage, string) {
	t.Helper()
	var tiers string
	u := chatTurnWith(t, baseURL, turns, func(h http.Header) { tiers = h.Get("x-hearth-tier-blocks") })
	return u, tiers
}

// TestUnknownModelNamesTheServedOnes: with no "*" alias, a request for a
// model that is neither served nor aliased gets the dialect's not-found
// error naming both configured models, the one on disk too.
func TestUnknownModelNamesTheServedOnes(t *testing.T) {
	t.Parallel()
	baseURL, _ := upTwoModels(t, "--alias", "claude-*="+coderModel)
	for _, tc := range []struct{ path, want string }{
		{"/v1/chat/completions", "model_not_found"},
		{"/v1/messages", "not_found_error"},
	} {
		resp, err := http.Post(baseURL+tc.path, "application/json",
			strings.NewReader(`{"model":"llama-2-7b","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), tc.want) ||
			!strings.Contains(string(b), coderModel) || !strings.Contains(string(b), sideModel) {
			t.Errorf("%s: %d: %s; want 404 %s naming %s and %s", tc.path, resp.StatusCode, b, tc.want, coderModel, sideModel)
		}
	}
}

// TestPinsAreChecked: a pin must name a served model, and the pinned
// models of a GPU must fit it together; both are refused at start with
// what to change.
func TestPinsAreChecked(t *testing.T) {
	env := &environment{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	base := []string{"--sim", "1x4090", "--model", coderModel + "," + sideModel, "--data-dir", t.TempDir()}
	if _, err := parseUpFlags(env, append(base, "--pin", "qwen3-32b")); err == nil || !strings.Contains(err.Error(), "not a served model") {
		t.Errorf("--pin of a model not served: %v", err)
	}
	cfg, err := parseUpFlags(env, append(base, "--pin", coderModel+","+sideModel))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = serveUp(t.Context(), io.Discard, slog.New(slog.DiscardHandler), cfg, ln)
	if !errors.Is(err, daemon.ErrUsage) || !strings.Contains(err.Error(), "pin fewer") {
		t.Errorf("two pinned models that do not fit one 4090 together: %v, want a usage error saying to pin fewer", err)
	}
}

// TestModelThatCannotFitIsRefusedAtStart: a model served on demand that
// cannot fit its GPU even alone is refused when hearth up starts, with
// the plan's fixes, rather than at its first request.
func TestModelThatCannotFitIsRefusedAtStart(t *testing.T) {
	env := &environment{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	cfg, err := parseUpFlags(env, []string{"--sim", "1x4090", "--model", coderModel + ",qwen3-32b-fp8", "--data-dir", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Bounded: a daemon that did start would serve until its context ends.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err = serveUp(ctx, io.Discard, slog.New(slog.DiscardHandler), cfg, ln)
	if err == nil || !strings.Contains(err.Error(), "qwen3-32b-fp8") || !strings.Contains(err.Error(), "needs 32 GB") {
		t.Errorf("qwen3-32b-fp8 beside %s on one 4090: %v, want a refusal at start naming it and why", coderModel, err)
	}
	t.Logf("refused: %v", err)
}
