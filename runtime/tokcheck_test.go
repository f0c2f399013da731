package runtime_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// idleEngine is an engine loop that serves no generation: /tokenize needs
// none.
type idleEngine struct{}

func (idleEngine) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (idleEngine) Submit(context.Context, *sim.Request) (<-chan sim.TokenOutput, error) {
	return nil, errors.New("idle engine")
}
func (idleEngine) Stats() sim.Stats { return sim.Stats{} }

// simulatedTokenizeServer is a simulated engine of kind, tokenizing with
// tok, on loopback.
func simulatedTokenizeServer(t *testing.T, kind hruntime.Kind, tok sim.Tokenizer) string {
	t.Helper()
	s, err := sim.NewServer(sim.ServerOptions{Engine: idleEngine{}, Tokenizer: tok, ServedModelName: "qwen3-8b", MaxModelLen: 32768, Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

func qwen3(t testing.TB) *tokenizer.Model {
	t.Helper()
	tok, err := tokenizer.Qwen3()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestCheckTokenizer: the self-check against both simulated kinds, with
// the engine's tokenizer the same as Hearth's and with one that does not
// know <tool_response>: the tool round differs exactly where Hearth's ids
// hold that token.
func TestCheckTokenizer(t *testing.T) {
	tok := qwen3(t)
	samples := hruntime.TokenizerSamples()
	toolRound := samples[1]
	text, err := tok.ApplyChatTemplate(tokenizer.ChatRequest{Messages: toolRound.Messages, Tools: toolRound.Tools, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	special := tok.Encode("<tool_response>")
	if len(special) != 1 {
		t.Fatalf("<tool_response> is %v, not one added token", special)
	}
	wantAt := slices.Index(tok.Encode(text), special[0])
	if wantAt < 0 {
		t.Fatalf("the tool round has no <tool_response>: %q", text)
	}
	for _, kind := range []hruntime.Kind{hruntime.KindVLLM, hruntime.KindSGLang} {
		t.Run(string(kind), func(t *testing.T) {
			same := simulatedTokenizeServer(t, kind, tok)
			c := hruntime.CheckTokenizer(t.Context(), http.DefaultClient, same, "qwen3-8b", kind.Descriptor(), tok, samples)
			if c.State != hruntime.TokenizerAgrees || c.Tokens < 1000 {
				t.Errorf("same tokenizer: %+v", c)
			}

			wrong := simulatedTokenizeServer(t, kind, sim.MisreadToken(tok, "<tool_response>"))
			c = hruntime.CheckTokenizer(t.Context(), http.DefaultClient, wrong, "qwen3-8b", kind.Descriptor(), tok, samples)
			if c.State != hruntime.TokenizerDiffers || c.Sample != "tool round" || c.Position != wantAt ||
				c.HearthID != int64(special[0]) || c.EngineID == c.HearthID || !strings.Contains(c.Near, "<tool_response>") {
				t.Errorf("wrong tokenizer: %+v, want tool round at %d", c, wantAt)
			}
			if s := c.String(); !strings.Contains(s, "differs at token") || !strings.Contains(s, "predicted caches") {
				t.Errorf("the sentence: %s", s)
			}
		})
	}

	t.Run("no /tokenize", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		defer srv.Close()
		c := hruntime.CheckTokenizer(t.Context(), http.DefaultClient, srv.URL, "m", hruntime.KindVLLM.Descriptor(), tok, samples)
		if c.State != hruntime.TokenizerUnchecked || !strings.Contains(c.Detail, "404") {
			t.Errorf("%+v", c)
		}
	})
}

func TestFirstDifference(t *testing.T) {
	for _, tc := range []struct {
		ours   []uint32
		theirs []int64
		at     int
		ok     bool
	}{
		{nil, nil, 0, false},
		{[]uint32{1, 2, 3}, []int64{1, 2, 3}, 0, false},
		{[]uint32{1, 2, 3}, []int64{1, 9, 3}, 1, true},
		{[]uint32{1, 2, 3}, []int64{1, 2}, 2, true},
		{[]uint32{1}, []int64{1, 2}, 1, true},
		{[]uint32{7}, []int64{}, 0, true},
	} {
		if at, ok := hruntime.FirstDifference(tc.ours, tc.theirs); at != tc.at || ok != tc.ok {
			t.Errorf("FirstDifference(%v, %v) = %d, %v; want %d, %v", tc.ours, tc.theirs, at, ok, tc.at, tc.ok)
		}
	}
}

func FuzzParseTokenizeAnswer(f *testing.F) {
	for _, seed := range []string{
		`{"count":2,"max_model_len":4096,"tokens":[14990,1879],"token_strs":null}`,
		`{"tokens":[1,2],"count":2,"max_model_len":131072}`, `{"tokens":[[1],[2]]}`, `{"tokens":[-1]}`,
		`{"tokens":[4294967296]}`, `{}`, `[]`, `{"tokens":null}`, `{"tokens":[1.5]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		ids, err := hruntime.ParseTokenizeAnswer(answer)
		if err != nil {
			return
		}
		for _, id := range ids {
			if id < 0 || id > 1<<32-1 {
				t.Fatalf("id %d accepted from %q", id, answer)
			}
		}
	})
}
