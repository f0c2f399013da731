package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/hearth-llm/hearth/kvevents"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
	"github.com/hearth-llm/hearth/zmtp"
)

// engine is the engine under test.
type engine struct {
	kind    hruntime.Kind
	baseURL string
	// events is its KV-event publisher ("tcp://127.0.0.1:5557") and topic
	// the topic it publishes on; events "" skips the KV-event check.
	events, topic string
	// model is the served model's name; "" takes the first /v1/models
	// lists.
	model string
	tok   *tokenizer.Model
	// blockSize is the engine's KV block size in tokens.
	blockSize int
}

// TestSimulatedEngines runs the suite against both simulated kinds.
func TestSimulatedEngines(t *testing.T) {
	tok, err := tokenizer.Qwen3()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []hruntime.Kind{hruntime.KindVLLM, hruntime.KindSGLang} {
		t.Run(string(kind), func(t *testing.T) {
			spec := hruntime.Spec{
				Name: "conformance/gpu0", Engine: kind, Simulated: true, Model: "qwen3-8b",
				GPU: hruntime.GPU{Kind: "rtx4090"}, NumGPUBlocks: 256, Speedup: 200,
			}
			h, err := (&sim.Launcher{Tokenizer: tok}).Launch(t.Context(), spec)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := h.Stop(context.Background()); err != nil {
					t.Errorf("stop: %v", err)
				}
			})
			if err := h.Ready(t.Context()); err != nil {
				t.Fatal(err)
			}
			ep := h.Endpoints()
			run(t, engine{kind: kind, baseURL: ep.BaseURL, events: ep.KVEvents, topic: ep.Topic, model: spec.Model,
				tok: tok, blockSize: tokenizer.DefaultBlockSize})
		})
	}
}

// TestRealEngine runs the suite against the engine HEARTH_CONFORMANCE_URL
// names (docs/engine-conformance.md).
func TestRealEngine(t *testing.T) {
	url := os.Getenv("HEARTH_CONFORMANCE_URL")
	if url == "" {
		t.Skip("HEARTH_CONFORMANCE_URL is not set: no real engine to check " +
			"(set it to a serving vLLM or SGLang, e.g. http://127.0.0.1:8000, with HEARTH_CONFORMANCE_KIND and HEARTH_CONFORMANCE_EVENTS)")
	}
	kind, err := hruntime.KindOf(cmpOr(os.Getenv("HEARTH_CONFORMANCE_KIND"), string(hruntime.KindVLLM)))
	if err != nil {
		t.Fatalf("HEARTH_CONFORMANCE_KIND: %v", err)
	}
	e := engine{kind: kind.Name, baseURL: url, events: os.Getenv("HEARTH_CONFORMANCE_EVENTS"),
		topic: os.Getenv("HEARTH_CONFORMANCE_TOPIC"), model: os.Getenv("HEARTH_CONFORMANCE_MODEL"), blockSize: tokenizer.DefaultBlockSize}
	if bs := os.Getenv("HEARTH_CONFORMANCE_BLOCK_SIZE"); bs != "" {
		if e.blockSize, err = strconv.Atoi(bs); err != nil || e.blockSize < 1 {
			t.Fatalf("HEARTH_CONFORMANCE_BLOCK_SIZE %q: want a positive integer", bs)
		}
	}
	if dir := os.Getenv("HEARTH_CONFORMANCE_TOKENIZER"); dir != "" {
		e.tok, err = tokenizer.Load(dir)
	} else {
		e.tok, err = tokenizer.Qwen3()
	}
	if err != nil {
		t.Fatal(err)
	}
	run(t, e)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// run is the suite.
func run(t *testing.T, e engine) {
	client := &http.Client{Timeout: 30 * time.Second}
	t.Run("ready", func(t *testing.T) {
		resp, err := client.Get(e.baseURL + e.kind.Descriptor().LivenessPath)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", e.kind.Descriptor().LivenessPath, resp.Status)
		}
		var models struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		getJSON(t, client, e.baseURL+"/v1/models", &models)
		ids := make([]string, len(models.Data))
		for i, m := range models.Data {
			ids[i] = m.ID
		}
		if e.model == "" && len(ids) > 0 {
			e.model = ids[0]
		}
		if !slices.Contains(ids, e.model) {
			t.Fatalf("/v1/models lists %v, not %q", ids, e.model)
		}
	})
	if t.Failed() {
		return
	}

	t.Run("tokenize", func(t *testing.T) {
		c := hruntime.CheckTokenizer(t.Context(), client, e.baseURL, e.model, e.kind.Descriptor(), e.tok, hruntime.TokenizerSamples())
		if c.State != hruntime.TokenizerAgrees {
			t.Fatal(c.String())
		}
	})

	t.Run("kv events", func(t *testing.T) {
		if e.events == "" {
			t.Skip("no KV-event endpoint given (HEARTH_CONFORMANCE_EVENTS)")
		}
		checkKVEvents(t, client, e)
	})

	t.Run("kv event self-check", func(t *testing.T) {
		if e.events == "" {
			t.Skip("no KV-event endpoint given (HEARTH_CONFORMANCE_EVENTS)")
		}
		stream, err := dialEvents(t.Context(), e.events, e.topic)
		if err != nil {
			t.Fatal(err)
		}
		// The self-check Hearth runs when an engine becomes ready.
		c := hruntime.CheckKVEvents(t.Context(), client, hruntime.KVProbe{
			BaseURL: e.baseURL, Model: e.model, Events: stream, Format: e.kind.Descriptor().EventFormat,
			Tokens:    hruntime.KVProbeTokens(e.tok, fmt.Sprint(time.Now().UnixNano()), hruntime.KVProbeBlocks, e.blockSize),
			BlockSize: e.blockSize, Split: hruntime.KVProbeSplit, Wait: hruntime.DefaultKVCheckWait,
		})
		if c.State != hruntime.KVEventsMatch {
			t.Fatal(c.String())
		}
	})

	t.Run("metrics", func(t *testing.T) {
		s, err := hruntime.ScrapeStats(t.Context(), client, e.baseURL)
		if err != nil {
			t.Fatal(err)
		}
		// The request of the KV-event check (or the self-check's
		// traffic) ran before: a serving engine counts its tokens.
		if s.KVUsage < 0 || s.KVUsage > 1 || (e.events != "" && s.GenerationTokens < 1) {
			t.Errorf("metrics parsed to %+v", s)
		}
	})
}

// checkKVEvents sends one chat request with a prompt no cache holds and
// waits for the BlockStored events of its blocks: their token ids, in
// chain order, must be the prompt's full blocks as the engine's /tokenize
// gives them, and Hearth's block hashes of those ids the hashes of
// Hearth's own tokenization of the prompt.
func checkKVEvents(t *testing.T, client *http.Client, e engine) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	sub, err := zmtp.Dial(ctx, e.events, zmq4.Sub)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.Send(append([]byte{1}, e.topic...)); err != nil {
		t.Fatal(err)
	}
	// The SUB's subscription reaches the publisher asynchronously: give it
	// a moment before the request whose events are awaited.
	time.Sleep(200 * time.Millisecond)

	messages := fmt.Sprintf(`[{"role":"user","content":"Conformance %d: list three prime numbers above one hundred and say why each is prime."}]`, time.Now().UnixNano())
	text, err := e.tok.ApplyChatTemplate(tokenizer.ChatRequest{Messages: json.RawMessage(messages), AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	ours := e.tok.Encode(text)
	full := len(ours) / e.blockSize * e.blockSize
	if full == 0 {
		t.Fatalf("the prompt has %d tokens, less than a block", len(ours))
	}
	body := fmt.Sprintf(`{"model":%q,"messages":%s,"max_tokens":1}`, e.model, messages)
	resp, err := client.Post(e.baseURL+"/v1/chat/completions", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: %s: %s", resp.Status, answer)
	}

	// Collect GPU BlockStored events until they chain over the prompt.
	dec := kvevents.Decoder{Format: e.kind.Descriptor().EventFormat}
	var batch kvevents.Batch
	tokensOf := map[uint64][]uint32{} // engine hash -> the block's tokens
	parentOf := map[uint64]uint64{}
	go func() {
		<-ctx.Done()
		sub.Close() // ends a Recv waiting past the deadline
	}()
	for {
		frames, err := sub.Recv()
		if err != nil {
			t.Fatalf("no KV events covering the prompt's %d full blocks arrived: %v", full/e.blockSize, err)
		}
		_, payload, err := kvevents.ParseMessage(frames)
		if err != nil {
			t.Fatalf("KV-event message: %v", err)
		}
		if err := dec.Decode(payload, &batch); err != nil {
			t.Fatalf("KV-event batch: %v", err)
		}
		for _, ev := range batch.Events {
			if ev.Kind != kvevents.BlockStored || ev.Medium != kvevents.MediumGPU || len(ev.TokenIDs) != len(ev.BlockHashes)*e.blockSize {
				continue
			}
			parent, has := ev.ParentBlockHash, ev.HasParent
			for i, h := range ev.BlockHashes {
				tokensOf[h] = ev.TokenIDs[i*e.blockSize : (i+1)*e.blockSize]
				if has {
					parentOf[h] = parent
				}
				parent, has = h, true
			}
		}
		if got := chainCovering(tokensOf, parentOf, ours[:full], e.blockSize); got != nil {
			want := tokenizer.BlockHashes(ours[:full], e.blockSize)
			if have := tokenizer.BlockHashes(got, e.blockSize); !slices.Equal(have, want) {
				t.Fatalf("the events' blocks hash to %v, Hearth's tokenization to %v", have, want)
			}
			return
		}
	}
}

// eventStream is the engine's KV events over one ZMTP subscription, as
// the daemon's tap (router/ingest.DialTap) reads them.
type eventStream struct{ conn *zmtp.Conn }

func dialEvents(ctx context.Context, endpoint, topic string) (hruntime.KVEventStream, error) {
	conn, err := zmtp.Dial(ctx, endpoint, zmq4.Sub)
	if err != nil {
		return nil, err
	}
	if err := conn.Send(append([]byte{1}, topic...)); err != nil {
		conn.Close()
		return nil, err
	}
	return eventStream{conn}, nil
}

func (s eventStream) Next() ([]byte, error) {
	frames, err := s.conn.Recv()
	if err != nil {
		return nil, err
	}
	_, payload, err := kvevents.ParseMessage(frames)
	return payload, err
}

func (s eventStream) Close() error { return s.conn.Close() }

// chainCovering returns the tokens of a chain of stored blocks, first block
// without a parent, that spells prompt; nil while none does.
func chainCovering(tokensOf map[uint64][]uint32, parentOf map[uint64]uint64, prompt []uint32, blockSize int) []uint32 {
	for h, toks := range tokensOf {
		// The chain's last block holds the prompt's last full block.
		if !slices.Equal(toks, prompt[len(prompt)-blockSize:]) {
			continue
		}
		var chain [][]uint32
		for cur, ok := h, true; ok; cur, ok = parentOf[cur] {
			b, known := tokensOf[cur]
			if !known {
				break
			}
			chain = append(chain, b)
		}
		slices.Reverse(chain)
		if got := slices.Concat(chain...); slices.Equal(got, prompt) {
			return got
		}
	}
	return nil
}

func getJSON(t *testing.T, client *http.Client, url string, v any) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
