package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/kvevents"
	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/router/ingest"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// ingestGuard bounds the wait for the router's view: it only stops a hang.
const ingestGuard = 30 * time.Second

// postChat sends a chat completion and returns its usage.
func postChat(t *testing.T, url string, body any) (usage struct {
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}) {
	t.Helper()
	raw, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s, %v", url, resp.Status, err)
	}
	if err := json.Unmarshal(out.Usage, &usage); err != nil {
		t.Fatal(err)
	}
	return usage
}

// byteTokenizer is one token per byte with a ChatML-like template: prompts
// whose tokens a test can predict, at no loading cost.
type byteTokenizer struct{}

func (byteTokenizer) Encode(text string) []uint32 {
	ids := make([]uint32, len(text))
	for i := range len(text) {
		ids[i] = uint32(text[i])
	}
	return ids
}

func (byteTokenizer) Decode(ids []uint32) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func (byteTokenizer) ApplyChatTemplate(req tokenizer.ChatRequest) (string, error) {
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

// signalIndex is a router.Index that tells a test each time it changes.
type signalIndex struct {
	*router.Index
	changed chan struct{}
}

func (s *signalIndex) poke() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *signalIndex) Store(w router.WorkerID, tier kvtier.Tier, h []tokenizer.SeqHash) {
	s.Index.Store(w, tier, h)
	s.poke()
}

func (s *signalIndex) Remove(w router.WorkerID, tier kvtier.Tier, h []tokenizer.SeqHash) {
	s.Index.Remove(w, tier, h)
	s.poke()
}

func (s *signalIndex) ClearWorker(w router.WorkerID) {
	s.Index.ClearWorker(w)
	s.poke()
}

// TestEventsFeedRouter: the router's subscriber ingests either flavour's
// events (SGLang's pages and hashes, vLLM's runs), and a later request that
// shares the prefix matches as many blocks in the router's index as the
// engine then finds in its cache.
func TestEventsFeedRouter(t *testing.T) {
	for _, flavor := range []hruntime.Kind{hruntime.KindVLLM, hruntime.KindSGLang} {
		t.Run(string(flavor), func(t *testing.T) {
			base, idx, sub := startSimFeedingRouter(t, flavor, 0)
			const worker = simWorker

			tokenize := func(msgs []map[string]string) []uint32 { return simTokenize(t, base, msgs) }
			matched := func(tokens []uint32) int {
				var out [router.MaxWorkers]int
				idx.Match(tokenizer.BlockHashes(tokens, 16), kvtier.GPU, &out)
				return out[worker]
			}
			turn1 := []map[string]string{{"role": "system", "content": strings.Repeat("You are a careful coder. ", 10)},
				{"role": "user", "content": "Fix the cache eviction bug in cache.go, please."}}
			postChat(t, base+"/v1/chat/completions", map[string]any{"model": "qwen3-sim", "messages": turn1, "max_tokens": 3})
			prompt1 := tokenize(turn1)
			deadline := time.After(ingestGuard)
			for matched(prompt1) < len(prompt1)/16 {
				select {
				case <-idx.changed:
				case <-deadline:
					t.Fatalf("the router matches %d of the first prompt's %d blocks; ingest %+v",
						matched(prompt1), len(prompt1)/16, sub.Stats())
				}
			}

			turn2 := append(turn1, map[string]string{"role": "assistant", "content": "Done."},
				map[string]string{"role": "user", "content": "Now add a test."})
			predicted := matched(tokenize(turn2))
			got := postChat(t, base+"/v1/chat/completions", map[string]any{"model": "qwen3-sim", "messages": turn2, "max_tokens": 3})
			if predicted == 0 || got.PromptTokensDetails.CachedTokens != predicted*16 {
				t.Errorf("router matched %d blocks of the second turn, the engine found %d cached tokens",
					predicted, got.PromptTokensDetails.CachedTokens)
			}
			if s := sub.Stats()[0]; s.Malformed != 0 || s.Orphans != 0 || s.Skipped != 0 {
				t.Errorf("ingest %+v", s)
			}
		})
	}
}

// simWorker is the worker id of the simulated engine in these tests.
const simWorker router.WorkerID = 3

// startSimFeedingRouter runs a simulated engine of the given flavour
// publishing KV events in format (0: the flavour's default) and a
// subscriber feeding a router index from them, both stopped at the end of
// the test. It returns the engine's base URL, the index and the subscriber.
func startSimFeedingRouter(t *testing.T, flavor hruntime.Kind, format kvevents.Format) (string, *signalIndex, *ingest.Subscriber) {
	t.Helper()
	inst, err := sim.NewInstance(sim.InstanceOptions{
		Engine: sim.Config{GPU: "rtx4090", Model: "qwen3-8b", NumGPUBlocks: 256, MaxModelLen: 2048, Kind: flavor}, Listen: "127.0.0.1:0", KVEvents: "tcp://127.0.0.1:0",
		KVReplay: "tcp://127.0.0.1:0", Topic: "kv-events", ServedModelName: "qwen3-sim", Speedup: 1000,
		Tokenizer: byteTokenizer{}, Format: format,
	})
	if err != nil {
		t.Fatal(err)
	}
	base := inst.BaseURL()
	runCtx, stopRun := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- inst.Run(runCtx) }()
	t.Cleanup(func() {
		stopRun()
		if err := <-runDone; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	if err := hruntime.WaitReady(context.Background(), http.DefaultClient, base, "qwen3-sim", nil); err != nil {
		t.Fatal(err)
	}
	eventFormat := format
	if flavor == hruntime.KindSGLang && !format.SGLang() {
		eventFormat = kvevents.FormatSGLang
	}
	idx := &signalIndex{Index: router.NewIndex(1 << 16), changed: make(chan struct{}, 1)}
	sub, err := ingest.NewSubscriber(ingest.SubscriberConfig{
		Endpoint: inst.KVEventsEndpoint(), ReplayEndpoint: inst.KVReplayEndpoint(), Topic: "kv-events",
		Workers: []router.WorkerID{simWorker}, MinBackoff: time.Millisecond, EventFormat: eventFormat,
	}, idx)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	subDone := make(chan error, 1)
	go func() { subDone <- sub.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-subDone; err != nil {
			t.Errorf("subscriber: %v", err)
		}
	})
	waitSubscribed(t, base, sub)
	return base, idx, sub
}

// waitSubscribed returns once a batch has reached sub live. A PUB socket
// drops what it publishes before it has taken a new subscription in (the
// subscriber's "connected" is not the publisher's), and a test that sends
// one conversation would wait for a batch that was never sent to it: so
// probes, whose first block no test prompt shares, go out until one
// arrives.
func waitSubscribed(t *testing.T, base string, sub *ingest.Subscriber) {
	t.Helper()
	deadline := time.Now().Add(ingestGuard)
	for i := 0; ; i++ {
		probe := []map[string]string{{"role": "user", "content": fmt.Sprintf("probe %d: %s", i, strings.Repeat("is anyone listening? ", 4))}}
		postChat(t, base+"/v1/chat/completions", map[string]any{"model": "qwen3-sim", "messages": probe, "max_tokens": 1})
		for wait := time.Now().Add(200 * time.Millisecond); time.Now().Before(wait); time.Sleep(5 * time.Millisecond) {
			if s := sub.Stats()[0]; s.Batches > s.ReplayBatches {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no KV event batch reached the subscriber live after %d probes; ingest %+v", i+1, sub.Stats())
		}
	}
}

// simTokenize returns the prompt tokens the engine renders for msgs.
func simTokenize(t *testing.T, base string, msgs []map[string]string) []uint32 {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"model": "qwen3-sim", "messages": msgs})
	resp, err := http.Post(base+"/tokenize", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Tokens []uint32 }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Tokens
}

// TestSaltedEventsFeedRouter: a salted conversation on either engine, in
// each of its event forms, is indexed under the hashes the router gives
// the same prompt with the same cache_salt: the salted repeat is predicted
// cached as the engine then serves it, and the same prompt without the
// salt is predicted cached nowhere, as the engine serves it nothing.
func TestSaltedEventsFeedRouter(t *testing.T) {
	for _, tc := range []struct {
		flavor hruntime.Kind
		format kvevents.Format
	}{
		{hruntime.KindVLLM, kvevents.FormatMap},
		{hruntime.KindVLLM, kvevents.FormatArray},
		{hruntime.KindSGLang, kvevents.FormatSGLang},
		{hruntime.KindSGLang, kvevents.FormatSGLangMap},
	} {
		t.Run(string(tc.flavor)+"/"+tc.format.String(), func(t *testing.T) {
			base, idx, sub := startSimFeedingRouter(t, tc.flavor, tc.format)
			matched := func(hashes []tokenizer.SeqHash) int {
				var out [router.MaxWorkers]int
				idx.Match(hashes, kvtier.GPU, &out)
				return out[simWorker]
			}
			chat := func(msgs []map[string]string, salt string) int {
				body := map[string]any{"model": "qwen3-sim", "messages": msgs, "max_tokens": 3}
				if salt != "" {
					body["cache_salt"] = salt
				}
				return postChat(t, base+"/v1/chat/completions", body).PromptTokensDetails.CachedTokens
			}
			turn1 := []map[string]string{{"role": "system", "content": strings.Repeat("Tenant A's private rules. ", 10)},
				{"role": "user", "content": "Summarise the incident report."}}
			chat(turn1, "tenant-a")
			prompt1 := simTokenize(t, base, turn1)
			salted1 := tokenizer.SaltedBlockHashes(prompt1, 16, "tenant-a")
			deadline := time.After(ingestGuard)
			for matched(salted1) < len(salted1) {
				select {
				case <-idx.changed:
				case <-deadline:
					t.Fatalf("the router matches %d of the salted prompt's %d blocks; ingest %+v",
						matched(salted1), len(salted1), sub.Stats())
				}
			}

			turn2 := append(slices.Clone(turn1), map[string]string{"role": "assistant", "content": "Done."},
				map[string]string{"role": "user", "content": "Now list the actions."})
			prompt2 := simTokenize(t, base, turn2)
			if n := matched(tokenizer.BlockHashes(prompt2, 16)); n != 0 {
				t.Errorf("the unsalted prompt is predicted %d blocks cached from salted blocks", n)
			}
			if got := chat(turn2, ""); got != 0 {
				t.Errorf("the engine served the unsalted prompt %d cached tokens", got)
			}
			predicted := matched(tokenizer.SaltedBlockHashes(prompt2, 16, "tenant-a"))
			got := chat(turn2, "tenant-a")
			if predicted == 0 || got != predicted*16 {
				t.Errorf("router predicted %d blocks of the salted repeat, the engine served %d cached tokens", predicted, got)
			}
			if s := sub.Stats()[0]; s.Malformed != 0 || s.Orphans != 0 {
				t.Errorf("ingest %+v", s)
			}
		})
	}
}
