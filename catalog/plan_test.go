package catalog

import (
	"errors"
	"math"
	"testing"

	"github.com/hearth-llm/hearth/tokenizer"
)

func gpu(t testing.TB, kind string) GPU {
	t.Helper()
	g, ok := LookupGPU(kind)
	if !ok {
		t.Fatalf("no GPU %q", kind)
	}
	return g
}

func model(t testing.TB, name string) Model {
	t.Helper()
	m, ok := LookupModel(name)
	if !ok {
		t.Fatalf("no model %q", name)
	}
	return m
}

func TestMemoryFraction(t *testing.T) {
	tests := []struct {
		name        string
		total, used uint64
		want        float64
	}{
		{"idle board takes the default", 24 * gib, 0, 0.9},
		{"a desktop under the margin leaves the default", 24 * gib, 1 * gib, 0.9},
		{"a game leaves its memory and the margin", 24 * gib, 9 * gib, 0.58}, // (24-9-1)/24 = 0.5833
		{"rounded down, never up", 24 * gib, 4 * gib, 0.79},                  // 0.7917
		{"nothing left", 24 * gib, 23 * gib, 0},
		{"more used than the margin allows", 24 * gib, 24 * gib, -0.05},
		{"no memory", 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MemoryFraction(tt.total, tt.used); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("MemoryFraction(%d GiB, %d GiB) = %v, want %v", tt.total/gib, tt.used/gib, got, tt.want)
			}
		})
	}
}

func TestMemoryOf(t *testing.T) {
	m14 := model(t, "qwen3-14b-fp8")
	mem := MemoryOf(m14, Layout{}, 8192)
	// (2 x 17408 + 4 x 5120) x 2 bytes x 8192 tokens
	if mem.WeightBytes != m14.WeightBytes || mem.NonTorchBytes != 0.5*gib ||
		mem.ActivationBytes != 110592*8192 || mem.KVBytesPerToken != 160<<10 {
		t.Errorf("qwen3-14b-fp8 at tp 1: %+v", mem)
	}
	// The simulated engine's calibration: 1,866 blocks of 16 on an RTX 4090
	// at 0.9 (21.6 GiB - 15.7 - 0.5 - 0.84375 = 4.55625 GiB of 2.5 MiB blocks).
	kv := mem.KVCacheBytes(24*gib, 0.9)
	if math.Abs(kv-4.55625*gib) > 1 || mem.KVBlocks(kv, 16) != 1866 {
		t.Errorf("KV cache %v GiB, %d blocks; want 4.55625 GiB, 1866 blocks", kv/gib, mem.KVBlocks(kv, 16))
	}
	if mem.KVBlocks(-1, 16) != 0 || mem.KVBlocks(kv, 0) != 0 {
		t.Error("no memory or no block size must give no blocks")
	}

	m32 := model(t, "qwen3-32b-fp8")
	tp2 := MemoryOf(m32, Layout{TP: 2}, 8192)
	if tp2.WeightBytes != m32.WeightBytes/2 || tp2.KVBytesPerToken != m32.KVBytesPerToken()/2 ||
		tp2.NonTorchBytes != 1*gib || tp2.ActivationBytes != float64(25600+4*5120)*2*8192 {
		t.Errorf("qwen3-32b-fp8 at tp 2: %+v", tp2)
	}
	// Four KV heads over eight ranks: each rank keeps one head.
	coder := model(t, "qwen3-coder-30b-a3b-fp8")
	if got, want := MemoryOf(coder, Layout{TP: 8}, 8192).KVBytesPerToken, 2*48*1*128*2; got != want {
		t.Errorf("coder at tp 8: KV per token %d, want %d (one head per rank)", got, want)
	}
}

func TestPlanEngines(t *testing.T) {
	rtx4090 := gpu(t, "rtx4090")
	q14, q32 := model(t, "qwen3-14b-fp8"), model(t, "qwen3-32b-fp8")
	idle := []GPUUse{{GPU: rtx4090}}
	tests := []struct {
		name string
		req  PlanRequest
		// want, for a plan that fits
		engines, gpusPerEngine int
		util, sglang           float64
		kvTokens, ctx, turns   int
		weightGiB              float64
	}{
		{
			name: "Qwen3-14B-FP8 on an idle RTX 4090", req: PlanRequest{GPUs: idle, Model: q14},
			engines: 1, gpusPerEngine: 1, util: 0.9, sglang: 0.862, kvTokens: 29856, ctx: 29856, turns: 2, weightGiB: 15.7,
		},
		{
			name: "a game holding 4 GB leaves less", req: PlanRequest{GPUs: []GPUUse{{GPU: rtx4090, UsedBytes: 4 * gib}}, Model: q14},
			engines: 1, gpusPerEngine: 1, util: 0.79, sglang: 0.904, kvTokens: 12544, ctx: 12544, turns: 1, weightGiB: 15.7,
		},
		{
			name: "a requested context that fits", req: PlanRequest{GPUs: idle, Model: q14, MaxModelLen: 16384},
			engines: 1, gpusPerEngine: 1, util: 0.9, sglang: 0.862, kvTokens: 29856, ctx: 16384, turns: 2, weightGiB: 15.7,
		},
		{
			name: "Qwen3-32B-FP8 over two RTX 4090s at tp 2",
			req:  PlanRequest{GPUs: []GPUUse{{GPU: rtx4090}, {GPU: rtx4090}}, Model: q32, TP: 2},
			// 21.6 - 16.0 - 1.0 - 0.70 GiB = 3.90 GiB of 128 KiB tokens
			engines: 1, gpusPerEngine: 2, util: 0.9, sglang: 0.847, kvTokens: 31936, ctx: 31936, turns: 2, weightGiB: 15.998,
		},
		{
			name:    "one engine per GPU, one context for all",
			req:     PlanRequest{GPUs: []GPUUse{{GPU: rtx4090}, {GPU: rtx4090, UsedBytes: 4 * gib}}, Model: q14},
			engines: 2, gpusPerEngine: 1, util: 0.9, sglang: 0.862, kvTokens: 29856, ctx: 12544, turns: 2, weightGiB: 15.7,
		},
		{
			name: "a board the catalog does not list, by its memory",
			req:  PlanRequest{GPUs: []GPUUse{{GPU: GPUByName("NVIDIA GeForce RTX 5090", 32*gib)}}, Model: q14},
			// 28.8 - 15.7 - 0.5 - 0.84375 = 11.75625 GiB
			engines: 1, gpusPerEngine: 1, util: 0.9, sglang: 0.872, kvTokens: 77040, ctx: 40960, turns: 6, weightGiB: 15.7,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PlanEngines(tt.req)
			if err != nil {
				t.Fatalf("PlanEngines: %v", err)
			}
			if len(p.Engines) != tt.engines || p.MaxModelLen != tt.ctx || p.TP != max(tt.req.TP, 1) {
				t.Fatalf("plan: %d engines, context %d, tp %d; want %d, %d", len(p.Engines), p.MaxModelLen, p.TP, tt.engines, tt.ctx)
			}
			e := p.Engines[0]
			if len(e.GPUs) != tt.gpusPerEngine || e.GPUMemoryUtilization != tt.util || e.MemFractionStatic != tt.sglang ||
				e.KVTokens != tt.kvTokens || e.MaxModelLen != tt.ctx || e.AgentTurns != tt.turns {
				t.Errorf("engine 0: %d GPUs, util %v, sglang %v, %d KV tokens, context %d, %d turns; want %d, %v, %v, %d, %d, %d",
					len(e.GPUs), e.GPUMemoryUtilization, e.MemFractionStatic, e.KVTokens, e.MaxModelLen, e.AgentTurns,
					tt.gpusPerEngine, tt.util, tt.sglang, tt.kvTokens, tt.ctx, tt.turns)
			}
			for i, g := range e.GPUs {
				if g.Index != i || math.Abs(g.WeightBytes/gib-tt.weightGiB) > 0.001 || g.FreeBytes != g.TotalBytes-g.UsedBytes ||
					g.KVTokens%tokenizer.DefaultBlockSize != 0 || g.KVTokens < e.KVTokens {
					t.Errorf("gpu %d: %+v", i, g)
				}
				// What the engine takes fits the share it is given, and
				// the share leaves what other programs use.
				if taken := g.ReservedBytes() + g.KVCacheBytes; taken > float64(g.TotalBytes)*e.GPUMemoryUtilization+1 ||
					float64(g.TotalBytes)*e.GPUMemoryUtilization > float64(g.FreeBytes) {
					t.Errorf("gpu %d: takes %v GiB at utilisation %v of %v GiB with %v GiB used", i, taken/gib,
						e.GPUMemoryUtilization, g.TotalBytes/gib, g.UsedBytes/gib)
				}
			}
			for _, e := range p.Engines {
				if e.MaxModelLen > e.KVTokens || e.MaxModelLen > tt.req.Model.MaxModelLen {
					t.Errorf("engine context %d exceeds its %d KV tokens or the model's maximum", e.MaxModelLen, e.KVTokens)
				}
			}
		})
	}
}

func TestPlanEnginesDoesNotFit(t *testing.T) {
	rtx4090, rtx4080, rtx3080 := gpu(t, "rtx4090"), gpu(t, "rtx4080"), gpu(t, "rtx3080")
	q14, q32, q8fp8 := model(t, "qwen3-14b-fp8"), model(t, "qwen3-32b-fp8"), model(t, "qwen3-8b-fp8")
	tests := []struct {
		name string
		req  PlanRequest
		want string
	}{
		{
			name: "Qwen3-32B-FP8 on an RTX 4090",
			req:  PlanRequest{GPUs: []GPUUse{{GPU: rtx4090}}, Model: q32},
			want: "Qwen3-32B-FP8 needs 32 GB for weights; an RTX 4090 has 24 GB: try qwen3-14b-fp8, or --tp 2 on two GPUs",
		},
		{
			name: "a game holding 9 GB leaves no room for the weights",
			req:  PlanRequest{GPUs: []GPUUse{{GPU: rtx4090, UsedBytes: 9 * gib}}, Model: q14},
			want: "Qwen3-14B-FP8 needs 16 GB for weights; an RTX 4090 has 24 GB, 9 GB of it used by other programs: " +
				"close them, try qwen3-8b-fp8, or --tp 2 on two GPUs",
		},
		{
			name: "weights fit, a turn's context does not",
			req:  PlanRequest{GPUs: []GPUUse{{GPU: rtx4080}}, Model: q14},
			want: "Qwen3-14B-FP8 needs 22 GB for weights and a 12,288-token context; an RTX 4080 has 16 GB: " +
				"try qwen3-8b-fp8, or --tp 2 on two GPUs",
		},
		{
			name: "an FP8 KV cache makes room for a turn",
			req:  PlanRequest{GPUs: []GPUUse{{GPU: rtx4090, UsedBytes: 9 * gib / 2}}, Model: q14},
			want: "Qwen3-14B-FP8 needs 22 GB for weights and a 12,288-token context; an RTX 4090 has 24 GB, 5 GB of it used by other programs: " +
				"close them, --kv-cache-dtype fp8, try qwen3-8b-fp8, or --tp 2 on two GPUs",
		},
		{
			name: "the smallest GPU of several is named",
			req:  PlanRequest{GPUs: []GPUUse{{GPU: rtx4090}, {GPU: rtx3080}}, Model: q8fp8},
			want: "Qwen3-8B-FP8 needs 13 GB for weights and a 12,288-token context; an RTX 3080 has 10 GB: " +
				"try qwen3-4b-fp8, or --tp 2 on two GPUs",
		},
		{
			name: "under tp, per GPU",
			req:  PlanRequest{GPUs: []GPUUse{{GPU: rtx3080}, {GPU: rtx3080}}, Model: q32, TP: 2},
			// At tp 4 each 10 GB board would hold 8 GB of weights, 1 GB of
			// buffers and 0.5 GB of activations: no room for a cache.
			want: "Qwen3-32B-FP8 needs 16 GB per GPU for weights at --tp 2; an RTX 3080 has 10 GB: " +
				"try qwen3-8b-fp8, or --tp 8 on eight GPUs",
		},
		{
			name: "nothing fits",
			req:  PlanRequest{GPUs: []GPUUse{{GPU: GPUByName("", 4*gib)}}, Model: q32},
			want: "Qwen3-32B-FP8 needs 32 GB for weights; a GPU has 4 GB: no model Hearth knows fits it",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := PlanEngines(tt.req)
			var nf *NotFitError
			if !errors.As(err, &nf) || !errors.Is(err, ErrDoesNotFit) {
				t.Fatalf("PlanEngines: %v, want a NotFitError", err)
			}
			if err.Error() != tt.want {
				t.Errorf("got  %q\nwant %q", err.Error(), tt.want)
			}
		})
	}
}

func TestPlanEnginesContextTooLong(t *testing.T) {
	rtx4090 := gpu(t, "rtx4090")
	q14 := model(t, "qwen3-14b-fp8")
	tests := []struct {
		name string
		req  PlanRequest
		want string
	}{
		{
			name: "longer than the cache holds",
			req:  PlanRequest{GPUs: []GPUUse{{GPU: rtx4090}}, Model: q14, MaxModelLen: 32768},
			want: "Qwen3-14B-FP8 on an RTX 4090 has room for a context of 29,856 tokens, not 32,768: use --max-model-len 29856 or less",
		},
		{
			name: "the engine with less room limits all",
			req:  PlanRequest{GPUs: []GPUUse{{GPU: rtx4090}, {GPU: rtx4090, UsedBytes: 4 * gib}}, Model: q14, MaxModelLen: 16384},
			want: "Qwen3-14B-FP8 on an RTX 4090 with 4 GB used by other programs has room for a context of 12,544 tokens, " +
				"not 16,384: use --max-model-len 12544 or less",
		},
		{
			name: "longer than the model takes",
			req:  PlanRequest{GPUs: []GPUUse{{GPU: rtx4090}}, Model: q14, MaxModelLen: 65536},
			want: "Qwen3-14B-FP8 takes at most 40,960 tokens of context, not 65,536: use --max-model-len 40960 or less",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := PlanEngines(tt.req)
			var tl *ContextTooLongError
			if !errors.As(err, &tl) || !errors.Is(err, ErrContextTooLong) {
				t.Fatalf("PlanEngines: %v, want a ContextTooLongError", err)
			}
			if err.Error() != tt.want {
				t.Errorf("got  %q\nwant %q", err.Error(), tt.want)
			}
		})
	}
}

func TestPlanEnginesRejectsBadRequests(t *testing.T) {
	rtx4090 := gpu(t, "rtx4090")
	q14 := model(t, "qwen3-14b-fp8")
	two := []GPUUse{{GPU: rtx4090}, {GPU: rtx4090}}
	tests := []struct {
		name string
		req  PlanRequest
	}{
		{"no GPUs", PlanRequest{Model: q14}},
		{"no model", PlanRequest{GPUs: two}},
		{"tp does not divide the heads", PlanRequest{GPUs: []GPUUse{{GPU: rtx4090}, {GPU: rtx4090}, {GPU: rtx4090}}, Model: q14, TP: 3}},
		{"tp does not divide the GPUs", PlanRequest{GPUs: []GPUUse{{GPU: rtx4090}, {GPU: rtx4090}, {GPU: rtx4090}}, Model: q14, TP: 2}},
		{"tp beyond reason", PlanRequest{GPUs: two, Model: q14, TP: 128}},
		{"negative context", PlanRequest{GPUs: two, Model: q14, MaxModelLen: -1}},
		{"negative batch", PlanRequest{GPUs: two, Model: q14, MaxBatchedTokens: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PlanEngines(tt.req)
			if err == nil || errors.Is(err, ErrDoesNotFit) {
				t.Fatalf("PlanEngines = %+v, %v; want a request error", p, err)
			}
		})
	}
}

func TestDefaultModel(t *testing.T) {
	tests := []struct {
		name string
		gpus []GPUUse
		want string // "" for none
	}{
		{"a 24 GB board", []GPUUse{{GPU: gpu(t, "rtx4090")}}, "qwen3-14b-fp8"},
		{"a 16 GB board", []GPUUse{{GPU: gpu(t, "rtx4080")}}, "qwen3-8b-fp8"},
		{"a 10 GB board", []GPUUse{{GPU: gpu(t, "rtx3080")}}, "qwen3-4b-fp8"},
		{"a 48 GB board", []GPUUse{{GPU: gpu(t, "a6000")}}, "qwen3-32b-fp8"},
		{"the smallest of several", []GPUUse{{GPU: gpu(t, "h100")}, {GPU: gpu(t, "rtx4080")}, {GPU: gpu(t, "rtx4090")}}, "qwen3-8b-fp8"},
		{"the least free of several", []GPUUse{{GPU: gpu(t, "rtx4090")}, {GPU: gpu(t, "rtx4090"), UsedBytes: 9 * gib}}, "qwen3-8b-fp8"},
		{"too small for any", []GPUUse{{GPU: GPUByName("NVIDIA T400", 4*gib)}}, ""},
		{"a bare size", []GPUUse{{GPU: GPU{MemoryBytes: 24 * gib}}}, "qwen3-14b-fp8"},
		{"no GPUs", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DefaultModel(tt.gpus)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("DefaultModel = %s, want an error", m.Name)
				}
				if len(tt.gpus) > 0 && (!errors.Is(err, ErrDoesNotFit) || err.Error() != "no model Hearth knows fits a T400 with 4.0 GB free") {
					t.Errorf("got %q", err)
				}
				return
			}
			if err != nil || m.Name != tt.want {
				t.Fatalf("DefaultModel = %q, %v; want %q", m.Name, err, tt.want)
			}
			if _, err := PlanEngines(PlanRequest{GPUs: tt.gpus, Model: m}); err != nil {
				t.Errorf("the default model does not plan: %v", err)
			}
		})
	}
}

func TestSentenceHelpers(t *testing.T) {
	for name, want := range map[string]string{
		"RTX 4090": "an", "H100 80GB HBM3": "an", "L40S": "an", "RTX A6000": "an", "GTX 1080": "a",
		"A100": "an", "T4": "a", "GPU": "a", "Radeon": "a", "Arc": "an", "": "a",
	} {
		if got := article(name); got != want {
			t.Errorf("article(%q) = %q, want %q", name, got, want)
		}
	}
	for in, want := range map[string]string{
		"NVIDIA GeForce RTX 4090": "RTX 4090", "NVIDIA H200": "H200", "GeForce RTX 3090": "RTX 3090", "": "GPU", "nvidia l40s": "l40s",
	} {
		if got := gpuShortName(GPU{Name: in}); got != want {
			t.Errorf("gpuShortName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPlanCarriesTheStepBudget: the plan sizes the activation peak for the
// step budget it is asked for and says which (what the engines are told);
// a smaller budget leaves the KV cache more. The agent layouts plan
// AgentMaxBatchedTokens; the per-GPU layout --layout per-gpu keeps, the
// default.
func TestPlanCarriesTheStepBudget(t *testing.T) {
	q14, rtx4090 := model(t, "qwen3-14b-fp8"), gpu(t, "rtx4090")
	two := []GPUUse{{GPU: rtx4090}, {GPU: rtx4090}}
	plan := func(budget int) Plan {
		t.Helper()
		p, err := PlanEngines(PlanRequest{GPUs: two, Model: q14, TP: 2, KVCacheDtype: KVCacheFP8, MaxBatchedTokens: budget})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	def, agent := plan(0), plan(AgentMaxBatchedTokens)
	if def.MaxBatchedTokens != DefaultMaxBatchedTokens || agent.MaxBatchedTokens != AgentMaxBatchedTokens {
		t.Errorf("budgets %d and %d, want %d and %d", def.MaxBatchedTokens, agent.MaxBatchedTokens, DefaultMaxBatchedTokens, AgentMaxBatchedTokens)
	}
	l := Layout{TP: 2, KVCacheDtype: KVCacheFP8}
	for _, p := range []Plan{def, agent} {
		want := MemoryOf(q14, l, p.MaxBatchedTokens).ActivationBytes
		if got := p.Engines[0].GPUs[0].ActivationBytes; got != want {
			t.Errorf("budget %d: activations %.0f bytes, want %.0f", p.MaxBatchedTokens, got, want)
		}
	}
	if agent.Engines[0].KVTokens <= def.Engines[0].KVTokens {
		t.Errorf("KV tokens %d at %d tokens per step, %d at %d: want more with the smaller budget",
			agent.Engines[0].KVTokens, AgentMaxBatchedTokens, def.Engines[0].KVTokens, DefaultMaxBatchedTokens)
	}
	em, ok, err := PlanEngineMemory("qwen3-14b-fp8", "", two, 0, Layout{KVCacheDtype: KVCacheFP8, MaxBatchedTokens: AgentMaxBatchedTokens})
	if err != nil || !ok || em.MaxBatchedTokens != AgentMaxBatchedTokens || em.Engine.KVTokens != agent.Engines[0].KVTokens {
		t.Errorf("engine memory %+v, %v, %v: want the agent budget's plan", em, ok, err)
	}
	for _, c := range AgentCandidates(two, q14) {
		if c.Layout.MaxBatchedTokens != AgentMaxBatchedTokens || c.Plan.MaxBatchedTokens != AgentMaxBatchedTokens {
			t.Errorf("candidate %s: layout budget %d, plan's %d; want %d", c.Layout, c.Layout.MaxBatchedTokens, c.Plan.MaxBatchedTokens, AgentMaxBatchedTokens)
		}
	}
	choice, err := DefaultAgentLayout(two, q14, ClaudeCodeID)
	if err != nil {
		t.Fatal(err)
	}
	if choice.Candidate.Layout.StepBudget() != AgentMaxBatchedTokens || choice.PerGPU.Plan.MaxBatchedTokens != DefaultMaxBatchedTokens {
		t.Errorf("agent layout's budget %d, per-GPU's %d; want %d and %d", choice.Candidate.Layout.StepBudget(), choice.PerGPU.Plan.MaxBatchedTokens, AgentMaxBatchedTokens, DefaultMaxBatchedTokens)
	}
}
