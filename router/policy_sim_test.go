package router

import (
	"container/heap"
	"container/list"
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/kvtier"
	"github.com/hearth-llm/hearth/tokenizer"
)

// A small discrete-event model of agent sessions on two equal GPUs, to check
// that hearth does at least as well as kv where kv is known to be weak: long
// contexts, tool pauses, a cache that cannot hold every session. It is not
// the project's benchmark (package bench has the engine model); it only
// guards the policy against regressions, in virtual time.

type simEngine struct {
	id        WorkerID
	capacity  int // blocks
	speed     float64
	busyUntil time.Time
	lru       *list.List // of tokenizer.SeqHash, most recent at the front
	where     map[tokenizer.SeqHash]*list.Element
}

func newSimEngine(id WorkerID, capacity int, speed float64) *simEngine {
	return &simEngine{id: id, capacity: capacity, speed: speed, lru: list.New(), where: map[tokenizer.SeqHash]*list.Element{}}
}

// cachedPrefix returns how many leading blocks the engine really holds.
func (e *simEngine) cachedPrefix(h []tokenizer.SeqHash) int {
	for i, b := range h {
		if _, ok := e.where[b]; !ok {
			return i
		}
	}
	return len(h)
}

// store caches blocks, evicting the least recently used, and reports both
// to the index as KV events would.
func (e *simEngine) store(ix *Index, h []tokenizer.SeqHash) {
	for _, b := range h {
		if el, ok := e.where[b]; ok {
			e.lru.MoveToFront(el)
		} else {
			e.where[b] = e.lru.PushFront(b)
		}
	}
	ix.Store(e.id, kvtier.GPU, h)
	var victims []tokenizer.SeqHash
	for e.lru.Len() > e.capacity {
		b := e.lru.Remove(e.lru.Back()).(tokenizer.SeqHash)
		delete(e.where, b)
		victims = append(victims, b)
	}
	ix.Remove(e.id, kvtier.GPU, victims)
}

type simEvent struct {
	at      time.Time
	seq     int
	kind    int // 0: turn arrives, 1: prefill done, 2: request done
	session int
	worker  *simEngine
	reqID   string
	blocks  []tokenizer.SeqHash
}

type simEvents []*simEvent

func (q simEvents) Len() int { return len(q) }
func (q simEvents) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q simEvents) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simEvents) Push(x any)   { *q = append(*q, x.(*simEvent)) }
func (q *simEvents) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type simResult struct {
	meanTTFT time.Duration
	hitRate  float64
}

func simulateAgents(t *testing.T, policy string, seed int64) simResult {
	return simulateAgentsWith(t, Config{Policy: policy, Seed: seed, QueueSize: -1})
}

func simulateAgentsWith(t *testing.T, cfg Config) simResult {
	t.Helper()
	const (
		sessions     = 6
		turns        = 12
		blockSize    = 16
		systemBlocks = 250 // 4,000-token system prompt and tools, shared
		capacity     = 1900
		speed        = 5000.0 // prefill tokens/s of a 4090 on a 14B model
		outputTokens = 300
		decodeRate   = 50.0 // tokens/s
	)
	clk := newFakeClock()
	seed := cfg.Seed
	r, err := New(cfg, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	engines := make([]*simEngine, 2)
	for i := range engines {
		id, err := r.AddWorker(WorkerInfo{Name: fmt.Sprint("4090-", i), CapacityBlocks: capacity, PrefillTokensPerSec: speed})
		if err != nil {
			t.Fatal(err)
		}
		engines[i] = newSimEngine(id, capacity, speed)
	}
	rng := rand.New(rand.NewSource(seed))
	system := chain("system", systemBlocks)
	contexts := make([][]tokenizer.SeqHash, sessions)
	turnOf := make([]int, sessions)
	var events simEvents
	seq := 0
	push := func(e *simEvent) {
		seq++
		e.seq = seq
		heap.Push(&events, e)
	}
	start := clk.Now()
	for s := range sessions {
		contexts[s] = append([]tokenizer.SeqHash(nil), system...)
		push(&simEvent{at: start.Add(time.Duration(rng.Intn(20_000)) * time.Millisecond), kind: 0, session: s})
	}
	var ttftSum time.Duration
	var hits, prompts, n int
	for events.Len() > 0 {
		e := heap.Pop(&events).(*simEvent)
		clk.Advance(e.at.Sub(clk.Now()))
		now := clk.Now()
		switch e.kind {
		case 0: // a turn: the agent appends tool output or a user message
			s := e.session
			added := (200 + rng.Intn(1800)) / blockSize
			for range added {
				contexts[s] = append(contexts[s], tokenizer.SeqHash(rng.Uint64()))
			}
			prompt := append([]tokenizer.SeqHash(nil), contexts[s]...)
			id := fmt.Sprint(s, "/", turnOf[s])
			d, err := r.Route(context.Background(), &Request{ID: id, Hashes: prompt, SessionID: fmt.Sprint("s", s),
				Hints: Hints{OSL: outputTokens}})
			if err != nil {
				t.Fatal(err)
			}
			eng := engines[d.WorkerID]
			cached := eng.cachedPrefix(prompt)
			hits += cached
			prompts += len(prompt)
			uncached := (len(prompt) - cached) * blockSize
			begin := now
			if eng.busyUntil.After(begin) {
				begin = eng.busyUntil
			}
			done := begin.Add(time.Duration(float64(uncached) / eng.speed * float64(time.Second)))
			eng.busyUntil = done
			ttftSum += done.Sub(now)
			n++
			push(&simEvent{at: done, kind: 1, session: s, worker: eng, reqID: id, blocks: prompt})
		case 1: // first token: the prompt is cached
			e.worker.store(r.Index(), e.blocks)
			r.PrefillDone(e.reqID)
			push(&simEvent{at: now.Add(time.Duration(outputTokens / decodeRate * float64(time.Second))), kind: 2,
				session: e.session, worker: e.worker, reqID: e.reqID})
		case 2: // answer done: its output joins the context; the agent runs a tool
			s := e.session
			out := make([]tokenizer.SeqHash, outputTokens/blockSize)
			for i := range out {
				out[i] = tokenizer.SeqHash(rng.Uint64())
			}
			contexts[s] = append(contexts[s], out...)
			e.worker.store(r.Index(), contexts[s])
			r.Free(e.reqID)
			turnOf[s]++
			if turnOf[s] < turns {
				pause := time.Duration(2_000+rng.Intn(28_000)) * time.Millisecond
				push(&simEvent{at: now.Add(pause), kind: 0, session: s})
			}
		}
	}
	return simResult{meanTTFT: ttftSum / time.Duration(n), hitRate: float64(hits) / float64(prompts)}
}

func TestHearthAtLeastMatchesKVOnAgentSessions(t *testing.T) {
	var hearthSum, kvSum time.Duration
	const seeds = 8
	for seed := range int64(seeds) {
		h := simulateAgents(t, PolicyHearth, seed)
		k := simulateAgents(t, PolicyKV, seed)
		t.Logf("seed %d: hearth TTFT %v (hit %.2f), kv TTFT %v (hit %.2f)", seed, h.meanTTFT, h.hitRate, k.meanTTFT, k.hitRate)
		hearthSum += h.meanTTFT
		kvSum += k.meanTTFT
	}
	if hearthSum > kvSum {
		t.Errorf("hearth mean TTFT %v worse than kv %v over %d seeds", hearthSum/seeds, kvSum/seeds, seeds)
	}
	t.Logf("mean TTFT over %d seeds: hearth %v, kv %v", seeds, hearthSum/seeds, kvSum/seeds)
}
