package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/hearth-llm/hearth/tokenizer"
)

// agentTurns is a conversation as an agent sends it: each turn the whole
// history again, plus a tool call and its result.
func agentTurns(system string, turns int) []tokenizer.ChatRequest {
	msgs := []map[string]any{
		{"role": "system", "content": system},
		{"role": "user", "content": "Find why the cache misses after a tool call."},
	}
	var out []tokenizer.ChatRequest
	for t := range turns {
		raw, _ := json.Marshal(msgs)
		out = append(out, tokenizer.ChatRequest{Messages: raw, AddGenerationPrompt: true})
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": fmt.Sprintf("Let me look at step %d.", t)},
			map[string]any{"role": "user", "content": strings.Repeat(fmt.Sprintf("line %d of the tool's output\n", t), 40)})
	}
	return out
}

func TestPromptsMatchAPlainEncodeAndReuseTheHistory(t *testing.T) {
	tok := qwen3(t)
	p := newPrompts(tok, 4, 0)
	if p.conv == nil {
		t.Fatal("the Qwen3 tokenizer offers no sessions")
	}
	main := agentTurns("You are a coding agent. "+strings.Repeat("Follow the rules. ", 200), 6)
	side := agentTurns("Write a five-word title for this conversation.", 6)
	for i := range main {
		// A side request under the same session id between two turns must
		// not cost the main conversation its session.
		for _, req := range []tokenizer.ChatRequest{main[i], side[i]} {
			ids, hashes, err := p.encode(t.Context(), "sess-1", req)
			if err != nil {
				t.Fatal(err)
			}
			_, want, _ := tok.EncodeChat(req)
			if !reflect.DeepEqual(ids, want) || !reflect.DeepEqual(hashes, tokenizer.BlockHashes(want, tokenizer.DefaultBlockSize)) {
				t.Fatalf("turn %d: ids or hashes differ from a plain encode", i)
			}
		}
		if i == 0 {
			continue
		}
		rendered, _ := tok.ApplyChatTemplate(main[i])
		c := p.conversation(conversationKey{"sess-1", shapeOf(rendered)})
		if c.s.Reused() == 0 {
			t.Errorf("turn %d tokenized the whole history again", i)
		}
	}
	if len(p.sessions) != 2 {
		t.Errorf("%d sessions for one conversation and its side requests, want 2", len(p.sessions))
	}
}

func TestPromptsEvictTheLeastRecentlyUsed(t *testing.T) {
	p := newPrompts(qwen3(t), 2, 0)
	req := agentTurns("Be brief. "+strings.Repeat("Answer in English. ", 200), 1)[0]
	for _, id := range []string{"a", "b", "a", "c"} {
		if _, _, err := p.encode(t.Context(), id, req); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for e := p.lru.Front(); e != nil; e = e.Next() {
		ids = append(ids, e.Value.(*conversation).key.sessionID)
	}
	if !reflect.DeepEqual(ids, []string{"c", "a"}) || len(p.sessions) != 2 {
		t.Errorf("kept %v (map %d), want [c a]", ids, len(p.sessions))
	}
}

// TestPromptsUnderConcurrentTurns: requests of one session at once (a
// client's parallel calls) are all encoded right, whichever path they take.
func TestPromptsUnderConcurrentTurns(t *testing.T) {
	tok := qwen3(t)
	p := newPrompts(tok, 4, 0)
	turns := agentTurns("You are a coding agent.", 8)
	var wg sync.WaitGroup
	for i, req := range turns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids, _, err := p.encode(t.Context(), "shared", req)
			_, want, _ := tok.EncodeChat(req)
			if err != nil || !reflect.DeepEqual(ids, want) {
				t.Errorf("turn %d: %v, or ids differ", i, err)
			}
		}()
	}
	wg.Wait()
}

func qwen3(t *testing.T) *tokenizer.Model {
	t.Helper()
	tok, err := tokenizer.Qwen3()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// BenchmarkPromptsAgentTurn is the gateway's tokenizing of one agent turn
// (render, tokenize, hash) over a long history, with and without the
// conversation's session:
//
//	go test -run '^$' -bench PromptsAgentTurn -benchtime 50x ./api/
func BenchmarkPromptsAgentTurn(b *testing.B) {
	tok, err := tokenizer.Qwen3()
	if err != nil {
		b.Fatal(err)
	}
	turns := agentTurns("You are a coding agent. "+strings.Repeat("Follow the rules. ", 200), 60)
	last, next := turns[len(turns)-2], turns[len(turns)-1]
	_, ids, _ := tok.EncodeChat(next)
	for _, tc := range []struct {
		name     string
		sessions int
	}{{"plain", -1}, {"session", 4}} {
		b.Run(tc.name, func(b *testing.B) {
			p := newPrompts(tok, tc.sessions, 0)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				if _, _, err := p.encode(b.Context(), "s", last); err != nil { // the turn before
					b.Fatal(err)
				}
				b.StartTimer()
				if _, _, err := p.encode(b.Context(), "s", next); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(ids)), "prompt-tokens")
		})
	}
}
