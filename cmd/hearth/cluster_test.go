package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/nodes"
	"github.com/hearth-llm/hearth/router"
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
	cluster, err := newSimCluster(rt, simClusterOptions{
		GPUs: gpus, Model: "qwen3-8b", NumGPUBlocks: 48, KVOffloadingGiB: offloadGiB, Speedup: 200,
		Tokenizer: tok, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cluster.Run(ctx) }()
	stop := sync.OnceValue(func() error { cancel(); return <-done })
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("cluster: %v", err)
		}
	}()

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
	for i, w := range cluster.workers {
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
		rt.Index().BlockCounts(kvbm.TierGPU, &gpuCounts)
		rt.Index().BlockCounts(kvbm.TierRAM, &ramCounts)
		agree := true
		for _, w := range cluster.workers {
			st := w.instance.Stats()
			if gpuCounts[w.id] != st.CachedBlocks || ramCounts[w.id] != st.CPUCachedBlocks {
				agree = false
			}
		}
		if agree {
			break
		}
		if time.Now().After(deadline) {
			for _, w := range cluster.workers {
				st := w.instance.Stats()
				t.Errorf("worker %d: router holds %d GPU and %d RAM blocks, engine %d and %d",
					w.id, gpuCounts[w.id], ramCounts[w.id], st.CachedBlocks, st.CPUCachedBlocks)
			}
			t.FailNow()
		}
		time.Sleep(5 * time.Millisecond)
	}
	if offloadGiB > 0 {
		for _, w := range cluster.workers {
			if st := w.instance.Stats(); st.CPUCachedBlocks == 0 || st.CPUCachedBlocks != st.NumCPUBlocks {
				t.Errorf("worker %d: RAM tier holds %d of %d blocks; want it full, so that it evicted", w.id, st.CPUCachedBlocks, st.NumCPUBlocks)
			}
		}
	}
	// The engines' cores may be read once they stopped.
	if err := stop(); err != nil {
		t.Fatalf("cluster: %v", err)
	}

	evicted := false
	var overlap [router.MaxWorkers]int
	for _, p := range prompts {
		_, ids, err := tok.EncodeChat(p)
		if err != nil {
			t.Fatal(err)
		}
		rt.Index().Match(tokenizer.BlockHashes(ids, 16), kvbm.TierGPU, &overlap)
		for _, w := range cluster.workers {
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
	for _, w := range cluster.workers {
		if w.instance.Stats().CachedBlocks == 0 {
			t.Errorf("worker %d cached nothing", w.id)
		}
	}
}
