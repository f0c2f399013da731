package catalog

import (
	"math"
	"testing"
	"time"
)

func fourNinety(t testing.TB, n int) []GPUUse {
	gpus := make([]GPUUse, n)
	for i := range gpus {
		gpus[i] = GPUUse{GPU: gpu(t, "rtx4090")}
	}
	return gpus
}

func TestKVBytesPerTokenOfLayout(t *testing.T) {
	m := model(t, "qwen3-14b-fp8") // 40 layers, 8 KV heads of 128
	tests := []struct {
		layout Layout
		want   int
	}{
		{Layout{}, 2 * 40 * 8 * 128 * 2},
		{Layout{KVCacheDtype: KVCacheFP8}, 2 * 40 * 8 * 128},
		{Layout{KVCacheDtype: "fp8_e5m2"}, 2 * 40 * 8 * 128},
		{Layout{TP: 2}, 2 * 40 * 4 * 128 * 2},
		{Layout{TP: 2, KVCacheDtype: KVCacheFP8}, 2 * 40 * 4 * 128},
		{Layout{TP: 16}, 2 * 40 * 1 * 128 * 2}, // heads replicated past 8
	}
	for _, tt := range tests {
		if got := MemoryOf(m, tt.layout, DefaultMaxBatchedTokens).KVBytesPerToken; got != tt.want {
			t.Errorf("%v: %d bytes per token, want %d", tt.layout, got, tt.want)
		}
	}
}

func TestLayoutValidate(t *testing.T) {
	for _, ok := range []Layout{{}, {TP: 2, KVCacheDtype: "fp8"}, {KVCacheDtype: "auto"}, {KVCacheDtype: "fp8_e4m3"}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for _, bad := range []Layout{{KVCacheDtype: "int4"}, {TP: -1}, {KVCacheDtype: "nvfp4"}} {
		if bad.Validate() == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestAllReduceSeconds(t *testing.T) {
	g := gpu(t, "rtx4090")
	if g.AllReduceSeconds(1e6, 1) != 0 {
		t.Error("one GPU all-reduces")
	}
	// Ring over two GPUs through host memory: 2(2-1)/2 x bytes at half of
	// 25 GB/s, plus 25 µs.
	if got, want := g.AllReduceSeconds(1e6, 2), 25e-6+1e6/12.5e9; math.Abs(got-want) > 1e-12 {
		t.Errorf("2 GPUs: %v s, want %v", got, want)
	}
	if got, want := g.AllReduceSeconds(1e6, 4), 25e-6+1.5*1e6/12.5e9; math.Abs(got-want) > 1e-12 {
		t.Errorf("4 GPUs: %v s, want %v", got, want)
	}
	h := gpu(t, "h200")
	if h.AllReduceSeconds(1e6, 2) >= g.AllReduceSeconds(1e6, 2)/5 {
		t.Errorf("NVLink all-reduce %v s is not far faster than PCIe's %v s", h.AllReduceSeconds(1e6, 2), g.AllReduceSeconds(1e6, 2))
	}
}

func TestRooflineTensorParallel(t *testing.T) {
	g, m := gpu(t, "rtx4090"), model(t, "qwen3-14b-fp8")
	step := func(l Layout, computed, n int) time.Duration {
		r := RooflineOfLayout(g, m, l)
		var s StepLoad
		s.Add(computed, n)
		return r.StepDuration(&s)
	}
	// Decode of one stream: published 2x4090 TP2 speedups of 1.5-1.7x
	// over one GPU (docs/perf.md, "Tensor parallelism").
	one, two := step(Layout{}, 2000, 1), step(Layout{TP: 2}, 2000, 1)
	if sp := float64(one) / float64(two); sp < 1.4 || sp > 1.8 {
		t.Errorf("TP2 decode speedup %.2f (%v -> %v), want 1.4-1.8", sp, one, two)
	}
	// 80 all-reduces of 10 KiB each add about 80 x (25 µs + 0.8 µs).
	r := RooflineOfLayout(g, m, Layout{TP: 2})
	var s StepLoad
	s.Add(2000, 1)
	noComm := r
	noComm.allReduces = 0
	if comm := r.StepDuration(&s) - noComm.StepDuration(&s); comm < 2*time.Millisecond || comm > 2200*time.Microsecond {
		t.Errorf("all-reduces of a decode step take %v, want about 2.07 ms", comm)
	}
	// A full prefill step sends 80 MiB per all-reduce: PCIe takes a large
	// share of what splitting the GEMMs saves.
	p1, p2 := step(Layout{}, 0, 8192), step(Layout{TP: 2}, 0, 8192)
	if sp := float64(p1) / float64(p2); sp < 1.05 || sp > 1.5 {
		t.Errorf("TP2 prefill speedup %.2f (%v -> %v), want 1.05-1.5", sp, p1, p2)
	}
	// FP8 KV reads half the bytes of a long decode.
	if a, b := step(Layout{}, 30000, 1), step(Layout{KVCacheDtype: KVCacheFP8}, 30000, 1); b >= a {
		t.Errorf("fp8 KV decode %v, bf16 %v", b, a)
	}
	// With NVLink the same split pays almost nothing for its all-reduces.
	h := gpu(t, "h200")
	var d StepLoad
	d.Add(0, 8192)
	h1, h2 := RooflineOf(h, m), RooflineOfLayout(h, m, Layout{TP: 2})
	if sp := float64(h1.StepDuration(&d)) / float64(h2.StepDuration(&d)); sp < 1.7 {
		t.Errorf("H200 TP2 prefill speedup %.2f, want near 2", sp)
	}
}

func TestPlanTensorParallelAndFP8(t *testing.T) {
	m := model(t, "qwen3-14b-fp8")
	plan := func(l Layout) Plan {
		t.Helper()
		lm, err := ApplyLayout(m, l)
		if err != nil {
			t.Fatal(err)
		}
		p, err := PlanEngines(PlanRequest{GPUs: fourNinety(t, 2), Model: lm, TP: l.TP, KVCacheDtype: l.KVCacheDtype})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	per := plan(Layout{})
	if len(per.Engines) != 2 || per.Engines[0].KVTokens != 29856 {
		t.Errorf("per GPU: %d engines of %d tokens, want 2 of 29,856", len(per.Engines), per.Engines[0].KVTokens)
	}
	tp2 := plan(Layout{TP: 2})
	if len(tp2.Engines) != 1 || tp2.Engines[0].KVTokens != 159536 || tp2.MaxModelLen != 40960 {
		t.Errorf("tp2: %d engines, %d tokens, context %d; want 1, 159,536, 40,960", len(tp2.Engines), tp2.Engines[0].KVTokens, tp2.MaxModelLen)
	}
	fp8 := plan(Layout{TP: 2, KVCacheDtype: KVCacheFP8})
	if got := fp8.Engines[0].KVTokens; got < 2*159536-16 || got > 2*159536+16 {
		t.Errorf("tp2 fp8: %d tokens, want twice tp2's", got)
	}
	long := plan(Layout{TP: 2, KVCacheDtype: KVCacheFP8, RopeScaling: true})
	if long.MaxModelLen != 131072 {
		t.Errorf("tp2 fp8 yarn: context %d, want 131,072", long.MaxModelLen)
	}
	// One GPU cannot hold YaRN's whole context: the longest that fits.
	if one := plan(Layout{RopeScaling: true}); one.MaxModelLen != 29856 {
		t.Errorf("per-GPU yarn: context %d, want the cache's 29,856", one.MaxModelLen)
	}
}

func TestRopeScaling(t *testing.T) {
	m := model(t, "qwen3-14b-fp8")
	if got := m.RopeScalingJSON(); got != `{"max_position_embeddings":131072,"rope_scaling":{"rope_type":"yarn","factor":4,"original_max_position_embeddings":32768}}` {
		t.Errorf("rope scaling JSON %s", got)
	}
	coder := model(t, "qwen3-coder-30b-a3b-fp8")
	if _, err := ApplyLayout(coder, Layout{RopeScaling: true}); err == nil {
		t.Error("a model without a scaled context took rope scaling")
	}
	if coder.RopeScalingJSON() != "" {
		t.Error("rope scaling JSON for a model without one")
	}
}

func TestCandidates(t *testing.T) {
	got := map[string]Candidate{}
	for _, c := range Candidates(fourNinety(t, 2), nil) {
		got[c.Model.Name+" "+c.Layout.String()] = c
	}
	for _, want := range []string{
		"qwen3-14b-fp8 per-GPU", "qwen3-14b-fp8 tp2", "qwen3-14b-fp8 tp2, fp8 KV",
		"qwen3-14b-fp8 tp2, fp8 KV, yarn", "qwen3-32b-fp8 tp2", "qwen3-4b-fp8 per-GPU, yarn",
	} {
		if _, ok := got[want]; !ok {
			t.Errorf("no candidate %q", want)
		}
	}
	for _, absent := range []string{"qwen3-32b-fp8 per-GPU", "qwen3-14b-fp8 tp4"} {
		if _, ok := got[absent]; ok {
			t.Errorf("candidate %q does not fit two 4090s", absent)
		}
	}
	if c := got["qwen3-14b-fp8 tp2, fp8 KV"]; c.Plan.KVCacheDtype != KVCacheFP8 || c.Plan.TP != 2 {
		t.Errorf("candidate plan %+v", c.Plan)
	}
}
