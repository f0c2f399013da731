package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/router"
	"github.com/hearth-llm/hearth/router/ingest"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker/dockertest"
	"github.com/hearth-llm/hearth/tokenizer"
)

// TestKVEventsFromContainers: the simulated engines in containers, each
// playing a release (Spec.EngineVersion, as an --image tag sets it),
// publish that release's event form on the wire: vLLM v0.20.0 positional
// array_like events, v0.33.0 maps; SGLang v0.5.19 positional events, here
// with --enable-kv-events-component-types so that each BlockStored carries
// the string "full" at index 7, v0.5.23 maps. The router's subscriber
// reads each in the layout of the release (Spec.Release) and indexes a
// salted conversation under the hashes the gateway gives the same prompt
// with the same cache_salt: the salted repeat is predicted cached as the
// engine then serves it, and the same prompt without the salt is predicted
// cached nowhere, as the engine serves it nothing.
func TestKVEventsFromContainers(t *testing.T) {
	cli := dockertest.Client(t)
	for _, tc := range []struct {
		kind       hruntime.Kind
		version    string
		positional bool
		extra      []string
	}{
		{hruntime.KindVLLM, "0.20.0", true, nil},
		{hruntime.KindVLLM, "0.33.0", false, nil},
		{hruntime.KindSGLang, "0.5.19", true, []string{"--enable-kv-events-component-types"}},
		{hruntime.KindSGLang, "0.5.23", false, nil},
	} {
		t.Run(string(tc.kind)+"/"+tc.version, func(t *testing.T) {
			t.Parallel()
			node := dockertest.Node(t, cli)
			spec := dockertest.SimSpec(node, tc.kind)
			spec.EngineVersion, spec.ExtraArgs = tc.version, tc.extra
			h := dockertest.LaunchReady(t, dockertest.SimLauncher(t, cli, tc.kind, node), spec)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), dockertest.LaunchReadyBound)
				defer cancel()
				h.Stop(ctx)
				h.Wait()
			})
			ep := h.Endpoints()
			if ep.KVEvents == "" {
				t.Fatal("the container publishes no KV events")
			}
			ctx, cancel := context.WithTimeout(context.Background(), dockertest.LaunchReadyBound)
			defer cancel()

			// The wire, as the engine writes it: a tap whose
			// subscription is known to have taken effect once a batch
			// of a warm-up request arrives.
			tap, err := ingest.DialTap(ctx, ep.KVEvents, ep.Topic)
			if err != nil {
				t.Fatal(err)
			}
			payloads := make(chan []byte, 256)
			go func() {
				defer close(payloads)
				for {
					p, err := tap.Next()
					if err != nil {
						return
					}
					select {
					case payloads <- bytes.Clone(p): // p is valid until the next call only
					default:
					}
				}
			}()
			defer tap.Close()
			for i := 0; len(payloads) == 0; i++ {
				if ctx.Err() != nil {
					t.Fatal("no KV events arrived from the container")
				}
				chatSalted(t, ep.BaseURL, spec.Model, []map[string]string{{"role": "user", "content": "warm-up " + strings.Repeat("x ", 40+i)}}, "")
				time.Sleep(50 * time.Millisecond)
			}

			release, _ := spec.Release()
			idx := router.NewIndex(1 << 16)
			sub, err := ingest.NewSubscriber(ingest.SubscriberConfig{
				Endpoint: ep.KVEvents, ReplayEndpoint: ep.KVReplay, Topic: ep.Topic,
				Workers: []router.WorkerID{worker}, MinBackoff: time.Millisecond, EventFormat: release.EventFormat,
			}, idx)
			if err != nil {
				t.Fatal(err)
			}
			subCtx, stopSub := context.WithCancel(context.Background())
			subDone := make(chan error, 1)
			go func() { subDone <- sub.Run(subCtx) }()
			defer func() {
				stopSub()
				if err := <-subDone; err != nil {
					t.Errorf("subscriber: %v", err)
				}
			}()
			matched := func(hashes []tokenizer.SeqHash) int {
				var out [router.MaxWorkers]int
				idx.Match(hashes, kvtier.GPU, &out)
				return out[worker]
			}

			turn1 := []map[string]string{{"role": "system", "content": strings.Repeat("Tenant A's private rules. ", 10)},
				{"role": "user", "content": "Summarise the incident report."}}
			chatSalted(t, ep.BaseURL, spec.Model, turn1, "tenant-a")
			salted1 := tokenizer.SaltedBlockHashes(tokenize(t, ep.BaseURL, spec.Model, turn1), 16, "tenant-a")
			for matched(salted1) < len(salted1) {
				if ctx.Err() != nil {
					t.Fatalf("the router matches %d of the salted prompt's %d blocks; ingest %+v",
						matched(salted1), len(salted1), sub.Stats())
				}
				time.Sleep(20 * time.Millisecond)
			}

			turn2 := append(slices.Clone(turn1), map[string]string{"role": "assistant", "content": "Done."},
				map[string]string{"role": "user", "content": "Now list the actions."})
			prompt2 := tokenize(t, ep.BaseURL, spec.Model, turn2)
			if n := matched(tokenizer.BlockHashes(prompt2, 16)); n != 0 {
				t.Errorf("the unsalted prompt is predicted %d blocks cached from salted blocks", n)
			}
			if got := chatSalted(t, ep.BaseURL, spec.Model, turn2, ""); got != 0 {
				t.Errorf("the engine served the unsalted prompt %d cached tokens", got)
			}
			predicted := matched(tokenizer.SaltedBlockHashes(prompt2, 16, "tenant-a"))
			if got := chatSalted(t, ep.BaseURL, spec.Model, turn2, "tenant-a"); predicted == 0 || got != predicted*16 {
				t.Errorf("router predicted %d blocks of the salted repeat, the engine served %d cached tokens", predicted, got)
			}
			if s := sub.Stats()[0]; s.Malformed != 0 || s.Orphans != 0 || s.Skipped != 0 {
				t.Errorf("ingest %+v", s)
			}

			// The form on the wire.
			tap.Close()
			stored := 0
			for p := range payloads {
				var batch []any
				if err := msgpack.Unmarshal(p, &batch); err != nil || len(batch) < 2 {
					t.Fatalf("a batch that is not an array: %v", err)
				}
				events, _ := batch[1].([]any)
				for _, ev := range events {
					fields, positional := ev.([]any)
					if positional != tc.positional {
						t.Fatalf("%s %s published %T events, want positional %v", tc.kind, tc.version, ev, tc.positional)
					}
					if !positional || fields[0] != "BlockStored" {
						continue
					}
					stored++
					if tc.extra != nil && (len(fields) < 8 || fields[7] != "full") {
						t.Errorf("BlockStored without its component type at index 7: %v", fields[:min(len(fields), 8)])
					}
				}
			}
			if tc.positional && stored == 0 {
				t.Error("no positional BlockStored seen on the wire")
			}
		})
	}
}

// worker is the simulated engine's worker id in the router's index.
const worker router.WorkerID = 3

// chatSalted sends a chat request, with a cache_salt unless salt is
// empty, and returns the cached tokens the engine reports.
func chatSalted(t *testing.T, baseURL, model string, msgs []map[string]string, salt string) int {
	t.Helper()
	body := map[string]any{"model": model, "messages": msgs, "max_tokens": 3}
	if salt != "" {
		body["cache_salt"] = salt
	}
	raw, _ := json.Marshal(body)
	resp, err := http.Post(baseURL+"/v1/chat/completions", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Usage struct {
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: %s, %v", resp.Status, err)
	}
	return out.Usage.PromptTokensDetails.CachedTokens
}

// tokenize returns the prompt tokens the engine renders for msgs.
func tokenize(t *testing.T, baseURL, model string, msgs []map[string]string) []uint32 {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"model": model, "messages": msgs})
	resp, err := http.Post(baseURL+"/tokenize", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Tokens []uint32 }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || len(out.Tokens) == 0 {
		t.Fatalf("tokenize: %s, %v", resp.Status, err)
	}
	return out.Tokens
}
