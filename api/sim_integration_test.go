package api

import (
	"context"
	"net"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// startSimEngine runs the simulated vLLM server on loopback.
func startSimEngine(t *testing.T, tok *tokenizer.Model) string {
	t.Helper()
	core, err := sim.NewCore(sim.Config{GPU: "rtx4090", Model: "qwen3-8b", NumGPUBlocks: 1024, MaxModelLen: 8192}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sim.NewServer(sim.ServerOptions{
		Engine: sim.NewRunner(core, sim.RunnerOptions{Speedup: 1000}), Tokenizer: tok,
		ServedModelName: servedModel, ModelName: "qwen3-8b", MaxModelLen: 8192, NumGPUBlocks: 1024, BlockSize: 16, Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sim server: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// TestSimulatedEngineReusesTheCache runs two turns of a conversation
// through the gateway against the simulated vLLM engine with the real Qwen3
// template: the engine's own prefix cache must report turn 1's prompt as
// cached in turn 2, in each client's usage fields.
func TestSimulatedEngineReusesTheCache(t *testing.T) {
	tok, err := tokenizer.Qwen3()
	if err != nil {
		t.Skipf("the Qwen3 tokenizer does not load: %v", err)
	}
	url := startSimEngine(t, tok)
	router := newFakeRouter(Route{Worker: "sim", BaseURL: url})
	h := startGateway(t, router, func(c *Config, d *Deps) { d.Tokenizer = tok; c.MaxOutputTokens = 24 })
	ctx := context.Background()
	system := "You are a coding helper. Answer in one sentence. " + longText(40)

	t.Run("anthropic", func(t *testing.T) {
		client := anthropicClient(h, "")
		params := anthropic.MessageNewParams{
			Model: "claude-opus-4-8", MaxTokens: 24,
			System:   []anthropic.TextBlockParam{{Text: "x-anthropic-billing-header: cc_version=1.0.1; cch=aaaaa;"}, {Text: system}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is a goroutine?"))},
		}
		m1, err := client.Messages.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		params.System[0].Text = "x-anthropic-billing-header: cc_version=1.0.1; cch=bbbbb;"
		params.Messages = append(params.Messages, m1.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("And a channel?")))
		stream := client.Messages.NewStreaming(ctx, params)
		var m2 anthropic.Message
		for stream.Next() {
			if err := m2.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		turn1 := router.routed[len(router.routed)-2]
		want := int64(len(turn1.Hashes) * 16)
		if m2.Usage.CacheReadInputTokens < want {
			t.Errorf("turn 2 cache_read_input_tokens %d, want at least turn 1's %d block tokens", m2.Usage.CacheReadInputTokens, want)
		}
		t.Logf("turn 1 input %d tokens; turn 2 input %d + cached %d", m1.Usage.InputTokens+m1.Usage.CacheReadInputTokens, m2.Usage.InputTokens, m2.Usage.CacheReadInputTokens)
	})

	t.Run("openai", func(t *testing.T) {
		client := openAIClient(h, "")
		params := openai.ChatCompletionNewParams{
			Model:    "gpt-5.5",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage("What is a mutex?")},
		}
		c1, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		params.Messages = append(params.Messages, c1.Choices[0].Message.ToParam(), openai.UserMessage("And a semaphore?"))
		c2, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		turn1 := router.routed[len(router.routed)-2]
		if got, want := c2.Usage.PromptTokensDetails.CachedTokens, int64(len(turn1.Hashes)*16); got < want {
			t.Errorf("turn 2 cached_tokens %d, want at least %d", got, want)
		}
	})
}

func longText(sentences int) string {
	s := ""
	for i := range sentences {
		s += "Rule " + string(rune('a'+i%26)) + ": keep functions short and names clear. "
	}
	return s
}
