package sim

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/kvevents"
)

// The benchmarks measure the simulator's own speed in virtual time. The
// figure of merit is request-steps per second: the number of (request,
// scheduler step) pairs simulated per second of CPU, i.e. batch size x steps
// per second. One op is one Step.

func reportRequestSteps(b *testing.B, reqSteps int, elapsed time.Duration) {
	b.ReportMetric(float64(reqSteps)/elapsed.Seconds(), "req-steps/s")
	b.ReportMetric(float64(reqSteps)/float64(b.N), "reqs/step")
}

// BenchmarkStepDecode32: 32 requests decoding together, the steady state of
// a busy engine. Refilling the batch when it drains is not timed.
func BenchmarkStepDecode32(b *testing.B) {
	c := newCore(b, Config{GPU: "h100", Model: "qwen3-8b", NumGPUBlocks: 80_000, MaxModelLen: 40960}, nil)
	round := 0
	fill := func() {
		for i := range 32 {
			mustAdd(b, c, 0, &Request{ID: fmt.Sprint(round, "-", i), Prompt: tokens(i*1000, 500), Output: tokens(1, 8000)})
		}
		round++
		c.Step(0) // prefill
	}
	fill()
	reqSteps := 0
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var paused time.Duration
	for range b.N {
		if !c.HasWork() {
			b.StopTimer()
			t0 := time.Now()
			fill()
			paused += time.Since(t0)
			b.StartTimer()
		}
		reqSteps += c.Step(0).NumScheduled
	}
	reportRequestSteps(b, reqSteps, time.Since(start)-paused)
}

// BenchmarkStepAgents: an agent-like mix with arrivals, shared prefixes,
// chunked prefills, evictions and KV events into a sink; Add is part of the
// timed loop (it allocates the request's state; Step itself does not).
func BenchmarkStepAgents(b *testing.B) {
	for _, bc := range []struct {
		name string
		gib  float64
	}{{"gpu", 0}, {"gpu+ram", 4}} {
		b.Run(bc.name, func(b *testing.B) { benchAgents(b, bc.gib) })
	}
}

// benchAgents runs BenchmarkStepAgents with a host-RAM tier of gib (0: none).
func benchAgents(b *testing.B, gib float64) {
	c := newCore(b, Config{GPU: "rtx4090", Model: "qwen3-14b-fp8", MaxNumBatchedTokens: 2048, CPUOffloadGiB: gib}, discardSink{})
	rng := rand.New(rand.NewPCG(1, 2))
	prefixes := make([][]uint32, 8)
	for i := range prefixes {
		prefixes[i] = tokens(100_000*(i+1), 3000)
	}
	// Pre-build requests so that generating them is not measured.
	reqs := make([]*Request, 4096)
	for i := range reqs {
		reqs[i] = &Request{ID: fmt.Sprint(i), Prompt: randomPrompt(rng, prefixes, 400), Output: tokens(rng.IntN(1000), 50+rng.IntN(300))}
	}
	next := 0
	reqSteps := 0
	var now time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		for s := c.Stats(); s.Running+s.Waiting < 32; s = c.Stats() {
			r := reqs[next%len(reqs)]
			r.ID = fmt.Sprint(next)
			next++
			if err := c.Add(now, r); err != nil {
				b.Fatal(err)
			}
		}
		res := c.Step(now)
		now += res.Duration
		reqSteps += res.NumScheduled
	}
	reportRequestSteps(b, reqSteps, time.Since(start))
	b.ReportMetric(float64(now)/float64(time.Since(start)), "x-realtime")
}

type discardSink struct{}

func (discardSink) PublishKVEvents(time.Duration, []kvevents.Event) {}

// TestStepDoesNotAllocate: a decode step of a running batch allocates
// nothing.
func TestStepDoesNotAllocate(t *testing.T) {
	c := newCore(t, Config{}, discardSink{})
	for i := range 32 {
		mustAdd(t, c, 0, &Request{ID: fmt.Sprint(i), Prompt: tokens(i*1000, 200), Output: tokens(1, 1000)})
	}
	c.Step(0)
	c.Step(0)
	if n := testing.AllocsPerRun(200, func() { c.Step(0) }); n != 0 {
		t.Errorf("Step allocates %v times per run, want 0", n)
	}
}
