package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/go-zeromq/zmq4"

	"github.com/hearth-llm/hearth/catalog"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// listenLine is the log line runSimEngine prints once its sockets are bound.
var listenLine = regexp.MustCompile(`msg=listening .*\bhttp=(\S+) kv_events=(\S+) kv_replay=(\S+)`)

// startSimEngine runs `hearth sim-engine` in-process on free loopback ports
// and returns its HTTP and replay addresses once it listens.
func startSimEngine(t *testing.T, extra ...string) (httpAddr, replayAddr string, stop func() error) {
	t.Helper()
	pr, pw := io.Pipe()
	env := &environment{stdin: strings.NewReader(""), stdout: io.Discard, stderr: pw, getenv: func(string) string { return "" }}
	ctx, cancel := context.WithCancel(context.Background())
	args := append([]string{"sim-engine", "--listen", "127.0.0.1:0", "--kv-events", "tcp://127.0.0.1:0",
		"--kv-replay", "tcp://127.0.0.1:0", "--speedup", "1000", "--gpu", "rtx4090", "--model", "qwen3-8b",
		"--served-model-name", "qwen3-sim"}, extra...)
	done := make(chan error, 1)
	go func() {
		err := run(ctx, env, args)
		pw.CloseWithError(errors.New("sim-engine returned"))
		done <- err
	}()

	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			t.Log(sc.Text())
			if m := listenLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m
			}
		}
		close(found)
	}()
	m, ok := <-found
	if !ok {
		cancel()
		t.Fatalf("sim-engine stopped before listening: %v", <-done)
	}
	return m[1], m[3], func() error {
		cancel()
		return <-done
	}
}

func TestSimEngineServesChat(t *testing.T) {
	httpAddr, replayAddr, stop := startSimEngine(t)

	body := `{"model":"qwen3-sim","messages":[{"role":"user","content":"Say something about caches."}],"max_tokens":12}`
	resp, err := http.Post("http://"+httpAddr+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var chat struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	err = json.NewDecoder(resp.Body).Decode(&chat)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, decode: %v", resp.StatusCode, err)
	}
	if len(chat.Choices) != 1 || chat.Choices[0].Message.Content == "" || chat.Usage.CompletionTokens != 12 ||
		chat.Choices[0].FinishReason != "length" || chat.Usage.PromptTokens < 10 {
		t.Errorf("chat answer %+v", chat)
	}

	resp, err = http.Get("http://" + httpAddr + "/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("health: %v %v", resp, err)
	}
	resp.Body.Close()

	// The prompt's blocks were stored: the replay socket has the events.
	ctx := context.Background()
	dealer := zmq4.NewDealer(ctx, zmq4.WithID(zmq4.SocketIdentity("cmd-test")))
	defer dealer.Close()
	if err := dealer.Dial(replayAddr); err != nil {
		t.Fatal(err)
	}
	if err := dealer.SendMulti(zmq4.NewMsgFrom([]byte{}, binary.BigEndian.AppendUint64(nil, 0))); err != nil {
		t.Fatal(err)
	}
	batches := 0
	for {
		msg, err := dealer.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Frames) != 3 {
			t.Fatalf("replay frames %q", msg.Frames)
		}
		if binary.BigEndian.Uint64(msg.Frames[1]) == ^uint64(0) {
			break
		}
		batches++
	}
	if batches == 0 {
		t.Error("no KV event batch after a completed request")
	}

	if err := stop(); err != nil {
		t.Errorf("sim-engine returned %v after cancel", err)
	}
}

func TestSimEngineFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"unknown gpu", []string{"--gpu", "voodoo2"}},
		{"bad format", []string{"--kv-events-format", "xml"}},
		{"replay without events", []string{"--kv-replay", "tcp://127.0.0.1:0"}},
		{"bad policy", []string{"--scheduling-policy", "lifo"}},
		{"zero speedup", []string{"--speedup", "0"}},
		{"negative offloading", []string{"--kv-offloading-size", "-1"}},
		{"extra argument", []string{"extra"}},
		{"bad tool calls", []string{"--tool-calls", "4-2"}},
		{"no tensor parallel size", []string{"--tensor-parallel-size", "0"}},
		{"heads do not divide", []string{"--tensor-parallel-size", "3"}},
		{"kv dtype not modelled", []string{"--kv-cache-dtype", "int8"}},
		{"vLLM's fp8 in sglang's flavour", []string{"--flavor", "sglang", "--kv-cache-dtype", "fp8"}},
		{"overrides not JSON", []string{"--hf-overrides", "{rope"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runHearth(t, "", append([]string{"sim-engine"}, tc.args...)...)
			if !errors.Is(err, errUsage) {
				t.Errorf("got %v, want a usage error", err)
			}
		})
	}
}

// TestSimEngineSGLangFlavor: `hearth sim-engine --flavor sglang` is the
// SGLang stand-in without Docker: SGLang's endpoints and metric names.
func TestSimEngineSGLangFlavor(t *testing.T) {
	httpAddr, _, stop := startSimEngine(t, "--flavor", "sglang")
	base := "http://" + httpAddr
	ctx := context.Background()
	if err := hruntime.WaitReady(ctx, http.DefaultClient, base, "qwen3-sim", nil); err != nil {
		t.Fatal(err)
	}
	prof := hruntime.MeasureProfile(ctx, http.DefaultClient, base, hruntime.KindSGLang, catalog.Profile{})
	if !prof.Measured || prof.BlockSize != 16 || prof.GPUBlocks == 0 {
		t.Errorf("MeasureProfile = %+v", prof)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "sglang:token_usage") || strings.Contains(string(body), "vllm:") {
		t.Errorf("metrics of the SGLang flavour:\n%s", body)
	}
	if err := stop(); err != nil {
		t.Errorf("sim-engine returned %v after cancel", err)
	}
}

func TestSimEngineFlavorFlagErrors(t *testing.T) {
	for _, args := range [][]string{{"--flavor", "tgi"}, {"--simulate-failure", "boom"}, {"--simulate-startup", "-1s"}} {
		if _, _, err := runHearth(t, "", append([]string{"sim-engine"}, args...)...); !errors.Is(err, errUsage) {
			t.Errorf("%q: got %v, want a usage error", args, err)
		}
	}
}

// TestSimEngineAllowWriteTools: offered only a tool that writes, the
// simulated model answers in text, unless --allow-write-tools lets it call
// the tool.
func TestSimEngineAllowWriteTools(t *testing.T) {
	body := `{"model":"qwen3-sim","messages":[{"role":"system","content":"Working directory: /srv/app"},` +
		`{"role":"user","content":"Note what main.go does."}],` +
		`"tools":[{"type":"function","function":{"name":"Write","parameters":{"type":"object",` +
		`"properties":{"file_path":{"type":"string"},"content":{"type":"string"}},"required":["file_path","content"]}}}]}`
	for _, allow := range []bool{false, true} {
		var extra []string
		if allow {
			extra = []string{"--allow-write-tools", "--tool-calls", "1"}
		}
		httpAddr, _, stop := startSimEngine(t, extra...)
		resp, err := http.Post("http://"+httpAddr+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var chat struct {
			Choices []struct {
				Message struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Function struct{ Name, Arguments string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		err = json.NewDecoder(resp.Body).Decode(&chat)
		resp.Body.Close()
		if err != nil || len(chat.Choices) != 1 {
			t.Fatalf("allow %v: %v %+v", allow, err, chat)
		}
		msg := chat.Choices[0].Message
		switch {
		case !allow && (len(msg.ToolCalls) != 0 || msg.Content == nil || !strings.Contains(*msg.Content, "simulated model")):
			t.Errorf("without the flag: %+v", msg)
		case allow && (len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "Write" ||
			!strings.Contains(msg.ToolCalls[0].Function.Arguments, "/srv/app/hearth-sim-notes.md")):
			t.Errorf("with the flag: %+v", msg)
		}
		if err := stop(); err != nil {
			t.Errorf("sim-engine returned %v", err)
		}
	}
}
