package sim

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestChunkedPrefill(t *testing.T) {
	tests := []struct {
		name       string
		budget     int
		prompt     int
		wantChunks []int // tokens per step until the first token
	}{
		{"fits one step", 8192, 6000, []int{6000}},
		{"three chunks", 2048, 6000, []int{2048, 2048, 1904}},
		{"exact multiple", 1000, 3000, []int{1000, 1000, 1000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCore(t, Config{MaxNumBatchedTokens: tt.budget}, nil)
			d := newDriver(c)
			mustAdd(t, c, 0, &Request{ID: "a", Prompt: tokens(1, tt.prompt), Output: tokens(1, 3)})
			var chunks []int
			for {
				res := d.step(t)
				chunks = append(chunks, res.NumTokens)
				if len(res.Outputs) > 0 {
					break
				}
			}
			if !slices.Equal(chunks, tt.wantChunks) {
				t.Errorf("chunks %v, want %v", chunks, tt.wantChunks)
			}
			// Then one token per decode step.
			if res := d.step(t); res.NumTokens != 1 || len(res.Outputs) != 1 {
				t.Errorf("decode step: %d tokens, %d outputs", res.NumTokens, len(res.Outputs))
			}
		})
	}
}

func TestBudgetSharedByDecodesAndPrefills(t *testing.T) {
	// Running decodes are served first; a new prompt gets what is left of
	// the budget, and the remainder of its prompt in the next step.
	c := newCore(t, Config{MaxNumBatchedTokens: 100}, nil)
	d := newDriver(c)
	for i := range 3 {
		mustAdd(t, c, 0, &Request{ID: fmt.Sprint("dec", i), Prompt: tokens(i*1000, 20), Output: tokens(1, 10)})
	}
	if res := d.step(t); res.NumTokens != 60 || len(res.Outputs) != 3 {
		t.Fatalf("first step: %d tokens, %d outputs; want 60, 3", res.NumTokens, len(res.Outputs))
	}
	mustAdd(t, c, d.now, &Request{ID: "long", Prompt: tokens(50_000, 150), Output: tokens(1, 2)})
	res := d.step(t)
	if res.NumTokens != 100 || res.NumScheduled != 4 || len(res.Outputs) != 3 {
		t.Fatalf("second step: %+v; want 3 decodes + 97 prefill tokens", res)
	}
	if got := c.byID["long"].numComputed; got != 97 {
		t.Errorf("long prompt computed %d tokens, want 97", got)
	}
	res = d.step(t)
	if res.NumTokens != 3+53 || len(res.Outputs) != 4 {
		t.Errorf("third step: %d tokens, %d outputs; want 56, 4", res.NumTokens, len(res.Outputs))
	}
}

func TestMaxNumSeqs(t *testing.T) {
	c := newCore(t, Config{MaxNumSeqs: 4}, nil)
	d := newDriver(c)
	for i := range 10 {
		mustAdd(t, c, 0, &Request{ID: fmt.Sprint(i), Prompt: tokens(i*1000, 30), Output: tokens(1, 5)})
	}
	maxRunning := 0
	for c.HasWork() {
		res := d.step(t)
		maxRunning = max(maxRunning, res.NumScheduled, c.Stats().Running)
	}
	if maxRunning != 4 {
		t.Errorf("at most %d running, want 4", maxRunning)
	}
	if len(d.done) != 10 {
		t.Errorf("%d requests finished, want 10", len(d.done))
	}
}

func TestQueueOrder(t *testing.T) {
	reqs := []struct {
		id       string
		priority int
	}{{"a", 5}, {"b", 1}, {"c", 5}, {"d", 0}, {"e", 1}}
	tests := []struct {
		policy      string
		higherFirst bool // SGLang's order
		want        []string
	}{
		{PolicyFCFS, false, []string{"a", "b", "c", "d", "e"}},
		{PolicyPriority, false, []string{"d", "b", "e", "a", "c"}},
		{PolicyPriority, true, []string{"a", "c", "b", "e", "d"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s higher first %v", tt.policy, tt.higherFirst), func(t *testing.T) {
			// One request at a time: order of first tokens is queue order.
			c := newCore(t, Config{MaxNumSeqs: 1, SchedulingPolicy: tt.policy, PriorityHigherFirst: tt.higherFirst}, nil)
			for i, r := range reqs {
				mustAdd(t, c, 0, &Request{ID: r.id, Prompt: tokens(i*1000, 40), Output: tokens(1, 2), Priority: r.priority})
			}
			var order []string
			for c.HasWork() {
				for _, o := range c.Step(0).Outputs {
					if o.Index == 0 {
						order = append(order, o.RequestID)
					}
				}
			}
			if !slices.Equal(order, tt.want) {
				t.Errorf("order %v, want %v", order, tt.want)
			}
		})
	}
}

func TestPreemption(t *testing.T) {
	// 12 blocks; three requests of 4 prompt blocks each grow by 48 tokens:
	// they cannot all keep running, and the victim is the latest (fcfs) or
	// the lowest priority (priority).
	tests := []struct {
		name       string
		policy     string
		priorities []int
		victim     string
	}{
		{"fcfs preempts the latest", PolicyFCFS, []int{0, 0, 0}, "r2"},
		{"priority preempts the lowest", PolicyPriority, []int{0, 9, 1}, "r1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := newFakeSink(t)
			c := newCore(t, Config{NumGPUBlocks: 12, MaxModelLen: 192, SchedulingPolicy: tt.policy}, sink)
			d := newDriver(c)
			outputs := map[string][]uint32{}
			for i, p := range tt.priorities {
				id := fmt.Sprint("r", i)
				outputs[id] = tokens(10_000*(i+1), 48)
				mustAdd(t, c, 0, &Request{ID: id, Prompt: tokens(i*1000, 64), Output: outputs[id], Priority: p})
			}
			var firstVictim string
			for c.HasWork() {
				before := map[string]bool{}
				for _, r := range c.running {
					before[r.id] = true
				}
				res := d.step(t)
				checkInvariants(t, c)
				if res.Preempted > 0 && firstVictim == "" {
					for _, r := range c.waiting.items {
						if before[r.id] {
							firstVictim = r.id
						}
					}
				}
			}
			if c.Stats().Preemptions == 0 {
				t.Fatal("no preemption")
			}
			if firstVictim != tt.victim {
				t.Errorf("first victim %q, want %q", firstVictim, tt.victim)
			}
			// Every request still produces all of its tokens, once, in order.
			for id, want := range outputs {
				var got []uint32
				for i, o := range d.outputs[id] {
					if o.Index != i {
						t.Fatalf("%s: output %d has index %d", id, i, o.Index)
					}
					got = append(got, o.Token)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: tokens %v, want %v", id, got, want)
				}
			}
			if got, want := len(sink.cached), len(c.CachedBlockHashes()); got != want {
				t.Errorf("sink has %d cached hashes, engine %d", got, want)
			}
		})
	}
}

func TestAddErrors(t *testing.T) {
	c := newCore(t, Config{MaxModelLen: 1000}, nil)
	mustAdd(t, c, 0, &Request{ID: "x", Prompt: tokens(1, 10), Output: tokens(1, 1)})
	tests := []struct {
		name string
		req  *Request
		want error
	}{
		{"too long", &Request{ID: "a", Prompt: tokens(1, 990), Output: tokens(1, 11)}, ErrPromptTooLong},
		{"exactly max", &Request{ID: "b", Prompt: tokens(1, 990), Output: tokens(1, 10)}, nil},
		{"duplicate", &Request{ID: "x", Prompt: tokens(1, 10), Output: tokens(1, 1)}, ErrDuplicateID},
		{"no output", &Request{ID: "c", Prompt: tokens(1, 10)}, ErrEmptyRequest},
		{"no prompt", &Request{ID: "d", Output: tokens(1, 10)}, ErrEmptyRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := c.Add(0, tt.req); !errors.Is(err, tt.want) {
				t.Errorf("Add = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestFinishReason(t *testing.T) {
	c := newCore(t, Config{}, nil)
	d := newDriver(c)
	mustAdd(t, c, 0, &Request{ID: "len", Prompt: tokens(1, 10), Output: tokens(1, 3)})
	mustAdd(t, c, 0, &Request{ID: "stop", Prompt: tokens(1, 10), Output: tokens(1, 3), StopAtEnd: true})
	d.run(t)
	for id, want := range map[string]string{"len": "length", "stop": "stop"} {
		outs := d.outputs[id]
		last := outs[len(outs)-1]
		if len(outs) != 3 || !last.Finished || last.FinishReason != want {
			t.Errorf("%s: %d outputs, last %+v; want 3 ending %q", id, len(outs), last, want)
		}
	}
	s := c.Stats()
	if s.PromptTokens != 20 || s.GenerationTokens != 6 {
		t.Errorf("prompt/generation tokens %d/%d, want 20/6", s.PromptTokens, s.GenerationTokens)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"defaults", Config{GPU: "rtx4090", Model: "qwen3-14b-fp8"}, false},
		{"case-insensitive names", Config{GPU: "RTX4090", Model: "Qwen3-8B"}, false},
		{"every gpu and model on h100", Config{GPU: "h100", Model: "qwen3-8b"}, false},
		{"unknown gpu", Config{GPU: "voodoo2", Model: "qwen3-8b"}, true},
		{"unknown model", Config{GPU: "rtx4090", Model: "gpt-9"}, true},
		{"bad policy", Config{GPU: "rtx4090", Model: "qwen3-8b", SchedulingPolicy: "lifo"}, true},
		{"utilisation above 1", Config{GPU: "rtx4090", Model: "qwen3-8b", GPUMemoryUtilization: 1.5}, true},
		{"no room for kv", Config{GPU: "rtx4090", Model: "qwen3-14b-fp8", GPUMemoryUtilization: 0.5}, true},
		{"max_model_len above the model's", Config{GPU: "h100", Model: "qwen3-8b", MaxModelLen: 50000}, true},
		{"max_model_len above the cache", Config{GPU: "rtx4090", Model: "qwen3-14b-fp8", MaxModelLen: 40960}, true},
		{"explicit blocks", Config{GPU: "rtx4090", Model: "qwen3-8b", NumGPUBlocks: 100, MaxModelLen: 1600}, false},
		{"negative seqs", Config{GPU: "rtx4090", Model: "qwen3-8b", MaxNumSeqs: -1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				if _, nerr := NewCore(tt.cfg, nil); nerr == nil {
					t.Error("NewCore accepted an invalid config")
				}
				return
			}
			c, err := NewCore(tt.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			eff := c.Config()
			if eff.NumGPUBlocks < 1 || eff.BlockSize != 16 || eff.MaxNumBatchedTokens != 8192 || eff.MaxModelLen < 1 {
				t.Errorf("effective config %+v", eff)
			}
		})
	}
	if len(GPUNames()) < 3 || len(ModelNames()) < 2 {
		t.Errorf("catalog: %v %v", GPUNames(), ModelNames())
	}
}

// TestQueueTime: a request that must wait for a free slot reports the wait
// as its queue time, in engine time; one scheduled at once reports none.
func TestQueueTime(t *testing.T) {
	c := newCore(t, Config{MaxNumSeqs: 1}, nil)
	d := newDriver(c)
	mustAdd(t, c, 0, &Request{ID: "first", Prompt: tokens(1, 100), Output: tokens(1, 5)})
	mustAdd(t, c, 0, &Request{ID: "second", Prompt: tokens(1000, 100), Output: tokens(1, 5)})
	d.run(t)
	if q := d.outputs["first"][0].QueueTime; q != 0 {
		t.Errorf("first request queued %v, want 0", q)
	}
	// The second starts the step after the first finished.
	if q, end := d.outputs["second"][0].QueueTime, d.done["first"]; q != end {
		t.Errorf("second request queued %v, want until the first ended at %v", q, end)
	}
	for _, o := range d.outputs["second"] {
		if o.QueueTime != d.outputs["second"][0].QueueTime {
			t.Fatalf("queue time changes between outputs: %+v", o)
		}
	}
}
