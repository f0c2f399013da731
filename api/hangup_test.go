package api

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/hearth-llm/hearth/tokenizer"
)

// watchedEncoder is the Qwen3 tokenizer, telling when a prompt's
// tokenization begins and how it ended. It offers no sessions, so that
// every prompt takes EncodeContext.
type watchedEncoder struct {
	model   *tokenizer.Model
	once    sync.Once
	started chan struct{}    // closed when the first EncodeContext begins
	ended   chan encodeEnded // each EncodeContext's outcome
}

type encodeEnded struct {
	ids int
	err error
}

func (w *watchedEncoder) EncodeChat(r tokenizer.ChatRequest) (string, []uint32, error) {
	return w.model.EncodeChat(r)
}

func (w *watchedEncoder) Encode(text string) []uint32 { return w.model.Encode(text) }

func (w *watchedEncoder) ApplyChatTemplate(r tokenizer.ChatRequest) (string, error) {
	return w.model.ApplyChatTemplate(r)
}

func (w *watchedEncoder) EncodeContext(ctx context.Context, text string) ([]uint32, error) {
	w.once.Do(func() { close(w.started) })
	ids, err := w.model.EncodeContext(ctx, text)
	w.ended <- encodeEnded{ids: len(ids), err: err}
	return ids, err
}

// TestClientHangingUpStopsItsPromptsTokenization: a client (the OpenAI SDK)
// sends a prompt of long single words, the kind a minified file or a
// base64 blob in a tool result makes, 8 MB that take seconds to tokenize
// whole, and hangs up once the gateway has begun tokenizing it. The
// gateway notices the closed connection and the tokenizer, which looks at
// the request's context between words, stops with the context's error
// instead of tokenizing the rest for nobody; nothing is routed. With the
// check between words gone, the tokenization runs to its end and returns
// the prompt's tokens.
func TestClientHangingUpStopsItsPromptsTokenization(t *testing.T) {
	enc := &watchedEncoder{model: qwen3(t), started: make(chan struct{}), ended: make(chan encodeEnded, 1)}
	h := startGateway(t, nil, withKeys("sk-test"),
		withConfig(func(c *Config) { c.ClientCheck = 5 * time.Millisecond }),
		func(_ *Config, d *Deps) { d.Tokenizer = enc })

	// 40 words of 200k characters: each merges in tens of milliseconds
	// (BenchmarkMergeLongWord), the whole prompt in seconds.
	word := strings.Repeat("a", 200_000)
	prompt := strings.TrimSpace(strings.Repeat(word+" ", 40))

	ctx, hangUp := context.WithCancel(t.Context())
	defer hangUp()
	client := openAIClient(h, "sk-test")
	answered := make(chan error, 1)
	go func() {
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "gpt-5.5",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		})
		answered <- err
	}()
	select {
	case <-enc.started:
	case err := <-answered:
		t.Fatalf("the request ended before its prompt was tokenized: %v", err)
	}
	hungUp := time.Now()
	hangUp() // the transport closes the connection under the request
	if err := <-answered; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client's call after hanging up: %v, want context.Canceled", err)
	}
	got := <-enc.ended
	t.Logf("the tokenization ended %v after the client hung up", time.Since(hungUp).Round(time.Millisecond))
	if !errors.Is(got.err, context.Canceled) || got.ids != 0 {
		t.Fatalf("the tokenization after the client hung up returned %d ids and %v; want none and context.Canceled", got.ids, got.err)
	}
	h.router.mu.Lock()
	defer h.router.mu.Unlock()
	if n := len(h.router.routed); n != 0 {
		t.Fatalf("%d requests were routed for a client that had hung up", n)
	}
}
