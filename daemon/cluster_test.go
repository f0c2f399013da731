package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// TestRouterViewEqualsEngines runs three simulated engines with small KV
// caches (so blocks get evicted), sends them agent-like conversations over
// HTTP, and checks that the router, which knows the engines only from their
// ZMQ KV events, holds exactly the blocks each engine holds: the same number,
// and for every prompt sent the same cached prefix. The router hashes the
// prompts with the tokenizer package, the engines with their own hashes over
// the same tokens, so this also proves the two tokenize alike.
func TestRouterViewEqualsEngines(t *testing.T) {
	t.Run("gpu only", func(t *testing.T) { testRouterViewEqualsEngines(t, 0) })
	// A host-RAM tier far smaller than what is sent, so it evicts too.
	t.Run("gpu and ram", func(t *testing.T) { testRouterViewEqualsEngines(t, 0.05) })
}

func testRouterViewEqualsEngines(t *testing.T, offloadGiB float64) {
	tok, err := tokenizer.Qwen3()
	if err != nil {
		t.Fatal(err)
	}
	rt, err := router.New(router.Config{Policy: "round_robin"})
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := nodes.ParseSimSpec("2x4090+3090")
	if err != nil {
		t.Fatal(err)
	}
	// Engines put into service as the supervisor does: launched, ready,
	// measured, attached to the router through the fleet.
	launcher := &sim.Launcher{Tokenizer: tok}
	engines := newFleet(rt, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	type testEngine struct {
		h        hruntime.Handle
		instance *sim.Instance
		id       router.WorkerID
		detach   func()
	}
	var workers []testEngine
	// stop ends the engines but keeps them in the router, whose view is
	// compared with the stopped engines' caches below.
	stop := sync.OnceValue(func() error {
		var errs []error
		for _, w := range workers {
			errs = append(errs, w.h.Stop(context.Background()))
		}
		return errors.Join(errs...)
	})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("engines: %v", err)
		}
		cancel()
		for _, w := range workers {
			w.detach()
		}
	}()
	for i, gpu := range gpus {
		spec := hruntime.Spec{
			Name: fmt.Sprintf("gpu%d", i), Engine: hruntime.KindVLLM, Simulated: true, Model: "qwen3-8b",
			GPU: hruntime.GPU{Index: i, Kind: gpu.Kind}, NumGPUBlocks: 48, KVOffloadingGiB: offloadGiB, Speedup: 200,
		}
		h, err := launcher.Launch(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		profile := hruntime.MeasureProfile(ctx, http.DefaultClient, h.Endpoints().BaseURL, spec.Engine, catalog.Profile{})
		if !profile.Measured || profile.GPUBlocks != 48 {
			t.Fatalf("engine %d: measured profile %+v, want 48 GPU blocks from its metrics", i, profile)
		}
		detach, err := engines.Attach(ctx, hruntime.ReadyEngine{Spec: spec, Runtime: launcher.Name(), Endpoints: h.Endpoints(), Profile: profile})
		if err != nil {
			t.Fatal(err)
		}
		id, ok := rt.WorkerByName(spec.Name)
		if !ok {
			t.Fatalf("engine %s attached but not in service", spec.Name)
		}
		workers = append(workers, testEngine{h: h, instance: h.(interface{ Instance() *sim.Instance }).Instance(), id: id, detach: detach})
	}

	// Conversations that share a system prompt and grow turn by turn, sent
	// to every engine, so that caches fill, share prefixes and evict.
	system := "You are a careful coding assistant. Answer briefly and cite the files you read."
	var prompts []tokenizer.ChatRequest
	for conv := range 4 {
		messages := []map[string]string{{"role": "system", "content": system}}
		for turn := range 3 {
			messages = append(messages, map[string]string{"role": "user",
				"content": fmt.Sprintf("Conversation %d, turn %d: explain how the cache index handles block %d of the request, in detail.", conv, turn, conv*7+turn)})
			raw, _ := json.Marshal(messages)
			prompts = append(prompts, tokenizer.ChatRequest{Messages: raw, AddGenerationPrompt: true})
			messages = append(messages, map[string]string{"role": "assistant", "content": fmt.Sprintf("Turn %d handled.", turn)})
		}
	}
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, p := range prompts {
				if (i+j)%2 == 0 { // each engine sees a different half
					continue
				}
				body, _ := json.Marshal(map[string]any{"model": "qwen3-8b", "messages": json.RawMessage(p.Messages), "max_tokens": 20})
				resp, err := http.Post(w.instance.BaseURL()+"/v1/chat/completions", "application/json", bytes.NewReader(body))
				if err != nil {
					t.Errorf("engine %d: %v", i, err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("engine %d: status %d", i, resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()

	// Events travel asynchronously over ZMQ; there is no notification when
	// the router has applied the last one, so poll until the block counts
	// agree. The deadline only stops a test that hangs.
	var gpuCounts, ramCounts [router.MaxWorkers]int
	deadline := time.Now().Add(time.Minute)
	for {
		rt.Index().BlockCounts(kvtier.GPU, &gpuCounts)
		rt.Index().BlockCounts(kvtier.RAM, &ramCounts)
		agree := true
		for _, w := range workers {
			st := w.instance.Stats()
			if gpuCounts[w.id] != st.CachedBlocks || ramCounts[w.id] != st.CPUCachedBlocks {
				agree = false
			}
		}
		if agree {
			break
		}
		if time.Now().After(deadline) {
			for _, w := range workers {
				st := w.instance.Stats()
				t.Errorf("worker %d: router holds %d GPU and %d RAM blocks, engine %d and %d",
					w.id, gpuCounts[w.id], ramCounts[w.id], st.CachedBlocks, st.CPUCachedBlocks)
			}
			t.FailNow()
		}
		time.Sleep(5 * time.Millisecond)
	}
	if offloadGiB > 0 {
		for _, w := range workers {
			if st := w.instance.Stats(); st.CPUCachedBlocks == 0 || st.CPUCachedBlocks != st.NumCPUBlocks {
				t.Errorf("worker %d: RAM tier holds %d of %d blocks; want it full, so that it evicted", w.id, st.CPUCachedBlocks, st.NumCPUBlocks)
			}
		}
	}
	// The engines' cores may be read once they stopped.
	if err := stop(); err != nil {
		t.Fatalf("engines: %v", err)
	}

	evicted := false
	var overlap [router.MaxWorkers]int
	for _, p := range prompts {
		_, ids, err := tok.EncodeChat(p)
		if err != nil {
			t.Fatal(err)
		}
		rt.Index().Match(tokenizer.BlockHashes(ids, 16), kvtier.GPU, &overlap)
		for _, w := range workers {
			want := w.instance.Core().CachedPrefixBlocks(ids)
			if overlap[w.id] != want {
				t.Errorf("worker %d, prompt of %d tokens: router predicts %d cached blocks, engine holds %d", w.id, len(ids), overlap[w.id], want)
			}
			if want < len(ids)/16 {
				evicted = true
			}
		}
	}
	if !evicted {
		t.Error("every prompt stayed fully cached everywhere: the caches were too big to test eviction")
	}
	for _, w := range workers {
		if w.instance.Stats().CachedBlocks == 0 {
			t.Errorf("worker %d cached nothing", w.id)
		}
	}
}
